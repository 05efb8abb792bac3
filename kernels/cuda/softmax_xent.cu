// dsk_cuda_softmax_xent_fwd / _bwd (nn_ops.h semantics): one block per row,
// max and sum of exp (the CPU's exp, ../elem/exp_gelu.h) by block
// reductions; the loss sum and count by the deterministic two-stage
// reduction over rows (reduce2.cuh). Every target is checked on the device
// first and the call waits for that check, so a bad target is reported (row
// and value) before anything is written, as on the CPU.
#include <cinttypes>
#include <cmath>

#include "../elem/exp_gelu.h"
#include "block_reduce.cuh"
#include "reduce2.cuh"

using namespace ds::kernels;
using namespace ds::kernels::cu;

namespace ds::kernels::cu {

__device__ __forceinline__ int64_t target_at(const void* targets, int dtype, size_t r) {
    return dtype == DSK_I32 ? static_cast<const int32_t*>(targets)[r] : static_cast<const int64_t*>(targets)[r];
}

// *first_bad = the smallest row whose target is neither in [0, V) nor ignore_index.
__global__ void xent_check(const void* targets, int dtype, size_t rows, size_t V, int64_t ignore,
                           unsigned long long* first_bad) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t r = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += stride) {
        const int64_t t = target_at(targets, dtype, r);
        if (t != ignore && (t < 0 || static_cast<uint64_t>(t) >= V)) atomicMin(first_bad, static_cast<unsigned long long>(r));
    }
}

// Per row: lse, loss; contrib[2r] = loss, contrib[2r+1] = 1 for a counted row (0, 0 ignored).
__global__ void __launch_bounds__(kRowThreads) xent_fwd_rows(const float* logits, const void* targets, int dtype,
                                                              size_t rows, size_t V, int64_t ignore, float* row_loss,
                                                              float* row_lse, double* contrib) {
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const int64_t t = target_at(targets, dtype, r);
        if (t == ignore) {
            if (threadIdx.x == 0) {
                if (row_loss) row_loss[r] = 0.0f;
                if (row_lse) row_lse[r] = 0.0f;
                contrib[2 * r] = 0.0;
                contrib[2 * r + 1] = 0.0;
            }
            continue;
        }
        const float* row = logits + r * V;
        float mx = -INFINITY;
        for (size_t j = threadIdx.x; j < V; j += kRowThreads) mx = fmaxf(mx, row[j]);
        mx = block_reduce(mx, MaxOp{});
        float s = 0.0f;
        for (size_t j = threadIdx.x; j < V; j += kRowThreads) s += vexp(row[j] - mx);
        s = block_reduce(s, SumOp{});
        if (threadIdx.x == 0) {
            const float lse = mx + logf(s);
            const float loss = lse - row[t];
            if (row_loss) row_loss[r] = loss;
            if (row_lse) row_lse[r] = lse;
            contrib[2 * r] = loss;
            contrib[2 * r + 1] = 1.0;
        }
    }
}

__global__ void __launch_bounds__(kRedThreads) sum_pairs_stage1(const double* contrib, size_t rows, double* parts) {
    double a = 0.0, b = 0.0;
    const size_t stride = static_cast<size_t>(gridDim.x) * kRedThreads;
    for (size_t r = static_cast<size_t>(blockIdx.x) * kRedThreads + threadIdx.x; r < rows; r += stride) {
        a += contrib[2 * r];
        b += contrib[2 * r + 1];
    }
    const RedSums<2> s = red_block_tree<2>(RedSums<2>{{a, b}});
    if (threadIdx.x == 0) {
        parts[2 * blockIdx.x] = s.v[0];
        parts[2 * blockIdx.x + 1] = s.v[1];
    }
}

struct StorePair {
    double* out;
    __device__ void operator()(const RedSums<2>& r) const {
        out[0] = r.v[0];
        out[1] = r.v[1];
    }
};

__global__ void __launch_bounds__(kRowThreads) xent_bwd_rows(const float* logits, const void* targets, int dtype,
                                                              const float* row_lse, size_t rows, size_t V,
                                                              int64_t ignore, float scale, float* dlogits) {
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const int64_t t = target_at(targets, dtype, r);
        float* out = dlogits + r * V;
        const float* row = logits + r * V;
        const bool counted = t != ignore;
        const float lse = counted ? row_lse[r] : 0.0f;
        for (size_t j = threadIdx.x; j < V; j += kRowThreads) {
            float d = 0.0f;
            if (counted) {
                d = scale * vexp(row[j] - lse);
                if (static_cast<int64_t>(j) == t) d -= scale;
            }
            out[j] = d;
        }
    }
}

}  // namespace ds::kernels::cu

namespace {

// Argument checks, then the targets on the device (waits for the stream).
int check_xent(const char* kernel, const float* logits, const void* targets, int target_dtype, size_t rows, size_t V,
               int64_t ignore_index, cudaStream_t st) {
    ArgCheck k(kernel);
    if (k.ptr("logits", logits, rows * V).ptr("targets", targets, rows).failed()) return k.status();
    if (target_dtype != DSK_I32 && target_dtype != DSK_I64)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: target_dtype = %d is not DSK_I32 or DSK_I64", kernel,
                              target_dtype);
    if (rows != 0 && V == 0) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: V = 0 with rows = %zu", kernel, rows);
    if (rows == 0) return DSK_OK;
    StreamScratch scratch{st};
    if (const int rc = scratch.alloc(kernel, sizeof(unsigned long long))) return rc;
    auto* bad = static_cast<unsigned long long*>(scratch.p);
    if (const int rc = cuda_status(kernel, "cudaMemsetAsync", cudaMemsetAsync(bad, 0xFF, sizeof *bad, st))) return rc;
    const size_t want = (rows + 255) / 256;
    xent_check<<<static_cast<unsigned>(want < 4096 ? want : 4096), 256, 0, st>>>(targets, target_dtype, rows, V,
                                                                               ignore_index, bad);
    if (const int rc = cuda_launch_status(kernel)) return rc;
    unsigned long long first = 0;
    if (const int rc = cuda_status(kernel, "cudaMemcpyAsync (target check)",
                                   cudaMemcpyAsync(&first, bad, sizeof first, cudaMemcpyDeviceToHost, st)))
        return rc;
    if (const int rc = cuda_status(kernel, "cudaStreamSynchronize", cudaStreamSynchronize(st))) return rc;
    if (first == ~0ull) return DSK_OK;
    int64_t t = 0;
    const size_t es = target_dtype == DSK_I32 ? 4 : 8;
    if (const int rc = cuda_status(kernel, "cudaMemcpy (bad target)",
                                   cudaMemcpy(&t, static_cast<const char*>(targets) + first * es, es,
                                              cudaMemcpyDeviceToHost)))
        return rc;
    if (es == 4) t = static_cast<int32_t>(t & 0xFFFFFFFF);
    return set_last_error(DSK_ERR_INVALID_ARGUMENT,
                          "%s: targets[%llu] = %" PRId64 " is outside [0, %zu) and is not ignore_index (%" PRId64 ")",
                          kernel, first, t, V, ignore_index);
}

unsigned row_grid(size_t rows) { return static_cast<unsigned>(rows < 65535 ? rows : 65535); }

}  // namespace

extern "C" int dsk_cuda_softmax_xent_fwd(const float* logits, const void* targets, int target_dtype, size_t rows,
                                         size_t V, int64_t ignore_index, float* row_loss, float* row_lse,
                                         double* loss_sum, int64_t* count, void* stream) noexcept {
    const char* kernel = "dsk_cuda_softmax_xent_fwd";
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    if (const int rc = check_xent(kernel, logits, targets, target_dtype, rows, V, ignore_index, st)) return rc;
    double out[2] = {0.0, 0.0};
    if (rows > 0) {
        const int blocks = red_blocks(rows);
        StreamScratch scratch{st};
        if (const int rc = scratch.alloc(kernel, sizeof(double) * (2 * rows + 2 * blocks + 2))) return rc;
        double* contrib = static_cast<double*>(scratch.p);
        double* parts = contrib + 2 * rows;
        xent_fwd_rows<<<row_grid(rows), kRowThreads, 0, st>>>(logits, targets, target_dtype, rows, V, ignore_index,
                                                              row_loss, row_lse, contrib);
        sum_pairs_stage1<<<blocks, kRedThreads, 0, st>>>(contrib, rows, parts);
        red_stage2<2><<<1, kRedThreads, 0, st>>>(parts, blocks, StorePair{parts + 2 * blocks});
        if (const int rc = cuda_launch_status(kernel)) return rc;
        if (const int rc = cuda_status(kernel, "cudaMemcpyAsync (loss sum)",
                                       cudaMemcpyAsync(out, parts + 2 * blocks, sizeof out, cudaMemcpyDeviceToHost, st)))
            return rc;
        if (const int rc = cuda_status(kernel, "cudaStreamSynchronize", cudaStreamSynchronize(st))) return rc;
    }
    if (loss_sum) *loss_sum = out[0];
    if (count) *count = static_cast<int64_t>(out[1]);
    return DSK_OK;
}

extern "C" int dsk_cuda_softmax_xent_bwd(const float* logits, const void* targets, int target_dtype,
                                         const float* row_lse, size_t rows, size_t V, int64_t ignore_index,
                                         float scale, float* dlogits, void* stream) noexcept {
    const char* kernel = "dsk_cuda_softmax_xent_bwd";
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    ArgCheck k(kernel);
    if (k.ptr("row_lse", row_lse, rows).ptr("dlogits", dlogits, rows * V).failed()) return k.status();
    if (const int rc = check_xent(kernel, logits, targets, target_dtype, rows, V, ignore_index, st)) return rc;
    if (rows == 0) return DSK_OK;
    xent_bwd_rows<<<row_grid(rows), kRowThreads, 0, st>>>(logits, targets, target_dtype, row_lse, rows, V,
                                                          ignore_index, scale, dlogits);
    return cuda_launch_status(kernel);
}
