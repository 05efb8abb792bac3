// In-place scaling per-element body (x = x * s in fp32, stored in x's dtype:
// the unscale of fp16 gradients), as dsk_cpu_scale and dsk_ref_scale compute it.
#pragma once

#include "simd_dtype.h"

namespace {

template <int DT>
struct ScaleBody {
    void* x;
    float s;
    template <class V>
    DSK_ALWAYS_INLINE void step(size_t i) const {
        vstore<V, DT>(x, i, V::mul(vload<V, DT>(x, i), V::set1(s)));
    }
};

}  // namespace
