#include "core/kernel_backend.h"

#include "core/device_memory.h"
#include "core/error.h"

namespace ds {

void throw_kernel_error(int status) {
    const ds_status_t s = status == DSK_ERR_INVALID_ARGUMENT ? DS_ERR_INVALID_ARGUMENT
                          : status == DSK_ERR_UNSUPPORTED    ? DS_ERR_UNSUPPORTED
                          : status == DSK_ERR_CUDA           ? DS_ERR_DEVICE
                          : status == DSK_ERR_OUT_OF_MEMORY  ? DS_ERR_OUT_OF_MEMORY
                                                             : DS_ERR_INTERNAL;
    if (s == DS_ERR_INTERNAL && status != DSK_ERR_ENGINE)
        fail(s, "kernel returned unknown status %d: %s", status, dsk_last_error());
    throw Error(s, dsk_last_error());
}

void throw_missing_kernel(const dsk_backend& b, const char* entry) {
    fail(DS_ERR_UNSUPPORTED, "the %s kernel backend has no %s kernel", b.name ? b.name : "(unnamed)", entry);
}

Kernels kernels_for(Device d) {
    if (d.is_cpu() || device_memory::host_backed_for_testing()) return cpu_kernels();
    const dsk_backend* cuda = cuda_kernel_table();
    DS_CHECK(cuda != nullptr, DS_ERR_UNSUPPORTED,
             "no compute kernels for device %s in this build (CPU only; rebuild with DS_WITH_CUDA=ON)",
             d.str().c_str());
    return Kernels(*cuda);
}

}  // namespace ds
