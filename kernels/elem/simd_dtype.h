// Load/store a vector of V::W elements of a compile-time dtype, converting
// to/from fp32. DT is DSK_F32, DSK_F16, DSK_BF16, or kNoStore (skip store).
// vload/vstore/vstore_w16 are DSK_HD: the CUDA kernels use them with
// V = ScalarOps (simd_scalar.h); with_dtype/with_out16 are host dispatch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "hd.h"
#include "kernels.h"

namespace {

constexpr int kNoStore = -1;

template <class V, int DT>
DSK_ALWAYS_INLINE typename V::F vload(const void* base, size_t i) {
    if constexpr (DT == DSK_F16)
        return V::load_f16(static_cast<const uint16_t*>(base) + i);
    else if constexpr (DT == DSK_BF16)
        return V::load_bf16(static_cast<const uint16_t*>(base) + i);
    else
        return V::load_f32(static_cast<const float*>(base) + i);
}

template <class V, int DT>
DSK_ALWAYS_INLINE void vstore(void* base, size_t i, typename V::F x) {
    if constexpr (DT == DSK_F16)
        V::store_f16(static_cast<uint16_t*>(base) + i, x);
    else if constexpr (DT == DSK_BF16)
        V::store_bf16(static_cast<uint16_t*>(base) + i, x);
    else if constexpr (DT == DSK_F32)
        V::store_f32(static_cast<float*>(base) + i, x);
}

// The optional 16-bit weight copy (w16) of the optimizers. Large outputs
// whose base is 64-byte aligned are written with non-temporal stores: the
// copy is write-only here and far larger than the caches, and skipping the
// read-for-ownership measured ~5-10 % faster on the 100M-param AdamW bench.
// Small copies use ordinary stores (the forward pass may find them in cache).
constexpr size_t kStreamMinElems = size_t{1} << 20;

inline bool stream_w16(const void* w16, size_t n) {
    return w16 != nullptr && n >= kStreamMinElems && reinterpret_cast<uintptr_t>(w16) % 64 == 0;
}

template <class V, int DT>
DSK_ALWAYS_INLINE void vstore_w16(void* base, size_t i, typename V::F x, bool stream) {
    if constexpr (DT == DSK_F16 || DT == DSK_BF16) {
        uint16_t* p = static_cast<uint16_t*>(base) + i;
        if (!stream)
            vstore<V, DT>(base, i, x);
        else if constexpr (DT == DSK_F16)
            V::stream_f16(p, x);
        else
            V::stream_bf16(p, x);
    }
}

template <int DT>
using DType = std::integral_constant<int, DT>;

// Calls f(DType<DT>{}) for a run-time dtype code F32/F16/BF16 (validated by
// the dispatchers; anything else is treated as F32).
template <class Fn>
inline void with_dtype(int dtype, Fn&& f) {
    switch (dtype) {
        case DSK_F16:
            f(DType<DSK_F16>{});
            break;
        case DSK_BF16:
            f(DType<DSK_BF16>{});
            break;
        default:
            f(DType<DSK_F32>{});
            break;
    }
}

// Same for an optional 16-bit output: no pointer -> kNoStore.
template <class Fn>
inline void with_out16(const void* ptr, int dtype, Fn&& f) {
    if (!ptr)
        f(DType<kNoStore>{});
    else if (dtype == DSK_BF16)
        f(DType<DSK_BF16>{});
    else
        f(DType<DSK_F16>{});
}

}  // namespace
