// kernel_backend.h's CUDA table in a build without CUDA: there is none, so
// kernels_for(cuda:N) reports DS_ERR_UNSUPPORTED.
#include "core/kernel_backend.h"

namespace ds {

const dsk_backend* cuda_kernel_table() noexcept { return nullptr; }

}  // namespace ds
