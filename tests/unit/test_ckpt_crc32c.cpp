// CRC32C against published check values (RFC 3720 §B.4, the "123456789"
// check value) and a bit-at-a-time reference written from the definition;
// the hardware path against the table path over many lengths and alignments.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/crc32c.h"

namespace {

using namespace ds;

// The definition: reflected polynomial 0x82F63B78, one bit at a time.
uint32_t crc32c_bitwise(const uint8_t* p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i) {
        c ^= p[i];
        for (int b = 0; b < 8; ++b) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    }
    return ~c;
}

TEST(CkptCrc32c, CheckValue) {
    const char* s = "123456789";
    EXPECT_EQ(crc32c(0, s, 9), 0xE3069283u);
    EXPECT_EQ(crc32c_table(0, s, 9), 0xE3069283u);
    EXPECT_EQ(crc32c(0, s, 0), 0u);
}

TEST(CkptCrc32c, Rfc3720Vectors) {
    uint8_t buf[32];
    std::memset(buf, 0, 32);
    EXPECT_EQ(crc32c(0, buf, 32), 0x8A9136AAu);
    std::memset(buf, 0xFF, 32);
    EXPECT_EQ(crc32c(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(i);
    EXPECT_EQ(crc32c(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(31 - i);
    EXPECT_EQ(crc32c(0, buf, 32), 0x113FDB5Cu);
}

TEST(CkptCrc32c, TableMatchesDefinition) {
    std::mt19937 gen(1);
    std::vector<uint8_t> data(5000);
    for (auto& b : data) b = static_cast<uint8_t>(gen());
    for (size_t n : {0, 1, 7, 8, 9, 63, 64, 65, 1000, 4999})
        EXPECT_EQ(crc32c_table(0, data.data(), n), crc32c_bitwise(data.data(), n)) << n;
}

TEST(CkptCrc32c, HardwareMatchesDefinitionAllLengthsAndAlignments) {
    if (!crc32c_hw_available()) GTEST_SKIP() << "no SSE4.2 + PCLMUL on this CPU";
    std::mt19937 gen(2);
    std::vector<uint8_t> data(3 * 2048 * 3 + 64);
    for (auto& b : data) b = static_cast<uint8_t>(gen());
    // Lengths around the 3-stream block boundaries (3 x 2048 bytes) and small ones.
    std::vector<size_t> lengths;
    for (size_t n = 0; n < 80; ++n) lengths.push_back(n);
    for (size_t base : {6144u, 12288u, 18432u})
        for (int d = -9; d <= 9; ++d) lengths.push_back(base + d);
    for (size_t n : lengths)
        for (size_t off = 0; off < 8; ++off) {
            if (off + n > data.size()) continue;
            ASSERT_EQ(crc32c_hw(0, data.data() + off, n), crc32c_bitwise(data.data() + off, n))
                << "n=" << n << " off=" << off;
        }
}

TEST(CkptCrc32c, ChainingEqualsWhole) {
    std::mt19937 gen(3);
    std::vector<uint8_t> data(100000);
    for (auto& b : data) b = static_cast<uint8_t>(gen());
    const uint32_t whole = crc32c_bitwise(data.data(), data.size());
    for (size_t cut : {0u, 1u, 4097u, 50000u, 99999u, 100000u}) {
        EXPECT_EQ(crc32c(crc32c(0, data.data(), cut), data.data() + cut, data.size() - cut), whole) << cut;
        EXPECT_EQ(crc32c_table(crc32c_table(0, data.data(), cut), data.data() + cut, data.size() - cut), whole);
    }
}

TEST(CkptCrc32c, XpowIsPowersOfX) {
    EXPECT_EQ(crc32c_xpow(0), 0x80000000u);   // x^0
    EXPECT_EQ(crc32c_xpow(1), 0x40000000u);   // x^1
    EXPECT_EQ(crc32c_xpow(31), 0x00000001u);  // x^31
    EXPECT_EQ(crc32c_xpow(32), 0x82F63B78u);  // x^32 = P - x^32: the polynomial's low terms
    // x^a * x^b = x^(a+b)
    EXPECT_EQ(crc32c_mulmod(crc32c_xpow(1000), crc32c_xpow(2345)), crc32c_xpow(3345));
}

}  // namespace
