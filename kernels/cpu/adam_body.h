// Fused Adam/AdamW kernel body, DeepSpeed CPU-Adam order of operations
// (reference §2.1): one pass reading g, p, m, v and writing p, m, v (+ w16).
#pragma once

#include "isa_entry.h"
#include "parallel_chunks.h"
#include "simd_dtype.h"
#include "simd_loop.h"

namespace {

template <int GD, int SD, int WD>
struct AdamBody {
    ds::kernels::AdamArgs a;
    ds::kernels::AdamConsts c;
    bool stream;  // non-temporal w16 stores (see stream_w16)

    template <class V>
    DSK_ALWAYS_INLINE void step(size_t i) const {
        using F = typename V::F;
        F g = V::mul(vload<V, GD>(a.g, i), V::set1(c.grad_scale));
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

template <class V>
void adam_run(const ds::kernels::AdamArgs& a, const ds::kernels::AdamConsts& c) {
    with_dtype(a.g_dtype, [&](auto gd) {
        with_dtype(a.state_dtype, [&](auto sd) {
            with_out16(a.w16, a.w_dtype, [&](auto wd) {
                const AdamBody<decltype(gd)::value, decltype(sd)::value, decltype(wd)::value> body{
                    a, c, stream_w16(a.w16, a.n)};
                run_chunks(a.n, unroll_elems<V>(),
                           [&](size_t lo, size_t hi, int) { vector_loop_w16<V>(lo, hi, body); });
            });
        });
    });
}

}  // namespace
