// Internal interface between the dispatchers (convert.cpp, adam.cpp, ...,
// compiled for the baseline ISA) and the per-ISA implementations
// (*_avx2.cpp, *_avx512.cpp, and the scalar instantiations inside the
// dispatcher files). Dispatchers validate arguments and compute the scalar
// constants once, in baseline code, so every ISA sees bit-identical values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels.h"

namespace ds::kernels {

// Adam: constants as DeepSpeed's CPU-Adam forms them (reference §2.1).
struct AdamConsts {
    float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, bc2_rsqrt;
    float step_size;  // -lr / bias_correction1
    float wd;         // weight decay (L2 mode)
    float wd_factor;  // -lr * wd (decoupled mode)
    float grad_scale;
    bool l2, decoupled;
};
struct AdamArgs {
    float* p;
    const void* g;
    int g_dtype;
    void* m;
    void* v;
    int state_dtype;
    void* w16;  // nullable
    int w_dtype;
    size_t n;
};

struct LambConsts {
    float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, wd, grad_scale;
    bool eps_inside_sqrt;
};
struct LambArgs {
    float* p;
    const void* g;
    int g_dtype;
    float* m;
    float* v;
    void* w16;
    int w_dtype;
    size_t n;
};

struct SgdConsts {
    float momentum, one_minus_dampening, wd, neg_lr, grad_scale;
    bool has_wd, has_momentum, nesterov, first_step;
};
struct SgdArgs {
    float* p;
    const void* g;
    int g_dtype;
    float* buf;
    void* w16;
    int w_dtype;
    size_t n;
};

struct LionConsts {
    float beta1, one_minus_beta1, beta2, one_minus_beta2, decay, neg_lr, grad_scale;
    bool has_wd;
};
struct LionArgs {
    float* p;
    const void* g;
    int g_dtype;
    float* m;
    void* w16;
    int w_dtype;
    size_t n;
};

// One set of entry points per ISA namespace (scalar, avx2, avx512).
#define DSK_ISA_ENTRY_POINTS                                                                    \
    void convert(const void* src, int src_dtype, void* dst, int dst_dtype, size_t n);           \
    double sumsq(const void* x, int dtype, size_t n);                                           \
    void axpy(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, size_t n); \
    double axpy_sumsq(void* dst, int dst_dtype, const void* src, int src_dtype, float scale,    \
                      bool overwrite, size_t n);                                                \
    void adam_step(const AdamArgs& a, const AdamConsts& c);                                     \
    /* LAMB pass 1: update m, v; return |p|^2 and |u|^2 (double). */                            \
    void lamb_norms(const LambArgs& a, const LambConsts& c, double* p_sq, double* u_sq);        \
    /* LAMB pass 2: p += coef * u (coef = -step_size * trust), write w16. */                    \
    void lamb_apply(const LambArgs& a, const LambConsts& c, float coef);                        \
    void sgd_step(const SgdArgs& a, const SgdConsts& c);                                        \
    void lion_step(const LionArgs& a, const LionConsts& c);

namespace scalar {
DSK_ISA_ENTRY_POINTS
}
namespace avx2 {
DSK_ISA_ENTRY_POINTS
}
namespace avx512 {
DSK_ISA_ENTRY_POINTS
}

#undef DSK_ISA_ENTRY_POINTS

}  // namespace ds::kernels
