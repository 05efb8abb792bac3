// Shared by the communicator tests under mpirun: test data that makes every
// reduction exact in fp32, and rounding oracles for fp16/bf16 written
// independently of the library (the compiler's _Float16 conversion for fp16,
// double arithmetic for bf16).
#pragma once

#include "comm/mpi_include.h"  // <mpi.h>, C API only

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "comm/factory.h"
#include "deepspeed_c.h"

namespace ds_comm_test {

using ds::DType;
using ds::comm::Op;

inline uint32_t f32_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// fp32 -> fp16 bits, round to nearest even (the compiler's conversion).
inline uint16_t oracle_f16(float x) {
    const _Float16 h = static_cast<_Float16>(x);
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
}
inline float f16_to_float(uint16_t u) {
    _Float16 h;
    std::memcpy(&h, &u, 2);
    return static_cast<float>(h);
}

// fp32 -> bf16 bits, round to nearest even: the nearest multiple of the
// bf16 quantum at x's binade, by double arithmetic (finite, normal x only).
inline uint16_t oracle_bf16(float x) {
    if (x == 0.0f) return std::signbit(x) ? 0x8000 : 0;
    int e;
    std::frexp(static_cast<double>(x), &e);  // |x| in [2^(e-1), 2^e)
    const double q = std::ldexp(1.0, e - 8);  // 8 significant bits
    const float r = static_cast<float>(std::nearbyint(static_cast<double>(x) / q) * q);
    return static_cast<uint16_t>(f32_bits(r) >> 16);
}
inline float bf16_to_float(uint16_t u) {
    const uint32_t b = static_cast<uint32_t>(u) << 16;
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}

// Integer-valued input of rank r at element i, small enough to be exact in
// the dtype (fp16: |v| <= 1500, bf16: |v| <= 255) and in any fp32 sum of 3
// ranks, but with sums that fp16/bf16 must round (fp16 above 2048, bf16 above 256).
// Ranks' values are independent (a splitmix64 hash of rank and index).
inline float value(DType d, int r, size_t i) {
    const uint64_t span = d == DType::BF16 ? 255 : d == DType::F16 ? 1500 : 100000;
    uint64_t z = (static_cast<uint64_t>(r) << 40) + i + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<float>(static_cast<int64_t>(z % (2 * span + 1)) - static_cast<int64_t>(span));
}

// Element i of a typed buffer as float.
inline float load(DType d, const std::vector<uint8_t>& buf, size_t i) {
    if (d == DType::F32) {
        float f;
        std::memcpy(&f, buf.data() + 4 * i, 4);
        return f;
    }
    uint16_t u;
    std::memcpy(&u, buf.data() + 2 * i, 2);
    return d == DType::F16 ? f16_to_float(u) : bf16_to_float(u);
}

// Bits of element i (fp32: 32 bits, 16-bit: 16 bits).
inline uint32_t load_bits(DType d, const std::vector<uint8_t>& buf, size_t i) {
    if (d == DType::F32) {
        uint32_t u;
        std::memcpy(&u, buf.data() + 4 * i, 4);
        return u;
    }
    uint16_t u;
    std::memcpy(&u, buf.data() + 2 * i, 2);
    return u;
}

// The bits a correct result holds for fp32 value x: fp32 itself, or x rounded once to 16 bits.
inline uint32_t expect_bits(DType d, float x) {
    if (d == DType::F32) return f32_bits(x);
    return d == DType::F16 ? oracle_f16(x) : oracle_bf16(x);
}

// A buffer of n elements of d filled with value(d, r, offset + i) (exact in d).
inline std::vector<uint8_t> make_input(DType d, int r, size_t n, size_t offset = 0) {
    std::vector<uint8_t> buf(n * ds::dtype_size(d));
    for (size_t i = 0; i < n; ++i) {
        const float v = value(d, r, offset + i);
        if (d == DType::F32) {
            std::memcpy(buf.data() + 4 * i, &v, 4);
        } else {
            const uint16_t u = d == DType::F16 ? oracle_f16(v) : oracle_bf16(v);
            std::memcpy(buf.data() + 2 * i, &u, 2);
        }
    }
    return buf;
}

// The fp32 value the reduction over all ranks must produce for element i
// (before any 16-bit rounding): exact sum, sum / size in fp32, or max.
inline float reduced(DType d, Op op, int size, size_t i) {
    double sum = 0, mx = -INFINITY;
    for (int r = 0; r < size; ++r) {
        sum += value(d, r, i);
        mx = std::max(mx, static_cast<double>(value(d, r, i)));
    }
    if (op == Op::Max) return static_cast<float>(mx);
    const float s = static_cast<float>(sum);  // exact: |sum| < 2^24
    return op == Op::Avg ? s / static_cast<float>(size) : s;
}

// A communicator over MPI_COMM_WORLD (the test's main initialised MPI).
inline std::shared_ptr<ds::comm::Communicator> world_comm(int64_t timeout_ms = 120000, bool debug = false) {
    ds::comm::Options o;
    o.timeout_ms = timeout_ms;
    o.debug = debug;
    return ds::comm::make_mpi(MPI_Comm_c2f(MPI_COMM_WORLD), o);
}

inline const std::vector<size_t>& counts() {
    // empty, odd, primes, around 64 Ki, and one large enough for MPI's
    // segmented algorithms.
    static const std::vector<size_t> c = {0, 1, 7, 13, 1009, 65537, 1000003};
    return c;
}

// A DLTensor over host memory (contiguous, no strides) for the C ABI calls.
inline DLTensor host_view(void* data, DLDataType dt, int64_t* shape, int32_t ndim) {
    DLTensor t{};
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = ndim;
    t.dtype = dt;
    t.shape = shape;
    return t;
}

}  // namespace ds_comm_test
