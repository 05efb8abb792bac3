// dsk_cpu_scale: in-place multiply. fp32 is a plain vectorizable loop; 16-bit
// data goes through fp32 in cache-sized chunks with the SIMD conversions.
#include <algorithm>

#include "arg_check.h"
#include "isa_table.h"

extern "C" int dsk_cpu_scale(void* x, int dtype, float s, size_t n) noexcept {
    ds::kernels::ArgCheck k("dsk_scale");
    if (k.dtype("dtype", dtype).ptr("x", x, n).failed()) return k.status();
    if (dtype == DSK_F32) {
        float* p = static_cast<float*>(x);
        const long long m = static_cast<long long>(n);
#pragma omp parallel for simd schedule(static) if (n >= 65536)
        for (long long i = 0; i < m; ++i) p[i] = p[i] * s;
        return DSK_OK;
    }
    const auto convert = ds::kernels::isa_kernels().convert;
    constexpr size_t kChunk = 4096;
    uint16_t* h = static_cast<uint16_t*>(x);
    const long long chunks = static_cast<long long>((n + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (long long c = 0; c < chunks; ++c) {
        float buf[kChunk];
        const size_t begin = static_cast<size_t>(c) * kChunk;
        const size_t len = std::min(kChunk, n - begin);
        convert(h + begin, dtype, buf, DSK_F32, len);
        for (size_t i = 0; i < len; ++i) buf[i] = buf[i] * s;
        convert(buf, DSK_F32, h + begin, dtype, len);
    }
    return DSK_OK;
}
