// The Embedding kernels' per-thread code (nn_embedding.h semantics), run by
// kernels/cuda/embedding.cu and, for every (block, thread), by the host
// tests (tests/unit/cuda_nn_kernels_test.cpp).
//
// Forward: block b gathers rows b, b + grid, ...; thread t their columns
// t, t + threads, ...
// Backward (deterministic, no float atomics, equal to the CPU kernel bit for
// bit): the token indices are sorted by id with a STABLE sort (on the device
// CUB's radix sort of (id, token) pairs), so each id's tokens form one run
// in token order; the thread of (run start k, column c) then adds dweight's
// element and the run's dy elements in that order, one float add at a time
// as the CPU kernel's `dst[c] += src[c]` over i does. Threads of other k
// return at once. A frequent id's run is summed serially: that is the price
// of the CPU's order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../dtype_codes.h"
#include "hd.h"

namespace ds::kernels {

constexpr unsigned kEmbThreads = 256;
constexpr unsigned kEmbMaxGrid = 65535;

DSK_HD inline int64_t emb_id_at(const void* ids, int dtype, size_t i) {
    return dtype == DSK_I32 ? static_cast<const int32_t*>(ids)[i] : static_cast<const int64_t*>(ids)[i];
}

// Token i's id checked against [0, num): false when outside. keys/vals
// (nullable: the forward's check only) receive the sort's input pair.
DSK_HD inline bool emb_key_elem(const void* ids, int dtype, int64_t num, size_t i, uint32_t* keys, uint32_t* vals) {
    const int64_t id = emb_id_at(ids, dtype, i);
    if (id < 0 || id >= num) return false;
    if (keys) {
        keys[i] = static_cast<uint32_t>(id);
        vals[i] = static_cast<uint32_t>(i);
    }
    return true;
}

struct EmbFwdArgs {
    const float* weight;
    const void* ids;
    int id_dtype;
    size_t n, dim;
    float* out;
};

// Threads per block of either kernel: the columns, rounded up to a warp, at most kEmbThreads.
DSK_HD inline unsigned emb_threads(size_t dim) {
    return dim >= kEmbThreads ? kEmbThreads : static_cast<unsigned>((dim + 31) / 32 * 32);
}
DSK_HD inline unsigned emb_rows_grid(size_t n) { return static_cast<unsigned>(n < kEmbMaxGrid ? n : kEmbMaxGrid); }

// Thread t of block b of a grid of `blocks` blocks of `threads` threads.
DSK_HD inline void emb_fwd_thread(const EmbFwdArgs& a, unsigned b, unsigned t, unsigned blocks, unsigned threads) {
    for (size_t i = b; i < a.n; i += blocks) {
        const float* src = a.weight + static_cast<size_t>(emb_id_at(a.ids, a.id_dtype, i)) * a.dim;
        for (size_t c = t; c < a.dim; c += threads) a.out[i * a.dim + c] = src[c];
    }
}

struct EmbBwdArgs {
    const float* dy;
    const uint32_t* skeys;  // ids sorted (stable)
    const uint32_t* stok;   // their token indices
    size_t n, dim;
    float* dweight;
};

// The (run start k, column c) thread's work: see the file comment.
DSK_HD inline void emb_bwd_elem(const EmbBwdArgs& a, size_t k, size_t c) {
    const uint32_t id = a.skeys[k];
    if (k > 0 && a.skeys[k - 1] == id) return;  // inside a run: its start sums it
    float* dst = a.dweight + static_cast<size_t>(id) * a.dim + c;
    float acc = *dst;
    for (size_t j = k; j < a.n && a.skeys[j] == id; ++j) acc += a.dy[static_cast<size_t>(a.stok[j]) * a.dim + c];
    *dst = acc;
}

// Block (bx, by) of a (ceil(dim/threads), gy) grid, thread t: column
// bx*threads + t, sorted positions k = by, by + gy, ...
DSK_HD inline void emb_bwd_thread(const EmbBwdArgs& a, unsigned bx, unsigned by, unsigned t, unsigned gy,
                                  unsigned threads) {
    const size_t c = static_cast<size_t>(bx) * threads + t;
    if (c >= a.dim) return;
    for (size_t k = by; k < a.n; k += gy) emb_bwd_elem(a, k, c);
}

}  // namespace ds::kernels
