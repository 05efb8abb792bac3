// The shape of the CUDA two-stage reductions (sum of squares, LAMB's norms):
// red_blocks(n) blocks of kRedThreads threads; thread t of block b adds the
// elements b*kRedThreads + t + k*(blocks*kRedThreads) in k order; each block
// sums its threads' values by a pairwise tree (s[t] += s[t + w] for
// w = kRedThreads/2 .. 1) into a partial; stage 2, one block, does the same
// over the partials (thread t: partials t, t + kRedThreads, ...). The order
// depends on n only, so a result is the same run to run and on any GPU;
// red_emulate reproduces it on the host for the tests.
#pragma once

#include <cstddef>

#include "hd.h"

namespace ds::kernels {

constexpr int kRedThreads = 256;
constexpr int kRedMaxBlocks = 1024;
constexpr size_t kRedElemsPerThread = 4;  // aim: ~4 elements per thread before the grid is full

DSK_HD inline int red_blocks(size_t n) {
    const size_t per_block = kRedThreads * kRedElemsPerThread;
    const size_t b = (n + per_block - 1) / per_block;
    return b < 1 ? 1 : b > static_cast<size_t>(kRedMaxBlocks) ? kRedMaxBlocks : static_cast<int>(b);
}

// The pairwise tree over s[0..kRedThreads) as the device runs it level by level.
inline double red_tree_host(double* s) {
    for (int w = kRedThreads / 2; w > 0; w /= 2)
        for (int t = 0; t < w; ++t) s[t] += s[t + w];
    return s[0];
}

// Host emulation of the device reduction of term(i) over [0, n): the very
// same additions in the same order.
template <class Term>
double red_emulate(size_t n, Term&& term) {
    const int blocks = red_blocks(n);
    const size_t stride = static_cast<size_t>(blocks) * kRedThreads;
    double partial[kRedMaxBlocks];
    double s[kRedThreads];
    for (int b = 0; b < blocks; ++b) {
        for (int t = 0; t < kRedThreads; ++t) {
            double acc = 0.0;
            for (size_t i = static_cast<size_t>(b) * kRedThreads + t; i < n; i += stride) acc += term(i);
            s[t] = acc;
        }
        partial[b] = red_tree_host(s);
    }
    for (int t = 0; t < kRedThreads; ++t) {
        double acc = 0.0;
        for (int j = t; j < blocks; j += kRedThreads) acc += partial[j];
        s[t] = acc;
    }
    return red_tree_host(s);
}

}  // namespace ds::kernels
