// Lion per-element body (DEEPSPEED_SEMANTICS.md §2.5), shared by the CPU and CUDA kernels.
#pragma once

#include "step_body.h"

namespace {

template <int GD, int WD>
struct LionBody : StepBodyBase<ds::kernels::LionArgs, ds::kernels::LionConsts> {
    template <class V>
    DSK_ALWAYS_INLINE void step(size_t i) const {
        using F = typename V::F;
        const F g = scaled_grad<V, GD>(a, c.grad_scale, i);
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

}  // namespace
