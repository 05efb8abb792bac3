// CRC32C with the SSE4.2 crc32 instruction. One crc32q has a latency of
// three cycles but a throughput of one per cycle, so long buffers run three
// independent streams over adjacent blocks and merge them: a register r
// followed by n zero bytes is r * x^(8n) mod P, computed as one carry-less
// multiply by the constant x^(8n-33) and one crc32q reduction.
#include "core/crc32c.h"

#include <cstring>

#if defined(__SSE4_2__) && defined(__PCLMUL__)
#include <nmmintrin.h>
#include <wmmintrin.h>

namespace ds {

namespace {

constexpr size_t kBlock = 2048;  // bytes per stream per round (multiple of 8)

inline uint64_t load64(const unsigned char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

// The register `reg` advanced over kBlock zero bytes.
inline uint32_t shift_block(uint32_t reg, uint32_t k) {
    __m128i prod = _mm_clmulepi64_si128(_mm_cvtsi32_si128(static_cast<int>(reg)),
                                        _mm_cvtsi32_si128(static_cast<int>(k)), 0x00);
    return static_cast<uint32_t>(_mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(prod))));
}

uint32_t block_constant() {
    static const uint32_t k = crc32c_xpow(8 * kBlock - 33);
    return k;
}

}  // namespace

uint32_t crc32c_hw(uint32_t crc, const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    uint64_t c = static_cast<uint32_t>(~crc);
    while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7u)) {  // align the loads
        c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
        --n;
    }
    if (n >= 3 * kBlock) {
        const uint32_t k = block_constant();
        while (n >= 3 * kBlock) {
            uint64_t a = c, b = 0, d = 0;
            for (size_t i = 0; i < kBlock; i += 8) {
                a = _mm_crc32_u64(a, load64(p + i));
                b = _mm_crc32_u64(b, load64(p + kBlock + i));
                d = _mm_crc32_u64(d, load64(p + 2 * kBlock + i));
            }
            // a*x^(16 kBlock) + b*x^(8 kBlock) + d, as (a*x^8k + b)*x^8k + d.
            uint32_t ab = shift_block(static_cast<uint32_t>(a), k) ^ static_cast<uint32_t>(b);
            c = shift_block(ab, k) ^ static_cast<uint32_t>(d);
            p += 3 * kBlock;
            n -= 3 * kBlock;
        }
    }
    while (n >= 8) {
        c = _mm_crc32_u64(c, load64(p));
        p += 8;
        n -= 8;
    }
    while (n--) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    return ~static_cast<uint32_t>(c);
}

}  // namespace ds

#else  // a target without SSE4.2: crc32c_hw_available() is false there

namespace ds {
uint32_t crc32c_hw(uint32_t crc, const void* data, size_t n) { return crc32c_table(crc, data, n); }
}  // namespace ds

#endif
