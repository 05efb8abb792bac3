// kernel_backend.h's CUDA table in a build with CUDA (target ds_core_cuda).
#include "core/kernel_backend.h"
#include "cuda_kernels.h"

namespace ds {

const dsk_backend* cuda_kernel_table() noexcept { return dsk_backend_cuda(nullptr); }

}  // namespace ds
