// Argument checks and CUDA error reporting of the CUDA entry points (host code).
#include "cuda_check.h"

namespace ds::kernels {

int cuda_status(const char* kernel, const char* what, cudaError_t err) {
    if (err == cudaSuccess) return DSK_OK;
    // The runtime also keeps a failed call's error as the thread's last error;
    // cleared here, or the next entry point's cuda_launch_status (which reads
    // cudaGetLastError) would report this stale error as its own launch
    // failure. A sticky error (a faulted context) is returned again anyway.
    cudaGetLastError();
    return set_last_error(DSK_ERR_CUDA, "%s: %s failed: %s (%s)", kernel, what, cudaGetErrorString(err),
                          cudaGetErrorName(err));
}

int check_opt_tensors(const char* kernel, const dsk_opt_tensor* t, size_t count, const void* h, int g_dtype,
                      int w_dtype, bool state1, bool state2) {
    ArgCheck k(kernel);
    if (k.hparams(h).dtype("g_dtype", g_dtype).ptr("t (tensor list)", t, count).failed()) return k.status();
    if (count == 0) return DSK_OK;
    const bool w16 = t[0].w16 != nullptr;
    if (w16 && k.w16(t[0].w16, w_dtype).failed()) return k.status();
    for (size_t i = 0; i < count; ++i) {
        const dsk_opt_tensor& x = t[i];
        const char* missing = nullptr;
        if (x.n > 0 && x.p == nullptr) missing = "p";
        else if (x.n > 0 && x.g == nullptr) missing = "g";
        else if (x.n > 0 && state1 && x.state1 == nullptr) missing = "state1";
        else if (x.n > 0 && state2 && x.state2 == nullptr) missing = "state2";
        if (missing) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: t[%zu].%s is NULL (n = %zu)", kernel, i,
                                           missing, x.n);
        if ((x.w16 != nullptr) != w16)
            return set_last_error(DSK_ERR_INVALID_ARGUMENT,
                                  "%s: t[%zu].w16 is %s but t[0].w16 is %s (w16 must be set for all tensors or none)",
                                  kernel, i, x.w16 ? "set" : "NULL", w16 ? "set" : "NULL");
    }
    return DSK_OK;
}

}  // namespace ds::kernels
