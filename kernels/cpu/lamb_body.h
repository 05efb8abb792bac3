// LAMB kernel bodies (FusedLamb semantics, DEEPSPEED_SEMANTICS.md §2.3), two passes:
// pass 1 updates m, v and accumulates |p|^2, |u|^2 in double per chunk;
// pass 2 recomputes u from the stored m, v, p and applies p += coef * u.
#pragma once

#include "step_loop.h"

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

template <class V, class Body>
void lamb_pass1_chunk(const Body& body_in, size_t lo, size_t hi, double* p_sq, double* u_sq) {
    const Body body = body_in;  // local copy: see vector_loop
    auto pv = V::dacc_zero(), uv = V::dacc_zero();
    size_t i = lo;
    for (; i + V::W <= hi; i += V::W) body.template step<V>(i, pv, uv);
    auto ps = ScalarOps::dacc_zero(), us = ScalarOps::dacc_zero();
    for (; i < hi; ++i) body.template step<ScalarOps>(i, ps, us);
    *p_sq = V::dacc_sum(pv) + ScalarOps::dacc_sum(ps);
    *u_sq = V::dacc_sum(uv) + ScalarOps::dacc_sum(us);
}

template <class V>
void lamb_norms_run(const ds::kernels::LambArgs& a, const ds::kernels::LambConsts& c, double* p_sq,
                    double* u_sq) {
    double pp[kMaxChunks], uu[kMaxChunks];
    int used = 1;
    with_dtype(a.g_dtype, [&](auto gd) {
        const LambPass1<decltype(gd)::value> body{a, c};
        used = run_chunks(a.n, unroll_elems<V>(), [&](size_t lo, size_t hi, int t) {
            lamb_pass1_chunk<V>(body, lo, hi, &pp[t], &uu[t]);
        });
    });
    double ps = 0.0, us = 0.0;
    for (int t = 0; t < used; ++t) {
        ps += pp[t];
        us += uu[t];
    }
    *p_sq = ps;
    *u_sq = us;
}

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

template <class V>
void lamb_apply_run(const ds::kernels::LambArgs& a, const ds::kernels::LambConsts& c, float coef) {
    with_out16(a.w16, a.w_dtype, [&](auto wd) {
        const LambPass2<decltype(wd)::value> body{a, c, coef, stream_w16(a.w16, a.n)};
        run_chunks(a.n, unroll_elems<V>(),
                   [&](size_t lo, size_t hi, int) { vector_loop_w16<V>(lo, hi, body); });
    });
}

}  // namespace
