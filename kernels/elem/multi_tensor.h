// Chunked multi-tensor apply (the launch scheme of DeepSpeed's FusedAdam,
// DEEPSPEED_SEMANTICS.md §2.2): a list of tensors is cut into chunks of
// kMtChunkElems elements, one CUDA block per chunk; each launch carries a
// metadata block (MtLaunch, passed by value as the kernel argument) naming
// up to kMtMaxTensors tensors (their DEPTH pointers and lengths) and up to
// kMtMaxBlocks (tensor slot, chunk) pairs. A tensor whose chunks do not all
// fit in one launch continues in the next one, in slot 0.
//
// Everything here but the launch itself is shared with the host tests:
// mt_plan() builds the launches, mt_block_loop() is the per-block loop the
// CUDA kernels run (blockIdx.x, threadIdx.x, blockDim.x), and the tests run
// it for every (block, thread) on the host.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hd.h"
#include "simd_scalar.h"

namespace ds::kernels {

constexpr size_t kMtChunkElems = 65536;  // 2048 * 32, as FusedAdam
constexpr int kMtMaxTensors = 32;
constexpr int kMtMaxBlocks = 320;
constexpr int kMtDepth = 5;  // p, g, state1, state2, w16
constexpr int kMtThreads = 512;

// One launch's metadata. 5*32*8 + 32*8 + 320*(1+4) + 8 = 3144 bytes: under
// the 4 KiB kernel-parameter limit every CUDA architecture has.
struct MtLaunch {
    void* ptr[kMtDepth][kMtMaxTensors];
    int64_t n[kMtMaxTensors];
    uint8_t block_slot[kMtMaxBlocks];
    int32_t block_chunk[kMtMaxBlocks];
    int32_t tensors;  // slots used
    int32_t blocks;   // blocks used (the launch's grid size)
};
static_assert(sizeof(MtLaunch) <= 4096, "kernel parameter limit");
static_assert(kMtMaxTensors <= 256, "block_slot is a uint8_t");

// The element range [*lo, *hi) of tensor slot *slot that block b covers.
DSK_HD inline void mt_block_range(const MtLaunch& l, int b, int* slot, size_t* lo, size_t* hi) {
    const int s = l.block_slot[b];
    const size_t start = static_cast<size_t>(l.block_chunk[b]) * kMtChunkElems;
    const size_t n = static_cast<size_t>(l.n[s]);
    *slot = s;
    *lo = start;
    *hi = n - start < kMtChunkElems ? n : start + kMtChunkElems;
}

// What thread `thread` of `threads` in block b does: fn(slot, i) for its
// elements i of the block's chunk (stride `threads`, so a warp's accesses
// are contiguous).
template <class Fn>
DSK_HD inline void mt_block_loop(const MtLaunch& l, int b, int thread, int threads, Fn&& fn) {
    int slot;
    size_t lo, hi;
    mt_block_range(l, b, &slot, &lo, &hi);
    for (size_t i = lo + static_cast<size_t>(thread); i < hi; i += static_cast<size_t>(threads)) fn(slot, i);
}

// Block b's share for thread `thread`: the body make(l, slot) of the
// block's tensor, built once, stepped one element at a time (V = ScalarOps,
// the CPU kernels' scalar tail).
template <class Make>
DSK_HD inline void mt_step_block(const MtLaunch& l, int b, int thread, int threads, const Make& make) {
    int slot;
    size_t lo, hi;
    mt_block_range(l, b, &slot, &lo, &hi);
    const auto body = make(l, slot);
    for (size_t i = lo + static_cast<size_t>(thread); i < hi; i += static_cast<size_t>(threads))
        body.template step<ScalarOps>(i);
}

// Builds the launches for tensors 0..count-1 (ptrs(t, d): pointer d of
// tensor t; len(t): its length; empty tensors are skipped) and calls
// launch(const MtLaunch&) for each; stops at the first launch that returns
// non-zero and returns that value, else 0.
template <class Ptrs, class Len, class Launch>
int mt_plan(size_t count, Ptrs&& ptrs, Len&& len, Launch&& launch) {
    MtLaunch l;
    l.tensors = 0;
    l.blocks = 0;
    for (size_t t = 0; t < count; ++t) {
        const size_t n = len(t);
        if (n == 0) continue;
        const size_t chunks = (n + kMtChunkElems - 1) / kMtChunkElems;
        for (size_t c = 0; c < chunks; ++c) {
            if (c == 0 || l.tensors == 0) {  // the tensor takes a slot (again, after a flush)
                const int s = l.tensors++;
                for (int d = 0; d < kMtDepth; ++d) l.ptr[d][s] = ptrs(t, d);
                l.n[s] = static_cast<int64_t>(n);
            }
            l.block_slot[l.blocks] = static_cast<uint8_t>(l.tensors - 1);
            l.block_chunk[l.blocks] = static_cast<int32_t>(c);
            ++l.blocks;
            const bool last_chunk = c + 1 == chunks;
            if (l.blocks == kMtMaxBlocks || (last_chunk && l.tensors == kMtMaxTensors)) {
                if (const int rc = launch(static_cast<const MtLaunch&>(l))) return rc;
                l.blocks = 0;
                l.tensors = 0;  // an unfinished tensor re-enters in slot 0
            }
        }
    }
    if (l.blocks > 0) return launch(static_cast<const MtLaunch&>(l));
    return 0;
}

}  // namespace ds::kernels
