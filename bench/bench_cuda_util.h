// What the CUDA benchmarks of this folder share (bench_cuda_adam,
// bench_cuda_engine): CUDA and kernel calls that must succeed, the median of
// timings, a GPT-2-shaped list of parameter tensors, device buffers filled
// with a pattern, event timing, and the GPU the run is on. Header-only.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "cuda_kernels.h"
#include "deepspeed_c.h"

namespace bench_cuda {

inline void cuda_ok(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        std::fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(e));
        std::exit(1);
    }
}

inline void dsk_ok(int rc, const char* what) {
    if (rc != DSK_OK) {
        std::fprintf(stderr, "%s failed (%d): %s\n", what, rc, dsk_last_error());
        std::exit(1);
    }
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The parameter tensors of a GPT-2-style model, in order: token and position
// embeddings, per layer ln1 (w, b), qkv (w, b), attention projection (w, b),
// ln2 (w, b), MLP fc (w, b) and projection (w, b), then the final ln (w, b).
inline std::vector<size_t> gpt_tensor_sizes(size_t layers, size_t d, size_t vocab, size_t ctx) {
    std::vector<size_t> s{vocab * d, ctx * d};
    for (size_t l = 0; l < layers; ++l) {
        const size_t layer[] = {d, d, 3 * d * d, 3 * d, d * d, d, d, d, 4 * d * d, 4 * d, 4 * d * d, d};
        s.insert(s.end(), std::begin(layer), std::end(layer));
    }
    s.push_back(d);
    s.push_back(d);
    return s;
}

// A device buffer of `bytes` filled with a repeating pattern of floats in
// [lo, hi) (uploaded once, replicated device to device: no fill kernel).
inline void* dev_alloc_filled(size_t bytes, float lo, float hi, uint32_t seed) {
    void* d = nullptr;
    cuda_ok(cudaMalloc(&d, bytes), "cudaMalloc");
    const size_t pat_n = size_t{1} << 20;  // 4 MiB pattern
    std::vector<float> pat(pat_n);
    for (size_t i = 0; i < pat_n; ++i) {
        uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        pat[i] = lo + (hi - lo) * static_cast<float>(h >> 8) * (1.0f / 16777216.0f);
    }
    const size_t pat_bytes = pat_n * sizeof(float);
    for (size_t off = 0; off < bytes; off += pat_bytes) {
        const size_t b = std::min(pat_bytes, bytes - off);
        cuda_ok(cudaMemcpy(static_cast<char*>(d) + off, pat.data(), b, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    }
    return d;
}

// False (after printing "SKIPPED: no CUDA device (...)") where there is no
// GPU: a benchmark then exits 0.
inline bool have_device() {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err == cudaSuccess && count > 0) return true;
    std::printf("SKIPPED: no CUDA device (cudaGetDeviceCount: %s)\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return false;
}

// Milliseconds per call of fn, averaged over `iters` back-to-back calls.
inline double time_ms(const std::function<void(cudaStream_t)>& fn, cudaStream_t s, int iters, cudaEvent_t a, cudaEvent_t b) {
    cuda_ok(cudaEventRecord(a, s), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) fn(s);
    cuda_ok(cudaEventRecord(b, s), "cudaEventRecord");
    cuda_ok(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    cuda_ok(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    return static_cast<double>(ms) / iters;
}

inline void print_device() {
    int dev = 0, rt = 0, drv = 0;
    cuda_ok(cudaGetDevice(&dev), "cudaGetDevice");
    cudaDeviceProp p{};
    cuda_ok(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    std::printf("GPU: %s (sm_%d%d), %d SMs, %.1f GiB, L2 %.0f MiB\n", p.name, p.major, p.minor, p.multiProcessorCount,
                p.totalGlobalMem / 1073741824.0, p.l2CacheSize / 1048576.0);
    std::printf("CUDA runtime %d.%d, driver API %d.%d; kernels built for %s\n", rt / 1000, rt % 1000 / 10, drv / 1000,
                drv % 1000 / 10, dsk_cuda_architectures());
    std::printf("library: %s\n", ds_build_info());
}

}  // namespace bench_cuda
