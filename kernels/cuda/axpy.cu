// dsk_cuda_axpy: dst += scale * src, stored in dst's dtype (body ../elem/axpy.h).
#include "../elem/axpy.h"
#include "elementwise.cuh"

using namespace ds::kernels;
using namespace ds::kernels::cu;

extern "C" int dsk_cuda_axpy(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, size_t n,
                             void* stream) noexcept {
    const char* kernel = "dsk_cuda_axpy";
    ArgCheck k(kernel);
    if (k.dtype("dst_dtype", dst_dtype).dtype("src_dtype", src_dtype).ptr("dst", dst, n).ptr("src", src, n).failed())
        return k.status();
    if (n == 0) return DSK_OK;
    int rc = DSK_OK;
    with_dtype(dst_dtype, [&](auto dd) {
        with_dtype(src_dtype, [&](auto sd) {
            const AxpyBody<decltype(dd)::value, decltype(sd)::value> body{dst, src, scale};
            rc = launch_elementwise(kernel, body, n, static_cast<cudaStream_t>(stream));
        });
    });
    return rc;
}
