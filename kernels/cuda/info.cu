// What the CUDA backend is: device count (with the reason when there is no
// device), the kernels compiled in and their architectures (ds_build_info()).
#include <cuda_runtime_api.h>

#include "cuda_check.h"

#ifndef DS_CUDA_ARCHITECTURES_STR
#error "DS_CUDA_ARCHITECTURES_STR comes from cmake/Modules.cmake"
#endif

extern "C" int dsk_cuda_device_count(void) noexcept {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        ds::kernels::cuda_status("dsk_cuda_device_count", "cudaGetDeviceCount", err);
        cudaGetLastError();  // a non-sticky error: clear it so later calls start clean
        return 0;
    }
    return count;
}

extern "C" const char* dsk_cuda_kernel_list(void) noexcept {
    return "adam_multi,sgd_multi,lion_multi,lamb,convert,scale,axpy,axpy_sumsq,sumsq,check_overflow,gelu,dropout,add,bias_add,"
           "bias_grad,layernorm,softmax_xent,gemm,gemm_batched,linear_fwd,gemm_bf16,linear_fwd_bf16,linear_bwd_bf16,"
           "linear_fwd_bf16w,linear_bwd_bf16w,embedding,layernorm_bwd_from_output,mse,attention";
}

extern "C" const char* dsk_cuda_architectures(void) noexcept { return DS_CUDA_ARCHITECTURES_STR; }
