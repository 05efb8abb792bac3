// dsk_cuda_scale: x *= s in x's dtype (the loss-scale unscale; body ../elem/scale.h).
#include "../elem/scale.h"
#include "elementwise.cuh"

using namespace ds::kernels;
using namespace ds::kernels::cu;

extern "C" int dsk_cuda_scale(void* x, int dtype, float s, size_t n, void* stream) noexcept {
    const char* kernel = "dsk_cuda_scale";
    ArgCheck k(kernel);
    if (k.dtype("dtype", dtype).ptr("x", x, n).failed()) return k.status();
    if (n == 0) return DSK_OK;
    int rc = DSK_OK;
    with_dtype(dtype, [&](auto dt) {
        rc = launch_elementwise(kernel, ScaleBody<decltype(dt)::value>{x, s}, n, static_cast<cudaStream_t>(stream));
    });
    return rc;
}
