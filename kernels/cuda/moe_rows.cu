// dsk_cuda_moe_rows_gather / _scatter_add / _dot (nn_moe.h): the MoE layer's
// dispatch and combine on token rows in device memory, with the per-element
// code of ../elem/moe_rows.h. Gather and scatter-add run one thread per
// element (the scatter-add's indices are distinct within a call, so no two
// threads add into one element: no atomics, the CPU kernel's values bit for
// bit); the row dots one warp per row, lanes striding over c and summed by
// shuffles (moe_dot_emulate's order, not the CPU's c-ascending one). The
// indices are not checked here (the layer makes them; the CPU kernel checks
// them).
#include <cinttypes>

#include "../elem/moe_rows.h"
#include "cuda_check.h"

using namespace ds::kernels;

namespace ds::kernels::cu {

__global__ void moe_gather(const float* src, size_t C, const int32_t* idx, const float* scale, size_t total,
                           float* dst) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride)
        moe_gather_elem(src, C, idx, scale, i, dst);
}

__global__ void moe_scatter_add(const float* src, size_t C, const int32_t* idx, const float* scale, size_t total,
                                float* dst) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride)
        moe_scatter_add_elem(src, C, idx, scale, i, dst);
}

constexpr int kDotWarps = 8;  // rows per block of 256 threads

__global__ void moe_dot(const float* a, int64_t C, const int32_t* idx, const float* b, int64_t n, float* out) {
    const int64_t j = static_cast<int64_t>(blockIdx.x) * kDotWarps + threadIdx.x / kMoeDotLanes;
    const int lane = static_cast<int>(threadIdx.x % kMoeDotLanes);
    if (j >= n) return;
    float acc = moe_dot_lane(a + static_cast<int64_t>(idx[j]) * C, b + j * C, C, lane);
    for (int off = kMoeDotLanes / 2; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) out[j] = acc;
}

}  // namespace ds::kernels::cu

namespace {

int check(const char* kernel, const void* table, const void* rows, const void* idx, int64_t S, int64_t C,
          int64_t n) {
    if (S < 0 || C < 0 || n < 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: negative size (S %" PRId64 ", C %" PRId64 ", n %" PRId64
                              ")", kernel, S, C, n);
    if (n > 0 && idx == nullptr) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: idx is NULL", kernel);
    if (n > 0 && C > 0 && (table == nullptr || rows == nullptr))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: a row buffer is NULL (n = %" PRId64 ", C = %" PRId64 ")",
                              kernel, n, C);
    return DSK_OK;
}

unsigned blocks_for(size_t total) {
    const size_t want = (total + 255) / 256;
    return static_cast<unsigned>(want < 65535 ? want : 65535);
}

}  // namespace

extern "C" int dsk_cuda_moe_rows_gather(const float* src, int64_t S, int64_t C, const int32_t* idx,
                                        const float* scale, int64_t n, float* dst, void* stream) noexcept {
    const char* kernel = "dsk_cuda_moe_rows_gather";
    if (const int rc = check(kernel, src, dst, idx, S, C, n)) return rc;
    const size_t total = static_cast<size_t>(n) * static_cast<size_t>(C);
    if (total == 0) return DSK_OK;
    ds::kernels::cu::moe_gather<<<blocks_for(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        src, static_cast<size_t>(C), idx, scale, total, dst);
    return cuda_launch_status(kernel);
}

extern "C" int dsk_cuda_moe_rows_scatter_add(const float* src, int64_t n, int64_t C, const int32_t* idx,
                                             const float* scale, int64_t S, float* dst, void* stream) noexcept {
    const char* kernel = "dsk_cuda_moe_rows_scatter_add";
    if (const int rc = check(kernel, dst, src, idx, S, C, n)) return rc;
    const size_t total = static_cast<size_t>(n) * static_cast<size_t>(C);
    if (total == 0) return DSK_OK;
    ds::kernels::cu::moe_scatter_add<<<blocks_for(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        src, static_cast<size_t>(C), idx, scale, total, dst);
    return cuda_launch_status(kernel);
}

extern "C" int dsk_cuda_moe_rows_dot(const float* a, int64_t S, int64_t C, const int32_t* idx, const float* b,
                                     int64_t n, float* out, void* stream) noexcept {
    const char* kernel = "dsk_cuda_moe_rows_dot";
    if (const int rc = check(kernel, a, b, idx, S, C, n)) return rc;
    if (n > 0 && out == nullptr) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: out is NULL", kernel);
    if (n == 0) return DSK_OK;
    const int64_t blocks = (n + ds::kernels::cu::kDotWarps - 1) / ds::kernels::cu::kDotWarps;
    if (blocks > INT32_MAX)
        return set_last_error(DSK_ERR_UNSUPPORTED, "%s: n = %" PRId64 " rows is too many for one launch", kernel, n);
    ds::kernels::cu::moe_dot<<<static_cast<unsigned>(blocks), kMoeDotLanes * ds::kernels::cu::kDotWarps, 0,
                               static_cast<cudaStream_t>(stream)>>>(a, C, idx, b, n, out);
    return cuda_launch_status(kernel);
}
