// Helpers of the GPU tests: the visible skip without a device, device
// buffers, and a failure counter (plain programs: ctest reads the exit
// status; 77 = skipped).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "cuda_kernels.h"

namespace gput {

constexpr int kSkip = 77;

// 0 when a device is there, else prints the reason and returns kSkip.
inline int require_device() {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        std::printf("SKIPPED: no CUDA device (cudaGetDeviceCount: %s)\n",
                    err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        return kSkip;
    }
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    std::printf("device 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    return 0;
}

inline int& failures() {
    static int f = 0;
    return f;
}

#define GPU_CHECK(cond, ...)                                                  \
    do {                                                                      \
        if (!(cond)) {                                                        \
            ++gput::failures();                                               \
            std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);       \
            std::printf(__VA_ARGS__);                                         \
            std::printf("\n");                                                \
        }                                                                     \
    } while (0)

// A call that must succeed (status DSK_OK): prints dsk_last_error() otherwise.
#define GPU_OK(call) GPU_CHECK((call) == DSK_OK, "%s", dsk_last_error())

inline void cuda_ok(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        std::printf("FAIL: %s: %s\n", what, cudaGetErrorString(e));
        std::exit(1);
    }
}

// A device copy of `bytes` host bytes; download() brings them back.
struct DevBuf {
    void* d = nullptr;
    size_t bytes = 0;
    DevBuf() = default;
    // b bytes copied from `host`, or left as cudaMalloc gives them when host is null.
    DevBuf(const void* host, size_t b) : bytes(b) {
        cuda_ok(cudaMalloc(&d, b ? b : 1), "cudaMalloc");
        if (b && host != nullptr) cuda_ok(cudaMemcpy(d, host, b, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    }
    DevBuf(const DevBuf&) = delete;
    DevBuf& operator=(const DevBuf&) = delete;
    DevBuf(DevBuf&& o) noexcept : d(o.d), bytes(o.bytes) { o.d = nullptr; }
    ~DevBuf() {
        if (d) cudaFree(d);
    }
    void download(void* host) const {
        cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        if (bytes) cuda_ok(cudaMemcpy(host, d, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    }
    template <class T>
    T* as() const {
        return static_cast<T*>(d);
    }
};

// Element i of a F32/F16/BF16 buffer as float, and back (the reference conversions).
inline float ref_load(const void* b, int dt, size_t i) {
    if (dt == DSK_F32) return static_cast<const float*>(b)[i];
    const uint16_t h = static_cast<const uint16_t*>(b)[i];
    return dt == DSK_F16 ? dsk_ref_f16_to_f32(h) : dsk_ref_bf16_to_f32(h);
}
inline void ref_store(void* b, int dt, size_t i, float x) {
    if (dt == DSK_F32)
        static_cast<float*>(b)[i] = x;
    else
        static_cast<uint16_t*>(b)[i] = dt == DSK_F16 ? dsk_ref_f32_to_f16(x) : dsk_ref_f32_to_bf16(x);
}
inline void ref_convert(const void* src, int sd, void* dst, int dd, size_t n) {
    for (size_t i = 0; i < n; ++i) ref_store(dst, dd, i, ref_load(src, sd, i));
}

// n floats uniform in [lo, hi) from seed `seed` (the tests' inputs).
inline std::vector<float> randv(size_t n, float lo, float hi, uint32_t seed) {
    std::mt19937 r(seed);
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = u(r);
    return v;
}

// The first n floats of a device buffer, after the device is idle.
inline std::vector<float> down(const DevBuf& d, size_t n) {
    std::vector<float> v(n);
    d.download(v.data());
    return v;
}

// The same float bits, element for element.
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

inline int finish(const char* name) {
    if (failures()) {
        std::printf("%s: %d failure(s)\n", name, failures());
        return 1;
    }
    std::printf("%s: passed\n", name);
    return 0;
}

}  // namespace gput
