// dsk_cuda_sgd_multi: SGD (momentum, nesterov, weight decay) over a tensor
// list, chunked multi-tensor launches (../elem/optim_mt.h).
#include "../elem/step_consts.h"
#include "mt_kernel.cuh"

using namespace ds::kernels;
using namespace ds::kernels::cu;

extern "C" int dsk_cuda_sgd_multi(const dsk_opt_tensor* t, size_t count, int g_dtype, int w_dtype,
                                  const dsk_sgd_hparams* h, void* stream) noexcept {
    const char* kernel = "dsk_cuda_sgd_multi";
    const bool momentum = h != nullptr && h->momentum != 0.0f;
    if (const int rc = check_opt_tensors(kernel, t, count, h, g_dtype, w_dtype, momentum, false)) return rc;
    return sgd_mt(t, count, g_dtype, w_dtype, sgd_consts(*h), MtLaunchOn{static_cast<cudaStream_t>(stream), kernel});
}
