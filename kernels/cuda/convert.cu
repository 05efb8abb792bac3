// dsk_cuda_convert: F32/F16/BF16 to any of them (the CPU's bit conversions,
// ../ref/half_bits.h, as the per-element body ../elem/convert.h).
#include "../elem/convert.h"
#include "elementwise.cuh"

using namespace ds::kernels;
using namespace ds::kernels::cu;

extern "C" int dsk_cuda_convert(const void* src, int src_dtype, void* dst, int dst_dtype, size_t n,
                                void* stream) noexcept {
    const char* kernel = "dsk_cuda_convert";
    ArgCheck k(kernel);
    if (k.dtype("src_dtype", src_dtype).dtype("dst_dtype", dst_dtype).ptr("src", src, n).ptr("dst", dst, n).failed())
        return k.status();
    if (n == 0) return DSK_OK;
    int rc = DSK_OK;
    with_dtype(src_dtype, [&](auto sd) {
        with_dtype(dst_dtype, [&](auto dd) {
            const ConvertBody<decltype(sd)::value, decltype(dd)::value> body{src, dst};
            rc = launch_elementwise(kernel, body, n, static_cast<cudaStream_t>(stream));
        });
    });
    return rc;
}
