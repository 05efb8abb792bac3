// CRC32C: the portable slicing-by-8 implementation, GF(2) arithmetic modulo
// the polynomial, and the run-time choice of implementation.
#include "core/crc32c.h"

#include <array>
#include <cstring>

namespace ds {

namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

// tables[k][b]: the CRC register after byte b followed by k zero bytes.
struct Tables {
    std::array<std::array<uint32_t, 256>, 8> t{};
    Tables() {
        for (uint32_t b = 0; b < 256; ++b) {
            uint32_t c = b;
            for (int i = 0; i < 8; ++i) c = (c & 1u) ? (c >> 1) ^ kPoly : c >> 1;
            t[0][b] = c;
        }
        for (uint32_t b = 0; b < 256; ++b)
            for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
    }
};

const Tables& tables() {
    static const Tables tabs;
    return tabs;
}

bool use_hw() {
    static const bool hw = crc32c_hw_available();
    return hw;
}

}  // namespace

uint32_t crc32c_table(uint32_t crc, const void* data, size_t n) {
    const auto& t = tables().t;
    const auto* p = static_cast<const unsigned char*>(data);
    uint32_t c = ~crc;
    while (n >= 8) {
        uint32_t lo, hi;
        std::memcpy(&lo, p, 4);  // the format is little-endian, as is every host we build for
        std::memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
            t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xFFu];
    return ~c;
}

uint32_t crc32c_mulmod(uint32_t a, uint32_t b) {
    // Reflected: bit 31 is the coefficient of x^0. Walk a's coefficients
    // from x^0 upwards while b runs through b*x^i.
    uint32_t product = 0;
    for (int i = 0; i < 32; ++i) {
        if (a & (0x80000000u >> i)) product ^= b;
        b = (b & 1u) ? (b >> 1) ^ kPoly : b >> 1;
    }
    return product;
}

uint32_t crc32c_xpow(uint64_t k) {
    uint32_t result = 0x80000000u;  // x^0
    uint32_t square = 0x40000000u;  // x^1, then x^2, x^4, ...
    while (k) {
        if (k & 1u) result = crc32c_mulmod(result, square);
        square = crc32c_mulmod(square, square);
        k >>= 1;
    }
    return result;
}

uint32_t crc32c(uint32_t crc, const void* data, size_t n) {
    return use_hw() ? crc32c_hw(crc, data, n) : crc32c_table(crc, data, n);
}

const char* crc32c_impl_name() { return use_hw() ? "sse4.2+pclmul" : "table"; }

bool crc32c_hw_available() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul");
#else
    return false;
#endif
}

}  // namespace ds
