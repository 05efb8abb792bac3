// The cuBLAS handle pool (cublas_handle.h).
#include "cublas_handle.h"

#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "cuda_check.h"

namespace ds::kernels::cu {

namespace {

using Key = std::pair<int, cudaStream_t>;  // (device, stream)

std::mutex g_mu;
// Idle handles; never freed (see the header). Leaked on purpose at exit.
std::map<Key, std::vector<cublasHandle_t>>& pool() {
    static auto* p = new std::map<Key, std::vector<cublasHandle_t>>();
    return *p;
}

// A new handle on the current device. Math mode: CUBLAS_DEFAULT_MATH, set
// explicitly, so fp32 products run in fp32 (no TF32: that needs
// CUBLAS_TF32_TENSOR_OP_MATH or a *_FAST_TF32 compute type, neither of which
// is used), plus no reduced-precision split-K reductions. No atomics
// (cuBLAS's default, set explicitly too): results do not depend on timing.
int create(const char* kernel, cublasHandle_t* h) {
    if (int s = cublas_status(kernel, "cublasCreate", cublasCreate(h)); s != DSK_OK) return s;
    cublasStatus_t st = cublasSetMathMode(
        *h, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetAtomicsMode(*h, CUBLAS_ATOMICS_NOT_ALLOWED);
    if (st != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(*h);
        *h = nullptr;
        return cublas_status(kernel, "cublasSetMathMode", st);
    }
    return DSK_OK;
}

}  // namespace

int cublas_status(const char* kernel, const char* what, cublasStatus_t s) {
    if (s == CUBLAS_STATUS_SUCCESS) return DSK_OK;
    return set_last_error(DSK_ERR_CUDA, "%s: %s failed: %s (%s)", kernel, what, cublasGetStatusName(s),
                          cublasGetStatusString(s));
}

int CublasLease::acquire(const char* kernel, cudaStream_t stream) {
    if (int s = cuda_status(kernel, "cudaGetDevice", cudaGetDevice(&caller_device_)); s != DSK_OK) return s;
    device_ = caller_device_;
    if (stream != nullptr) {
        // The stream's own device: a table's stream may belong to a device
        // other than the calling thread's current one.
        if (int s = cuda_status(kernel, "cudaStreamGetDevice", cudaStreamGetDevice(stream, &device_)); s != DSK_OK) {
            device_ = caller_device_;  // nothing to restore
            return s;
        }
        if (device_ != caller_device_)
            if (int s = cuda_status(kernel, "cudaSetDevice", cudaSetDevice(device_)); s != DSK_OK) return s;
    }
    stream_ = stream;
    {
        std::lock_guard<std::mutex> lock(g_mu);
        auto it = pool().find({device_, stream});
        if (it != pool().end() && !it->second.empty()) {
            handle_ = it->second.back();
            it->second.pop_back();
        }
    }
    if (handle_ == nullptr)
        if (int s = create(kernel, &handle_); s != DSK_OK) return s;
    // Bound per call, as the table's stream is the call's: a no-op in effect
    // since the pool is keyed by stream, but it also resets any workspace.
    return cublas_status(kernel, "cublasSetStream", cublasSetStream(handle_, stream));
}

CublasLease::~CublasLease() {
    if (handle_ != nullptr) {
        try {
            std::lock_guard<std::mutex> lock(g_mu);
            pool()[{device_, stream_}].push_back(handle_);
        } catch (...) {  // no memory to keep it: lose the handle rather than throw
        }
    }
    if (caller_device_ >= 0 && device_ != caller_device_) cudaSetDevice(caller_device_);
}

}  // namespace ds::kernels::cu
