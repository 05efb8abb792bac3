// LAMB per-element bodies (FusedLamb semantics, DEEPSPEED_SEMANTICS.md §2.3),
// shared by the CPU and CUDA kernels. Pass 1 updates m, v and adds |p|^2,
// |u|^2 to double accumulators; pass 2 recomputes u from the stored m, v, p
// and applies p += coef * u. The trust ratio between them: ../ref/lamb_trust.h.
#pragma once

#include "step_body.h"

namespace {

// u = m/denom + wd*p with denom = sqrt(v)+eps, or sqrt(v+eps) when eps is inside.
template <class V>
DSK_ALWAYS_INLINE typename V::F lamb_u(const ds::kernels::LambConsts& c, typename V::F m, typename V::F v,
                                       typename V::F p) {
    const typename V::F eps = V::set1(c.eps);
    const typename V::F denom = c.eps_inside_sqrt ? V::sqrt(V::add(v, eps)) : V::add(V::sqrt(v), eps);
    return V::fma(V::set1(c.wd), p, V::div(m, denom));
}

template <int GD>
struct LambPass1 {
    ds::kernels::LambArgs a;
    ds::kernels::LambConsts c;

    template <class V>
    DSK_ALWAYS_INLINE void step(size_t i, typename V::DAcc& p_acc, typename V::DAcc& u_acc) const {
        using F = typename V::F;
        const F g = scaled_grad<V, GD>(a, c.grad_scale, i);
        const F p = V::load_f32(a.p + i);
        const F m = V::fma(g, V::set1(c.one_minus_beta1), V::mul(V::load_f32(a.m + i), V::set1(c.beta1)));
        const F v =
            V::fma(V::mul(g, g), V::set1(c.one_minus_beta2), V::mul(V::load_f32(a.v + i), V::set1(c.beta2)));
        V::store_f32(a.m + i, m);
        V::store_f32(a.v + i, v);
        V::dacc_add_sq(p_acc, p);
        V::dacc_add_sq(u_acc, lamb_u<V>(c, m, v, p));
    }
};

template <int WD>
struct LambPass2 {
    ds::kernels::LambArgs a;
    ds::kernels::LambConsts c;
    float coef;
    bool stream;  // non-temporal w16 stores (see stream_w16)

    template <class V>
    DSK_ALWAYS_INLINE void step(size_t i) const {
        using F = typename V::F;
        const F p = V::load_f32(a.p + i);
        const F u = lamb_u<V>(c, V::load_f32(a.m + i), V::load_f32(a.v + i), p);
        const F q = V::fma(V::set1(coef), u, p);
        V::store_f32(a.p + i, q);
        vstore_w16<V, WD>(a.w16, i, q, stream);
    }
};

}  // namespace
