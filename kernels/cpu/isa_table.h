// The one ISA-dispatch mechanism of the CPU kernels: a table of the kernel
// bodies per instruction set, filled by make_isa_kernels<Ops>() in one file
// per ISA (isa_table_scalar.cpp, isa_table_avx2.cpp, isa_table_avx512.cpp,
// each compiled with that ISA's flags), and isa_kernels() picking the table
// of dsk_cpu_isa(). The entry points (adam.cpp, ...) validate, form the
// constants and call isa_kernels().<kernel>(...).
#pragma once

#include <cstddef>

#include "../elem/kernel_args.h"

namespace ds::kernels {

struct IsaKernels {
    void (*convert)(const void* src, int src_dtype, void* dst, int dst_dtype, size_t n);
    double (*sumsq)(const void* x, int dtype, size_t n);
    void (*axpy)(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, size_t n);
    double (*axpy_sumsq)(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, bool overwrite,
                         size_t n);
    void (*adam_step)(const AdamArgs& a, const AdamConsts& c);
    // LAMB pass 1: update m, v; return |p|^2 and |u|^2 (double).
    void (*lamb_norms)(const LambArgs& a, const LambConsts& c, double* p_sq, double* u_sq);
    // LAMB pass 2: p += coef * u (coef = -step_size * trust), write w16.
    void (*lamb_apply)(const LambArgs& a, const LambConsts& c, float coef);
    void (*sgd_step)(const SgdArgs& a, const SgdConsts& c);
    void (*lion_step)(const LionArgs& a, const LionConsts& c);
};

extern const IsaKernels kScalarKernels;
extern const IsaKernels kAvx2Kernels;
extern const IsaKernels kAvx512Kernels;

// The table of the ISA in use (dsk_cpu_isa(): detected once, overridable).
// Defined in isa.cpp (baseline code: no inline function here, as this header
// is also compiled with the AVX flags).
const IsaKernels& isa_kernels();

}  // namespace ds::kernels

// Only in the isa_table_<isa>.cpp files, after that ISA's simd_<isa>.h.
#ifdef DSK_ISA_TABLE_INSTANTIATE
#include "adam_body.h"
#include "convert_body.h"
#include "lamb_body.h"
#include "lion_body.h"
#include "reduce_body.h"
#include "sgd_body.h"

namespace {

template <class V>
constexpr ds::kernels::IsaKernels make_isa_kernels() {
    return {&convert_run<V>, &sumsq_run<V>,      &axpy_run<V>,       &axpy_sumsq_run<V>, &adam_run<V>,
            &lamb_norms_run<V>, &lamb_apply_run<V>, &sgd_run<V>,        &lion_run<V>};
}

}  // namespace
#endif
