// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy
// as 1, 2, 3", SC'11), the counter-based generator behind dropout's masks
// (nn_ops.h): 10 rounds of two 32x32->64 multiplies with a Weyl-sequence key
// schedule; each (counter, key) gives 4 independent 32-bit words.
// Anonymous namespace: this header is also compiled into the AVX2/AVX-512
// files, whose copies must stay private to them. DSK_HD: the CUDA dropout
// (kernels/cuda/dropout.cu) draws its words from these same functions.
#pragma once

#include <cstdint>

#include "../elem/hd.h"

namespace ds::kernels {
namespace {

constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

// Outputs by reference (not an array) so that a loop over counters vectorises.
DSK_ALWAYS_INLINE void philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                                         uint32_t k0, uint32_t k1, uint32_t& o0, uint32_t& o1,
                                                         uint32_t& o2, uint32_t& o3) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#elif !defined(__CUDACC__)
#pragma GCC unroll 10
#endif
    for (int round = 0; round < 10; ++round) {
        const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * c0;
        const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * c2;
        const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
        const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
        c1 = static_cast<uint32_t>(p1);
        c3 = static_cast<uint32_t>(p0);
        c0 = n0;
        c2 = n2;
        k0 += kPhiloxW0;
        k1 += kPhiloxW1;
    }
    o0 = c0;
    o1 = c1;
    o2 = c2;
    o3 = c3;
}

DSK_ALWAYS_INLINE void philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                                         uint32_t k0, uint32_t k1, uint32_t out[4]) {
    philox4x32_10(c0, c1, c2, c3, k0, k1, out[0], out[1], out[2], out[3]);
}

// The 4 words of dropout block `block` (elements 4*block .. 4*block+3).
DSK_ALWAYS_INLINE void philox_block(uint64_t block, uint32_t c2, uint32_t c3,
                                                        const uint32_t k[2], uint32_t out[4]) {
    philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), c2, c3, k[0], k[1], out);
}

// The word of stream element e.
DSK_HD inline uint32_t philox_word(uint64_t e, uint32_t c2, uint32_t c3, const uint32_t k[2]) {
    uint32_t o[4];
    philox_block(e >> 2, c2, c3, k, o);
    return o[e & 3u];
}

}  // namespace
}  // namespace ds::kernels
