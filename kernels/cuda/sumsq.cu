// dsk_cuda_sumsq (global L2 norm squared, double accumulation, deterministic
// two-stage reduction), dsk_cuda_axpy_sumsq (the same reduction fused with an
// axpy: gradient accumulation and its norm in one pass) and
// dsk_cuda_check_overflow (Inf/NaN flag).
#include <cmath>

#include "../elem/axpy.h"
#include "../elem/simd_dtype.h"
#include "../elem/simd_scalar.h"
#include "reduce2.cuh"

using namespace ds::kernels;
using namespace ds::kernels::cu;

namespace ds::kernels::cu {

// Stage 1: thread sums of x[i]^2 in double (the CPU kernels' dacc_add_sq).
template <int DT>
__global__ void __launch_bounds__(kRedThreads) sumsq_stage1(const void* x, size_t n, double* parts) {
    auto acc = ScalarOps::dacc_zero();
    const size_t stride = static_cast<size_t>(gridDim.x) * kRedThreads;
    for (size_t i = static_cast<size_t>(blockIdx.x) * kRedThreads + threadIdx.x; i < n; i += stride)
        ScalarOps::dacc_add_sq(acc, vload<ScalarOps, DT>(x, i));
    const RedSums<1> r = red_block_tree<1>(RedSums<1>{{ScalarOps::dacc_sum(acc)}});
    if (threadIdx.x == 0) parts[blockIdx.x] = r.v[0];
}

struct StoreSum {
    double* out;
    __device__ void operator()(const RedSums<1>& r) const { *out = r.v[0]; }
};

// |x| is Inf or NaN: all exponent bits set (fp32 / fp16 / bf16 layouts).
template <int DT>
__device__ __forceinline__ bool nonfinite_at(const void* x, size_t i) {
    if constexpr (DT == DSK_F32) return (__float_as_uint(static_cast<const float*>(x)[i]) & 0x7F800000u) == 0x7F800000u;
    else if constexpr (DT == DSK_F16) return (static_cast<const uint16_t*>(x)[i] & 0x7C00u) == 0x7C00u;
    else return (static_cast<const uint16_t*>(x)[i] & 0x7F80u) == 0x7F80u;
}

template <int DT>
__global__ void overflow_kernel(const void* x, size_t n, int* flag) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    bool bad = false;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        bad |= nonfinite_at<DT>(x, i);
    if (bad) *flag = 1;  // every writer stores the same value
}

}  // namespace ds::kernels::cu

extern "C" int dsk_cuda_sumsq(const void* x, int dtype, size_t n, double* sumsq, int* nonfinite,
                              void* stream) noexcept {
    const char* kernel = "dsk_cuda_sumsq";
    ArgCheck k(kernel);
    if (k.dtype("dtype", dtype).ptr("x", x, n).failed()) return k.status();
    double s = 0.0;
    if (n > 0) {
        const cudaStream_t st = static_cast<cudaStream_t>(stream);
        const int blocks = red_blocks(n);
        StreamScratch scratch{st};
        if (const int rc = scratch.alloc(kernel, sizeof(double) * (blocks + 1))) return rc;
        double* parts = static_cast<double*>(scratch.p);
        with_dtype(dtype, [&](auto dt) {
            sumsq_stage1<decltype(dt)::value><<<blocks, kRedThreads, 0, st>>>(x, n, parts);
        });
        red_stage2<1><<<1, kRedThreads, 0, st>>>(parts, blocks, StoreSum{parts + blocks});
        if (const int rc = cuda_launch_status(kernel)) return rc;
        if (const int rc = cuda_status(kernel, "cudaMemcpyAsync (result)",
                                       cudaMemcpyAsync(&s, parts + blocks, sizeof s, cudaMemcpyDeviceToHost, st)))
            return rc;
        if (const int rc = cuda_status(kernel, "cudaStreamSynchronize", cudaStreamSynchronize(st))) return rc;
    }
    if (sumsq) *sumsq = s;
    if (nonfinite) *nonfinite = std::isfinite(s) ? 0 : 1;
    return DSK_OK;
}

extern "C" int dsk_cuda_check_overflow(const void* x, int dtype, size_t n, int* flag, void* stream) noexcept {
    const char* kernel = "dsk_cuda_check_overflow";
    ArgCheck k(kernel);
    if (k.dtype("dtype", dtype).ptr("x", x, n).ptr("flag", flag, 1).failed()) return k.status();
    if (n == 0) return DSK_OK;
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    constexpr int kThreads = 256;
    const size_t want = (n + kThreads * 8 - 1) / (kThreads * 8);
    const int blocks = want > 4096 ? 4096 : static_cast<int>(want);
    with_dtype(dtype, [&](auto dt) { overflow_kernel<decltype(dt)::value><<<blocks, kThreads, 0, st>>>(x, n, flag); });
    return cuda_launch_status(kernel);
}

namespace ds::kernels::cu {

// Stage 1 of axpy_sumsq: each element through the CPU's axpy_sq_one body
// (../elem/axpy.h: store, then square what was stored), summed per thread.
template <int DD, int SD, bool OVERWRITE>
__global__ void __launch_bounds__(kRedThreads) axpy_sumsq_stage1(void* dst, const void* src, float scale, size_t n,
                                                                  double* parts) {
    auto acc = ScalarOps::dacc_zero();
    const size_t stride = static_cast<size_t>(gridDim.x) * kRedThreads;
    for (size_t i = static_cast<size_t>(blockIdx.x) * kRedThreads + threadIdx.x; i < n; i += stride)
        axpy_sq_one<ScalarOps, DD, SD, OVERWRITE>(dst, src, scale, i, acc);
    const RedSums<1> r = red_block_tree<1>(RedSums<1>{{ScalarOps::dacc_sum(acc)}});
    if (threadIdx.x == 0) parts[blockIdx.x] = r.v[0];
}

}  // namespace ds::kernels::cu

extern "C" int dsk_cuda_axpy_sumsq(void* dst, int dst_dtype, const void* src, int src_dtype, float scale,
                                   int overwrite, size_t n, double* sumsq, int* nonfinite, void* stream) noexcept {
    const char* kernel = "dsk_cuda_axpy_sumsq";
    ArgCheck k(kernel);
    if (k.dtype("dst_dtype", dst_dtype).dtype("src_dtype", src_dtype).ptr("dst", dst, n).ptr("src", src, n).failed())
        return k.status();
    double s = 0.0;
    if (n > 0) {
        const cudaStream_t st = static_cast<cudaStream_t>(stream);
        const int blocks = red_blocks(n);
        StreamScratch scratch{st};
        if (const int rc = scratch.alloc(kernel, sizeof(double) * (blocks + 1))) return rc;
        double* parts = static_cast<double*>(scratch.p);
        with_dtype(dst_dtype, [&](auto dd) {
            with_dtype(src_dtype, [&](auto sd) {
                constexpr int DD = decltype(dd)::value, SD = decltype(sd)::value;
                if (overwrite)
                    axpy_sumsq_stage1<DD, SD, true><<<blocks, kRedThreads, 0, st>>>(dst, src, scale, n, parts);
                else
                    axpy_sumsq_stage1<DD, SD, false><<<blocks, kRedThreads, 0, st>>>(dst, src, scale, n, parts);
            });
        });
        red_stage2<1><<<1, kRedThreads, 0, st>>>(parts, blocks, StoreSum{parts + blocks});
        if (const int rc = cuda_launch_status(kernel)) return rc;
        if (const int rc = cuda_status(kernel, "cudaMemcpyAsync (result)",
                                       cudaMemcpyAsync(&s, parts + blocks, sizeof s, cudaMemcpyDeviceToHost, st)))
            return rc;
        if (const int rc = cuda_status(kernel, "cudaStreamSynchronize", cudaStreamSynchronize(st))) return rc;
    }
    if (sumsq) *sumsq = s;
    if (nonfinite) *nonfinite = std::isfinite(s) ? 0 : 1;
    return DSK_OK;
}
