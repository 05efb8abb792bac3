// CRC32C (Castagnoli, reflected polynomial 0x82F63B78, initial value and
// final xor 0xFFFFFFFF): the checksum of every checkpoint file and of TensorBoard records. The SSE4.2
// crc32 instruction computes it in hardware (crc32c_sse42.cpp); a
// slicing-by-8 table serves CPUs without it. The choice is made once, at
// first use, from the running CPU.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds {

// Extend `crc` (the value of a previous call, 0 for an empty prefix) by
// `n` bytes: crc32c(crc32c(0, a), b) == crc32c(0, a ++ b).
uint32_t crc32c(uint32_t crc, const void* data, size_t n);

// The two implementations, for tests and benchmarks. The hardware one may
// only be called when crc32c_hw_available() is true.
uint32_t crc32c_table(uint32_t crc, const void* data, size_t n);
uint32_t crc32c_hw(uint32_t crc, const void* data, size_t n);
bool crc32c_hw_available();

// "sse4.2+pclmul" or "table": what crc32c() uses on this machine.
const char* crc32c_impl_name();

// x^k modulo the CRC32C polynomial in the reflected representation (x^0 =
// 0x80000000), and the product of two such residues; the hardware path uses
// them to merge interleaved streams.
uint32_t crc32c_xpow(uint64_t k);
uint32_t crc32c_mulmod(uint32_t a, uint32_t b);

}  // namespace ds
