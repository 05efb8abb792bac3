// The fused optimizers over a tensor list (dsk_cuda_*_multi, cuda_kernels.h):
// which metadata slot holds which of a body's buffers (p, g, state1, state2,
// w16), and the run-time dtype dispatch. Shared by the CUDA entry points and
// the host tests: `exec(launch, make)` is called once per launch with a
// body maker for the dtypes; the CUDA code launches a kernel that runs
// mt_step_block on every block, the tests run it on the host.
#pragma once

#include "adam.h"
#include "cuda_kernels.h"
#include "lion.h"
#include "multi_tensor.h"
#include "sgd.h"

namespace ds::kernels {
namespace {

DSK_HD inline StepArgs mt_step_args(const MtLaunch& l, int s, int g_dtype, int w_dtype) {
    return StepArgs{static_cast<float*>(l.ptr[0][s]), l.ptr[1][s], g_dtype, l.ptr[4][s], w_dtype,
                    static_cast<size_t>(l.n[s])};
}

template <int GD, int SD, int WD>
struct AdamMake {
    AdamConsts c;
    DSK_HD AdamBody<GD, SD, WD> operator()(const MtLaunch& l, int s) const {
        return {{AdamArgs{mt_step_args(l, s, GD, WD), l.ptr[2][s], l.ptr[3][s], SD}, c, false}};
    }
};

template <int GD, int WD>
struct SgdMake {
    SgdConsts c;
    DSK_HD SgdBody<GD, WD> operator()(const MtLaunch& l, int s) const {
        return {{SgdArgs{mt_step_args(l, s, GD, WD), static_cast<float*>(l.ptr[2][s])}, c, false}};
    }
};

template <int GD, int WD>
struct LionMake {
    LionConsts c;
    DSK_HD LionBody<GD, WD> operator()(const MtLaunch& l, int s) const {
        return {{LionArgs{mt_step_args(l, s, GD, WD), static_cast<float*>(l.ptr[2][s])}, c, false}};
    }
};

// Plans the launches of tensor list t and calls exec(launch, make) for each.
template <class MakeFor, class Exec>
int mt_run(const dsk_opt_tensor* t, size_t count, const MakeFor& make, Exec&& exec) {
    return mt_plan(
        count,
        [&](size_t i, int d) -> void* {
            switch (d) {
                case 0: return t[i].p;
                case 1: return const_cast<void*>(t[i].g);
                case 2: return t[i].state1;
                case 3: return t[i].state2;
                default: return t[i].w16;
            }
        },
        [&](size_t i) { return t[i].n; }, [&](const MtLaunch& l) { return exec(l, make); });
}

// exec(launch, make) for every launch of an Adam step over t (dtypes
// validated by the caller; w16 presence from t[0]).
template <class Exec>
int adam_mt(const dsk_opt_tensor* t, size_t count, int g_dtype, int state_dtype, int w_dtype,
            const AdamConsts& c, Exec&& exec) {
    int rc = 0;
    with_dtype(g_dtype, [&](auto gd) {
        with_dtype(state_dtype, [&](auto sd) {
            with_out16(count ? t[0].w16 : nullptr, w_dtype, [&](auto wd) {
                const AdamMake<decltype(gd)::value, decltype(sd)::value, decltype(wd)::value> make{c};
                rc = mt_run(t, count, make, exec);
            });
        });
    });
    return rc;
}

template <class Exec>
int sgd_mt(const dsk_opt_tensor* t, size_t count, int g_dtype, int w_dtype, const SgdConsts& c, Exec&& exec) {
    int rc = 0;
    with_dtype(g_dtype, [&](auto gd) {
        with_out16(count ? t[0].w16 : nullptr, w_dtype, [&](auto wd) {
            const SgdMake<decltype(gd)::value, decltype(wd)::value> make{c};
            rc = mt_run(t, count, make, exec);
        });
    });
    return rc;
}

template <class Exec>
int lion_mt(const dsk_opt_tensor* t, size_t count, int g_dtype, int w_dtype, const LionConsts& c, Exec&& exec) {
    int rc = 0;
    with_dtype(g_dtype, [&](auto gd) {
        with_out16(count ? t[0].w16 : nullptr, w_dtype, [&](auto wd) {
            const LionMake<decltype(gd)::value, decltype(wd)::value> make{c};
            rc = mt_run(t, count, make, exec);
        });
    });
    return rc;
}

}  // namespace
}  // namespace ds::kernels
