// dsk_cuda_lion_multi: Lion over a tensor list, chunked multi-tensor
// launches (../elem/optim_mt.h).
#include "../elem/step_consts.h"
#include "mt_kernel.cuh"

using namespace ds::kernels;
using namespace ds::kernels::cu;

extern "C" int dsk_cuda_lion_multi(const dsk_opt_tensor* t, size_t count, int g_dtype, int w_dtype,
                                   const dsk_lion_hparams* h, void* stream) noexcept {
    const char* kernel = "dsk_cuda_lion_multi";
    if (const int rc = check_opt_tensors(kernel, t, count, h, g_dtype, w_dtype, true, false)) return rc;
    return lion_mt(t, count, g_dtype, w_dtype, lion_consts(*h), MtLaunchOn{static_cast<cudaStream_t>(stream), kernel});
}
