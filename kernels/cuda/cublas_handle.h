// cuBLAS handles for the GEMM entry points (gemm.cpp, gemm_bf16.cpp).
//
// A pool of handles per (device, stream), process-wide and never freed (a
// handle destroyed at exit may outlive the CUDA context). A call borrows one
// for its duration, so two threads never share a handle (cuBLAS handles are
// not thread-safe), and a handle is only ever bound to the one stream it was
// created for: its workspace is used in that stream's order only, which is
// also the condition of cuBLAS's run-to-run reproducibility.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace ds::kernels::cu {

// DSK_OK, or DSK_ERR_CUDA with "<kernel>: <what> failed: CUBLAS_STATUS_... (<cuBLAS's text>)".
int cublas_status(const char* kernel, const char* what, cublasStatus_t s);

// One borrowed handle. acquire() makes the stream's device current (the
// caller's current device for the NULL stream), takes a handle of the pool
// (created on first need, math mode set, see cublas_handle.cpp), binds it to
// the stream; the destructor gives it back and restores the caller's device.
class CublasLease {
public:
    CublasLease() = default;
    CublasLease(const CublasLease&) = delete;
    CublasLease& operator=(const CublasLease&) = delete;
    ~CublasLease();

    int acquire(const char* kernel, cudaStream_t stream);  // DSK_OK or DSK_ERR_CUDA
    cublasHandle_t get() const { return handle_; }

private:
    cublasHandle_t handle_ = nullptr;
    cudaStream_t stream_ = nullptr;
    int device_ = -1, caller_device_ = -1;
};

}  // namespace ds::kernels::cu
