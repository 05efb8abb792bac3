// SGD per-element body (torch.optim.SGD semantics: weight decay, momentum
// with dampening, nesterov, buffer initialised to g on the first step),
// shared by the CPU and CUDA kernels.
#pragma once

#include "step_body.h"

namespace {

template <int GD, int WD>
struct SgdBody : StepBodyBase<ds::kernels::SgdArgs, ds::kernels::SgdConsts> {
    template <class V>
    DSK_ALWAYS_INLINE void step(size_t i) const {
        using F = typename V::F;
        F g = scaled_grad<V, GD>(a, c.grad_scale, i);
        F p = V::load_f32(a.p + i);
        if (c.has_wd) g = V::fma(V::set1(c.wd), p, g);
        if (c.has_momentum) {
            const F mu = V::set1(c.momentum);
            const F b = c.first_step
                            ? g
                            : V::fma(g, V::set1(c.one_minus_dampening), V::mul(V::load_f32(a.buf + i), mu));
            V::store_f32(a.buf + i, b);
            g = c.nesterov ? V::fma(mu, b, g) : b;
        }
        p = V::fma(V::set1(c.neg_lr), g, p);
        V::store_f32(a.p + i, p);
        vstore_w16<V, WD>(a.w16, i, p, stream);
    }
};

}  // namespace
