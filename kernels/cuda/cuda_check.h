// Host-side helpers of the CUDA entry points: argument checks of the tensor
// lists and the translation of a CUDA error into a dsk status and message.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "../cpu/arg_check.h"
#include "cuda_kernels.h"

namespace ds::kernels {

// DSK_OK, or DSK_ERR_CUDA with "<kernel>: <what> failed: <CUDA's text>".
int cuda_status(const char* kernel, const char* what, cudaError_t err);

// After a launch: the launch's own error (a bad configuration), if any.
inline int cuda_launch_status(const char* kernel) { return cuda_status(kernel, "kernel launch", cudaGetLastError()); }

// The checks every dsk_cuda_*_multi makes: hparams, dtypes, t not NULL,
// every tensor's p and g (and state1/state2 where `state1`/`state2` say
// they are needed) non-NULL when n > 0, w16 NULL for all or none. Messages
// name the tensor: "dsk_cuda_adam_multi: t[3].g is NULL (n = 10)".
int check_opt_tensors(const char* kernel, const dsk_opt_tensor* t, size_t count, const void* h, int g_dtype,
                      int w_dtype, bool state1, bool state2);

}  // namespace ds::kernels
