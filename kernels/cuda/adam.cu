// dsk_cuda_adam_multi: Adam/AdamW over a tensor list, one chunked
// multi-tensor launch per metadata block (../elem/optim_mt.h).
#include "../elem/step_consts.h"
#include "mt_kernel.cuh"

using namespace ds::kernels;
using namespace ds::kernels::cu;

extern "C" int dsk_cuda_adam_multi(const dsk_opt_tensor* t, size_t count, int g_dtype, int state_dtype,
                                   int w_dtype, const dsk_adam_hparams* h, void* stream) noexcept {
    const char* kernel = "dsk_cuda_adam_multi";
    if (const int rc = check_opt_tensors(kernel, t, count, h, g_dtype, w_dtype, true, true)) return rc;
    ArgCheck k(kernel);
    if (k.dtype("state_dtype", state_dtype).failed()) return k.status();
    return adam_mt(t, count, g_dtype, state_dtype, w_dtype, adam_consts(*h),
                   MtLaunchOn{static_cast<cudaStream_t>(stream), kernel});
}
