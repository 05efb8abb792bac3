// Adam/AdamW per-element body, DeepSpeed CPU-Adam order of operations
// (DEEPSPEED_SEMANTICS.md §2.1): one pass reading g, p, m, v and writing p, m, v (+ w16).
// Shared by the CPU kernels (V = a SIMD width) and the CUDA multi-tensor
// kernel (V = ScalarOps, one element per thread).
#pragma once

#include "step_body.h"

namespace {

template <int GD, int SD, int WD>
struct AdamBody : StepBodyBase<ds::kernels::AdamArgs, ds::kernels::AdamConsts> {
    template <class V>
    DSK_ALWAYS_INLINE void step(size_t i) const {
        using F = typename V::F;
        F g = scaled_grad<V, GD>(a, c.grad_scale, i);
        F p = V::load_f32(a.p + i);
        F m = vload<V, SD>(a.m, i);
        F v = vload<V, SD>(a.v, i);
        if (c.l2) g = V::fma(V::set1(c.wd), p, g);
        m = V::fma(g, V::set1(c.one_minus_beta1), V::mul(m, V::set1(c.beta1)));
        v = V::fma(V::mul(g, g), V::set1(c.one_minus_beta2), V::mul(v, V::set1(c.beta2)));
        const F denom = V::fma(V::sqrt(v), V::set1(c.bc2_rsqrt), V::set1(c.eps));
        const F u = V::div(m, denom);
        if (c.decoupled) p = V::fma(V::set1(c.wd_factor), p, p);
        p = V::fma(V::set1(c.step_size), u, p);
        V::store_f32(a.p + i, p);
        vstore<V, SD>(a.m, i, m);
        vstore<V, SD>(a.v, i, v);
        vstore_w16<V, WD>(a.w16, i, p, stream);
    }
};

}  // namespace
