// The MoE gating's random draws (nn_moe.h): word(j) is the dropout stream's
// word at key.offset + j (Philox4x32-10, ../cpu/philox.h), u(j) = (word +
// 0.5) * 2^-32 (exact in double). Shared by the CPU's dsk_moe_uniform /
// dsk_moe_gumbel (kernels/cpu/moe_gating.cpp) and the device's jitter
// (moe_jitter.h, kernels/cuda/moe_jitter.cu), so both draw the same numbers.
#pragma once

#include <cstdint>

#include "dropout.h"

namespace {

// u(j) in double: exact (a 32-bit word plus one half, times a power of two).
DSK_HD inline double moe_uniform_exact(const ds::kernels::DropoutStream& st, uint64_t offset, uint64_t j) {
    const uint32_t w = ds::kernels::philox_word(offset + j, st.c2, st.c3, st.k);
    return (static_cast<double>(w) + 0.5) * 0x1p-32;
}

// u(j) rounded to float (RTS priorities, the jitter factors).
DSK_HD inline float moe_uniform_f(const ds::kernels::DropoutStream& st, uint64_t offset, uint64_t j) {
    return static_cast<float>(moe_uniform_exact(st, offset, j));
}

}  // namespace
