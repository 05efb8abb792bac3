// LAMB on the CPU (bodies: ../elem/lamb.h), two passes: pass 1 accumulates
// |p|^2, |u|^2 in double per chunk; pass 2 applies p += coef * u.
#pragma once

#include "../elem/lamb.h"
#include "step_loop.h"

namespace {

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

template <class V>
void lamb_apply_run(const ds::kernels::LambArgs& a, const ds::kernels::LambConsts& c, float coef) {
    with_out16(a.w16, a.w_dtype, [&](auto wd) {
        const LambPass2<decltype(wd)::value> body{a, c, coef, stream_w16(a.w16, a.n)};
        run_chunks(a.n, unroll_elems<V>(),
                   [&](size_t lo, size_t hi, int) { vector_loop_w16<V>(lo, hi, body); });
    });
}

}  // namespace
