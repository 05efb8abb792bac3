// Shared helpers for the kernel tests (test_kernels_*.cpp): the ISA list,
// the lengths every kernel is tried at, deterministic random data, and
// rounding oracles for fp16/bf16 written independently of the library's bit
// tricks (double arithmetic + table lookup).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/kernel_backend.h"
#include "kernels.h"

namespace dskt {

// The kernels as the library calls them: through the CPU table, failures
// thrown as ds::Error (the flat dsk_cpu_* status API is tested in
// test_kernels_backend.cpp).
inline ds::Kernels kern() { return ds::cpu_kernels(); }

// Lengths that are not multiples of any vector width, around the widths,
// and above the OpenMP threshold (65536) so the multi-chunk path runs too.
inline const std::vector<size_t>& lengths() {
    static const std::vector<size_t> v = {1, 7, 15, 16, 17, 31, 33, 1000, 65537, 200003};
    return v;
}

// Every ISA this CPU can run, scalar first.
inline std::vector<int> isas() {
    std::vector<int> v;
    for (int i = DSK_ISA_SCALAR; i <= dsk_cpu_isa_detected(); ++i) v.push_back(i);
    return v;
}

// Forces an ISA for its lifetime, restores the previous one afterwards.
class IsaGuard {
public:
    explicit IsaGuard(int isa) : saved_(dsk_cpu_isa()) { EXPECT_EQ(dsk_cpu_set_isa(isa), 0); }
    ~IsaGuard() { dsk_cpu_set_isa(saved_); }
    IsaGuard(const IsaGuard&) = delete;
    IsaGuard& operator=(const IsaGuard&) = delete;

private:
    int saved_;
};

inline std::string trace(int isa, size_t n) {
    return std::string("isa=") + dsk_isa_name(isa) + " n=" + std::to_string(n);
}

inline uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// Distance in units in the last place between two finite floats of equal sign.
inline int64_t ulp_distance(float a, float b) {
    auto key = [](float x) {
        const int64_t u = bits(x);
        return (u & 0x80000000) ? -(u & 0x7FFFFFFF) : u;
    };
    const int64_t d = key(a) - key(b);
    return d < 0 ? -d : d;
}

struct Rng {
    std::mt19937_64 gen;
    explicit Rng(uint64_t seed) : gen(seed) {}
    float uniform(float lo, float hi) {
        return lo + (hi - lo) * static_cast<float>(static_cast<double>(gen() >> 11) * 0x1.0p-53);
    }
    std::vector<float> uniform_vec(size_t n, float lo, float hi) {
        std::vector<float> v(n);
        for (auto& x : v) x = uniform(lo, hi);
        return v;
    }
    uint32_t u32() { return static_cast<uint32_t>(gen() >> 32); }
};

// ---- independent rounding oracles ---------------------------------------

// Value of an fp16 bit pattern by the textbook formula.
inline double f16_value(uint16_t h) {
    const int s = h >> 15, e = (h >> 10) & 0x1F, m = h & 0x3FF;
    double v;
    if (e == 0x1F)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = std::ldexp(static_cast<double>(m), -24);
    else
        v = std::ldexp(static_cast<double>(1024 + m), e - 25);
    return s ? -v : v;
}

// Round a (non-NaN) double to the nearest multiple of quantum q, ties to even.
inline double round_to_quantum(double a, double q) { return std::nearbyint(a / q) * q; }

// fp32 -> fp16, round to nearest even, via double arithmetic and a lookup of
// the rounded value among all finite fp16 values. NaN -> 0x7E00 (callers
// check NaN-ness separately).
inline uint16_t oracle_f16(float x) {
    if (std::isnan(x)) return 0x7E00;
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::fabs(static_cast<double>(x));
    if (a >= 65520.0) return sign | 0x7C00;  // half-way above 65504 rounds to even = Inf
    int e;
    std::frexp(a, &e);  // a in [2^(e-1), 2^e)
    const double q = a < 0x1.0p-14 ? 0x1.0p-24 : std::ldexp(1.0, e - 11);
    const double r = round_to_quantum(a, q);
    static const std::vector<double> table = [] {
        std::vector<double> t(0x7C01);
        for (uint32_t h = 0; h <= 0x7C00; ++h) t[h] = f16_value(static_cast<uint16_t>(h));
        return t;
    }();
    const auto it = std::lower_bound(table.begin(), table.end(), r);
    EXPECT_TRUE(it != table.end() && *it == r) << "oracle_f16 lookup failed for " << x;
    return static_cast<uint16_t>(sign | (it - table.begin()));
}

// fp32 -> bf16, round to nearest even via double arithmetic; NaN -> 0x7FC0.
inline uint16_t oracle_bf16(float x) {
    if (std::isnan(x)) return 0x7FC0;
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::fabs(static_cast<double>(x));
    if (a >= std::ldexp(2.0 - 0x1.0p-8, 127)) return sign | 0x7F80;  // ties-to-even past max finite -> Inf
    int e;
    std::frexp(a, &e);
    const double q = a < 0x1.0p-126 ? 0x1.0p-133 : std::ldexp(1.0, e - 8);
    const float r = static_cast<float>(round_to_quantum(a, q));  // exactly representable
    return static_cast<uint16_t>(sign | (bits(r) >> 16));
}

inline float bf16_value(uint16_t h) { return from_bits(static_cast<uint32_t>(h) << 16); }

// 16-bit <-> float through the textbook formulas (for building test inputs).
inline float load_as_float(const void* base, int dtype, size_t i) {
    const uint16_t* h = static_cast<const uint16_t*>(base);
    switch (dtype) {
        case DSK_F16:
            return static_cast<float>(f16_value(h[i]));
        case DSK_BF16:
            return bf16_value(h[i]);
        default:
            return static_cast<const float*>(base)[i];
    }
}

// A buffer of n elements of a dtype, 64-byte aligned (so the kernels'
// streaming-store path can engage), with guard elements after it to catch
// writes past the end. Copies keep the alignment.
struct Buf {
    int dtype;
    size_t n;
    static constexpr size_t kGuard = 64;
    static constexpr uint8_t kFill = 0xA5;

    Buf(int dt, size_t count) : dtype(dt), n(count), raw_(size_bytes() + 64, kFill) { align(); }
    Buf(const Buf& o) : dtype(o.dtype), n(o.n), raw_(o.raw_.size()) {
        align();
        std::memcpy(data(), o.data(), size_bytes());
    }
    Buf& operator=(const Buf& o) {
        if (this != &o) {
            dtype = o.dtype;
            n = o.n;
            raw_.assign(o.raw_.size(), 0);
            align();
            std::memcpy(data(), o.data(), size_bytes());
        }
        return *this;
    }

    static size_t elem(int dt) { return dt == DSK_F32 ? 4 : 2; }
    size_t size_bytes() const { return (n + kGuard) * elem(dtype); }
    uint8_t* data() { return raw_.data() + off_; }
    const uint8_t* data() const { return raw_.data() + off_; }
    float* f32() { return reinterpret_cast<float*>(data()); }
    float get(size_t i) const { return load_as_float(data(), dtype, i); }
    // Input generation only (checks use the oracles), so the fast reference
    // conversions are fine here.
    void set_from(const std::vector<float>& v) {
        for (size_t i = 0; i < n; ++i) {
            if (dtype == DSK_F32)
                f32()[i] = v[i];
            else if (dtype == DSK_F16)
                reinterpret_cast<uint16_t*>(data())[i] = dsk_ref_f32_to_f16(v[i]);
            else
                reinterpret_cast<uint16_t*>(data())[i] = dsk_ref_f32_to_bf16(v[i]);
        }
    }
    bool guard_intact() const {
        for (size_t i = n * elem(dtype); i < size_bytes(); ++i)
            if (data()[i] != kFill) return false;
        return true;
    }
    bool same_bits(const Buf& o) const {
        return size_bytes() == o.size_bytes() && std::memcmp(data(), o.data(), size_bytes()) == 0;
    }

private:
    std::vector<uint8_t> raw_;
    size_t off_ = 0;
    void align() { off_ = (64 - reinterpret_cast<uintptr_t>(raw_.data()) % 64) % 64; }
};

inline const char* dtype_name(int dt) { return dt == DSK_F16 ? "f16" : dt == DSK_BF16 ? "bf16" : "f32"; }

// One unit in the last place of a dtype at magnitude |x| (relative bound
// used for outputs stored in 16-bit): fp16 2^-10, bf16 2^-7, fp32 2^-23.
inline double rel_ulp(int dtype) {
    return dtype == DSK_F16 ? 0x1.0p-10 : dtype == DSK_BF16 ? 0x1.0p-7 : 0x1.0p-23;
}
// Smallest spacing a dtype has (fp16 subnormals), as an absolute floor.
inline double abs_floor(int dtype) { return dtype == DSK_F16 ? 0x1.0p-24 : 0x1.0p-133; }

}  // namespace dskt
