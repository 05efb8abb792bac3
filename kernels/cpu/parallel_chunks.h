// OpenMP work splitting for the CPU kernels: one contiguous chunk per thread,
// chunk boundaries on multiples of `align` elements (the vector width times
// the unroll), the remainder (and the scalar tail) in the last chunk. Small
// ranges (< kParallelMinElems) run on the calling thread with no OpenMP
// overhead. For a fixed thread count the split is fixed, so reductions that
// combine per-chunk partials in chunk order are deterministic.
#pragma once

#include <omp.h>

#include <cstddef>

namespace {

constexpr size_t kParallelMinElems = 65536;
constexpr int kMaxChunks = 256;

inline int chunk_count(size_t n) {
    if (n < kParallelMinElems || omp_in_parallel()) return 1;
    const int t = omp_get_max_threads();
    return t < 1 ? 1 : t > kMaxChunks ? kMaxChunks : t;
}

// Calls f(lo, hi, chunk) for every chunk; returns the number of chunks used
// (<= kMaxChunks), i.e. how many per-chunk partials a reduction must combine.
template <class Fn>
inline int run_chunks(size_t n, size_t align, Fn&& f) {
    const int want = chunk_count(n);
    if (want <= 1) {
        f(size_t{0}, n, 0);
        return 1;
    }
    int used = 1;
#pragma omp parallel num_threads(want)
    {
        const int nt = omp_get_num_threads();
        const int t = omp_get_thread_num();
        const size_t per = n / static_cast<size_t>(nt) / align * align;
        const size_t lo = per * static_cast<size_t>(t);
        const size_t hi = t == nt - 1 ? n : lo + per;
        f(lo, hi, t);
        if (t == 0) used = nt;
    }
    return used;
}

}  // namespace
