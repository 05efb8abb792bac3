// Lion kernel body (reference §2.5): sign of the interpolated momentum,
// decoupled weight decay, momentum updated with beta2 afterwards.
#pragma once

#include "isa_entry.h"
#include "parallel_chunks.h"
#include "simd_dtype.h"
#include "simd_loop.h"

namespace {

template <int GD, int WD>
struct LionBody {
    ds::kernels::LionArgs a;
    ds::kernels::LionConsts c;
    bool stream;  // non-temporal w16 stores (see stream_w16)

    template <class V>
    DSK_ALWAYS_INLINE void step(size_t i) const {
        using F = typename V::F;
        const F g = V::mul(vload<V, GD>(a.g, i), V::set1(c.grad_scale));
        F p = V::load_f32(a.p + i);
        const F m = V::load_f32(a.m + i);
        const F interp = V::fma(g, V::set1(c.one_minus_beta1), V::mul(m, V::set1(c.beta1)));
        if (c.has_wd) p = V::mul(p, V::set1(c.decay));
        p = V::fma(V::set1(c.neg_lr), V::sign(interp), p);
        V::store_f32(a.p + i, p);
        V::store_f32(a.m + i, V::fma(g, V::set1(c.one_minus_beta2), V::mul(m, V::set1(c.beta2))));
        vstore_w16<V, WD>(a.w16, i, p, stream);
    }
};

template <class V>
void lion_run(const ds::kernels::LionArgs& a, const ds::kernels::LionConsts& c) {
    with_dtype(a.g_dtype, [&](auto gd) {
        with_out16(a.w16, a.w_dtype, [&](auto wd) {
            const LionBody<decltype(gd)::value, decltype(wd)::value> body{a, c, stream_w16(a.w16, a.n)};
            run_chunks(a.n, unroll_elems<V>(),
                       [&](size_t lo, size_t hi, int) { vector_loop_w16<V>(lo, hi, body); });
        });
    });
}

}  // namespace
