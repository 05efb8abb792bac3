// scratch_pool.h: one memory pool per device, made on first use.
#include "scratch_pool.h"

#include <cstdint>
#include <cstdio>
#include <mutex>

#include "cuda_check.h"

namespace ds::kernels::cu {

namespace {

constexpr int kMaxDevices = 64;

std::mutex g_mu;
cudaMemPool_t g_pools[kMaxDevices] = {};
bool g_tried[kMaxDevices] = {};

// A pool of device memory on `device` that keeps what it reserved; null if
// the device has none or it cannot be made (the reason is cleared: the
// default pool serves then).
cudaMemPool_t make_pool(int device) {
    int supported = 0;
    if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess || !supported) {
        cudaGetLastError();
        return nullptr;
    }
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    if (cudaMemPoolCreate(&pool, &props) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
    }
    uint64_t keep = UINT64_MAX;
    if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess) {
        cudaGetLastError();
        cudaMemPoolDestroy(pool);
        return nullptr;
    }
    return pool;
}

}  // namespace

cudaMemPool_t scratch_pool(int device) {
    if (device < 0 || device >= kMaxDevices) return nullptr;
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_tried[device]) {
        g_tried[device] = true;
        g_pools[device] = make_pool(device);
    }
    return g_pools[device];
}

namespace {

// "<kernel>: <call> (<what>) failed: ..." (formatted only on failure: the
// allocation runs on every reduction and bf16 product).
int failed(const char* kernel, const char* call, const char* what, cudaError_t err) {
    if (err == cudaSuccess) return DSK_OK;
    char text[160];
    std::snprintf(text, sizeof text, "%s (%s)", call, what);
    return cuda_status(kernel, text, err);
}

}  // namespace

int scratch_alloc(const char* kernel, const char* what, void** p, size_t bytes, cudaStream_t stream) {
    int device = 0;
    if (stream != nullptr) {
        if (int s = failed(kernel, "cudaStreamGetDevice", what, cudaStreamGetDevice(stream, &device))) return s;
    } else if (int s = failed(kernel, "cudaGetDevice", what, cudaGetDevice(&device))) {
        return s;
    }
    if (const cudaMemPool_t pool = scratch_pool(device))
        return failed(kernel, "cudaMallocFromPoolAsync", what, cudaMallocFromPoolAsync(p, bytes, pool, stream));
    return failed(kernel, "cudaMallocAsync", what, cudaMallocAsync(p, bytes, stream));
}

void scratch_free(void* p, cudaStream_t stream) noexcept {
    if (p != nullptr && cudaFreeAsync(p, stream) != cudaSuccess) cudaGetLastError();
}

}  // namespace ds::kernels::cu

extern "C" int dsk_cuda_release_scratch(int device) noexcept {
    using namespace ds::kernels::cu;
    std::lock_guard<std::mutex> lock(g_mu);
    for (int d = 0; d < kMaxDevices; ++d) {
        if ((device >= 0 && d != device) || g_pools[d] == nullptr) continue;
        const cudaError_t e = cudaMemPoolTrimTo(g_pools[d], 0);
        if (e != cudaSuccess) {
            char what[64];
            std::snprintf(what, sizeof what, "cudaMemPoolTrimTo (scratch pool of cuda:%d)", d);
            return ds::kernels::cuda_status("dsk_cuda_release_scratch", what, e);
        }
    }
    return DSK_OK;
}
