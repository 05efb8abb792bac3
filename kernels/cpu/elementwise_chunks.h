// Splits a flat elementwise job over threads (parallel_chunks.h, chunk
// boundaries on multiples of 64 elements so each chunk starts on a vector
// boundary for every ISA).
#pragma once

#include <cstddef>

#include "parallel_chunks.h"

namespace {

constexpr size_t kNnAlign = 64;

template <class Fn>
inline int run_flat_chunks(size_t n, Fn&& f) {
    return run_chunks(n, kNnAlign, [&](size_t lo, size_t hi, int c) { f(lo, hi, c); });
}

}  // namespace
