// OpenMP work splitting over rows for the row-wise nn kernels (LayerNorm,
// softmax cross-entropy): one contiguous block of rows per thread, in
// parallel only when the whole job has >= kParallelMinElems elements. For a
// fixed thread count the split is fixed, so per-chunk partial sums combined in
// chunk order give the same bits on every call.
#pragma once

#include <cstddef>

#include "parallel_chunks.h"

namespace {

// Number of row chunks run_row_chunks will use (<= kMaxChunks).
inline int row_chunk_count(size_t rows, size_t dim) {
    if (rows < 2) return 1;
    const int want = chunk_count(rows * dim);
    return static_cast<size_t>(want) > rows ? static_cast<int>(rows) : want;
}

// Calls f(r0, r1, chunk) for `chunks` = row_chunk_count(rows, dim) chunks.
template <class Fn>
inline void run_row_chunks(size_t rows, int chunks, Fn&& f) {
    if (chunks <= 1) {
        f(size_t{0}, rows, 0);
        return;
    }
#pragma omp parallel for num_threads(chunks) schedule(static, 1)
    for (int c = 0; c < chunks; ++c) {
        const size_t r0 = rows * static_cast<size_t>(c) / static_cast<size_t>(chunks);
        const size_t r1 = rows * static_cast<size_t>(c + 1) / static_cast<size_t>(chunks);
        f(r0, r1, c);
    }
}

}  // namespace
