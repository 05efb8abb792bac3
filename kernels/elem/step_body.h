// What the fused optimizer bodies (adam, sgd, lion, lamb) share, on both
// backends: their members and the gradient read (scaled by the fused
// unscale x clip factor).
#pragma once

#include "kernel_args.h"
#include "simd_dtype.h"

namespace {

// The members of every fused optimizer body: buffers, constants, and whether
// w16 is written with non-temporal stores (see stream_w16). run_step builds
// a Body{{a, c, stream}}.
template <class Args, class Consts>
struct StepBodyBase {
    Args a;
    Consts c;
    bool stream;
};

// g[i] * grad_scale in fp32, g stored in dtype GD.
template <class V, int GD>
DSK_ALWAYS_INLINE typename V::F scaled_grad(const ds::kernels::StepArgs& a, float grad_scale, size_t i) {
    return V::mul(vload<V, GD>(a.g, i), V::set1(grad_scale));
}

}  // namespace
