// Conversion kernels fp32 <-> fp16 / bf16 and dsk_convert: the scalar
// reference against exhaustive / hand-computed bit patterns and independent
// double-arithmetic oracles, then every ISA path against the reference (bitwise).
#include <cfloat>

#include "core/error.h"
#include "test_kernels_common.h"

using namespace dskt;

namespace {

// Expected fp32 bits of an fp16 pattern: exact value, NaN made quiet with payload.
uint32_t expected_f16_to_f32_bits(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF))
        return sign | 0x7FC00000u | (static_cast<uint32_t>(h & 0x3FF) << 13);
    return bits(static_cast<float>(f16_value(h)));
}

std::vector<uint16_t> all_16bit_patterns() {
    std::vector<uint16_t> v(65536);
    for (uint32_t i = 0; i < 65536; ++i) v[i] = static_cast<uint16_t>(i);
    return v;
}

struct EdgeCase {
    uint32_t in;   // fp32 bits
    uint16_t out;  // expected 16-bit pattern
};

// fp32 -> fp16 edge values with hand-computed results.
const std::vector<EdgeCase>& f16_edges() {
    static const std::vector<EdgeCase> v = {
        {0x00000000, 0x0000}, {0x80000000, 0x8000},  // +-0
        {0x33800000, 0x0001},                        // 2^-24: smallest subnormal
        {0x33000000, 0x0000},                        // 2^-25: tie between 0 and 2^-24 -> even 0
        {0xB3000000, 0x8000},                        // -2^-25 -> -0
        {0x33000001, 0x0001},                        // just above 2^-25 -> 2^-24
        {0x33C00000, 0x0002},                        // 3*2^-25 = 1.5 units: tie -> even 2
        {0x34200000, 0x0002},                        // 5*2^-25 = 2.5 units: tie -> even 2
        {0x34600000, 0x0004},                        // 7*2^-25 = 3.5 units: tie -> even 4
        {0x387FC000, 0x03FF},                        // largest subnormal 1023*2^-24
        {0x387FE000, 0x0400},                        // (1023.5)*2^-24: tie -> even 0x400 (2^-14)
        {0x38800000, 0x0400},                        // 2^-14: smallest normal
        {0x3F800000, 0x3C00},                        // 1
        {0x3F801000, 0x3C00},                        // 1 + 2^-11: tie -> even 1
        {0x3F803000, 0x3C02},                        // 1 + 3*2^-11: tie -> even 1 + 2^-9
        {0x3F801001, 0x3C01},                        // just above the tie -> up
        {0x477FE000, 0x7BFF},                        // 65504: max finite
        {0x477FEFFF, 0x7BFF},                        // just below 65520
        {0x477FF000, 0x7C00},                        // 65520: tie, odd max -> Inf
        {0x47800000, 0x7C00},                        // 65536 -> Inf
        {0x7F7FFFFF, 0x7C00}, {0xFF7FFFFF, 0xFC00},  // +-FLT_MAX -> +-Inf
        {0x7F800000, 0x7C00}, {0xFF800000, 0xFC00},  // +-Inf
        {0x00000001, 0x0000}, {0x80000001, 0x8000},  // fp32 denormals -> +-0
        {0x7FC00000, 0x7E00},                        // quiet NaN
        {0x7F800001, 0x7E00},                        // signalling NaN, low payload -> quiet
        {0xFFC00000, 0xFE00},                        // negative NaN keeps its sign
        {0x7FFFE000, 0x7FFF},                        // NaN payload top bits kept
        {0x7FA02000, 0x7F01},                        // sNaN with payload: quiet bit + payload
    };
    return v;
}

// fp32 -> bf16 edge values with hand-computed results.
const std::vector<EdgeCase>& bf16_edges() {
    static const std::vector<EdgeCase> v = {
        {0x00000000, 0x0000}, {0x80000000, 0x8000},  // +-0
        {0x3F800000, 0x3F80},                        // 1
        {0x3F808000, 0x3F80},                        // 1 + 2^-8: tie -> even 1
        {0x3F818000, 0x3F82},                        // 1 + 3*2^-8: tie -> even
        {0x3F808001, 0x3F81},                        // just above the tie -> up
        {0x3F807FFF, 0x3F80},                        // just below the tie -> down
        {0x7F7F7FFF, 0x7F7F},                        // rounds down to max finite
        {0x7F7F8000, 0x7F80},                        // tie above max finite (odd) -> Inf
        {0x7F7FFFFF, 0x7F80}, {0xFF7FFFFF, 0xFF80},  // +-FLT_MAX -> +-Inf
        {0x7F800000, 0x7F80}, {0xFF800000, 0xFF80},  // +-Inf
        {0x00000001, 0x0000},                        // fp32 denormal below half a bf16 step
        {0x00008000, 0x0000},                        // tie -> even 0
        {0x00018000, 0x0002},                        // tie, odd -> up
        {0x00008001, 0x0001},                        // above the tie -> smallest bf16 subnormal
        {0x007FFFFF, 0x0080},                        // largest fp32 subnormal -> 2^-126
        {0x7FC00000, 0x7FC0}, {0x7F800001, 0x7FC0},  // NaNs -> canonical quiet NaN
        {0xFFC00001, 0x7FC0}, {0x7FFFFFFF, 0x7FC0},
    };
    return v;
}

void f32_to_16_on_isa(int isa, int dtype, const std::vector<float>& in, std::vector<uint16_t>& out) {
    IsaGuard guard(isa);
    out.assign(in.size(), 0);
    if (dtype == DSK_F16)
        dsk_f32_to_f16(in.data(), out.data(), in.size());
    else
        dsk_f32_to_bf16(in.data(), out.data(), in.size());
}

}  // namespace

TEST(KernelConvert, F16ToF32AllPatternsMatchFormula) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float r = dsk_ref_f16_to_f32(static_cast<uint16_t>(h));
        ASSERT_EQ(bits(r), expected_f16_to_f32_bits(static_cast<uint16_t>(h))) << "h=0x" << std::hex << h;
    }
}

TEST(KernelConvert, F16RoundTripAllPatterns) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
        const uint16_t back = dsk_ref_f32_to_f16(dsk_ref_f16_to_f32(static_cast<uint16_t>(h)));
        // Non-NaN: identity. NaN: same sign and payload, quiet bit set.
        ASSERT_EQ(back, nan ? (h | 0x200) : h) << "h=0x" << std::hex << h;
    }
}

TEST(KernelConvert, F16ToF32AllPatternsEveryIsa) {
    const std::vector<uint16_t> in = all_16bit_patterns();
    for (int isa : isas()) {
        SCOPED_TRACE(dsk_isa_name(isa));
        IsaGuard guard(isa);
        std::vector<float> out(in.size());
        dsk_f16_to_f32(in.data(), out.data(), in.size());
        std::vector<uint16_t> back(in.size());
        dsk_f32_to_f16(out.data(), back.data(), out.size());
        for (size_t i = 0; i < in.size(); ++i) {
            ASSERT_EQ(bits(out[i]), expected_f16_to_f32_bits(in[i])) << "h=0x" << std::hex << in[i];
            ASSERT_EQ(back[i], dsk_ref_f32_to_f16(out[i])) << "h=0x" << std::hex << in[i];
        }
    }
}

TEST(KernelConvert, Bf16ToF32AllPatternsEveryIsa) {
    const std::vector<uint16_t> in = all_16bit_patterns();
    for (uint32_t h = 0; h < 65536; ++h)
        ASSERT_EQ(bits(dsk_ref_bf16_to_f32(static_cast<uint16_t>(h))), h << 16);
    for (int isa : isas()) {
        SCOPED_TRACE(dsk_isa_name(isa));
        IsaGuard guard(isa);
        std::vector<float> out(in.size());
        dsk_bf16_to_f32(in.data(), out.data(), in.size());
        for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(bits(out[i]), static_cast<uint32_t>(in[i]) << 16);
    }
}

// Each edge value through the reference conversion and the oracle (where
// `oracle_nan` or the value is not NaN), then through every ISA's kernel,
// the list repeated so the values land in vector bodies and in tails.
void expect_edges_on_every_isa(const std::vector<EdgeCase>& edges, int dtype, uint16_t (*ref)(float),
                               uint16_t (*oracle)(float), bool oracle_nan) {
    std::vector<float> in;
    for (const auto& e : edges) {
        const float x = from_bits(e.in);
        EXPECT_EQ(ref(x), e.out) << "in=0x" << std::hex << e.in;
        if (oracle_nan || !std::isnan(x)) EXPECT_EQ(oracle(x), e.out) << "oracle, in=0x" << std::hex << e.in;
        in.push_back(x);
    }
    for (int isa : isas()) {
        SCOPED_TRACE(dsk_isa_name(isa));
        std::vector<float> big;
        for (int r = 0; r < 7; ++r) big.insert(big.end(), in.begin(), in.end());
        std::vector<uint16_t> out;
        f32_to_16_on_isa(isa, dtype, big, out);
        for (size_t i = 0; i < big.size(); ++i)
            EXPECT_EQ(out[i], edges[i % in.size()].out) << "in=0x" << std::hex << bits(big[i]);
    }
}

TEST(KernelConvert, F32ToF16EdgeValues) {
    expect_edges_on_every_isa(f16_edges(), DSK_F16, dsk_ref_f32_to_f16, oracle_f16, /*oracle_nan=*/false);
}

TEST(KernelConvert, F32ToBf16EdgeValues) {
    expect_edges_on_every_isa(bf16_edges(), DSK_BF16, dsk_ref_f32_to_bf16, oracle_bf16, /*oracle_nan=*/true);
}

// Random fp32 bit patterns (every exponent, NaNs, denormals) and values
// clustered on fp16 rounding boundaries: reference vs oracle, ISAs vs reference.
TEST(KernelConvert, F32To16RandomBitsMatchOracleEveryIsa) {
    Rng rng(7);
    std::vector<float> in;
    for (int i = 0; i < 400000; ++i) in.push_back(from_bits(rng.u32()));
    // Midpoints between neighbouring fp16 values and one fp32 ulp either side.
    for (uint32_t h = 0; h < 0x7BFF; h += 3) {
        const float mid = static_cast<float>(
            (f16_value(static_cast<uint16_t>(h)) + f16_value(static_cast<uint16_t>(h + 1))) / 2);
        for (uint32_t d : {bits(mid) - 1, bits(mid), bits(mid) + 1}) {
            in.push_back(from_bits(d));
            in.push_back(-from_bits(d));
        }
    }
    for (int dtype : {DSK_F16, DSK_BF16}) {
        SCOPED_TRACE(dtype_name(dtype));
        std::vector<uint16_t> ref(in.size());
        for (size_t i = 0; i < in.size(); ++i) {
            ref[i] = dtype == DSK_F16 ? dsk_ref_f32_to_f16(in[i]) : dsk_ref_f32_to_bf16(in[i]);
            if (std::isnan(in[i])) {
                const uint16_t exp_mask = dtype == DSK_F16 ? 0x7C00 : 0x7F80;
                ASSERT_TRUE((ref[i] & exp_mask) == exp_mask && (ref[i] & ~exp_mask & 0x7FFF));
            } else {
                ASSERT_EQ(ref[i], dtype == DSK_F16 ? oracle_f16(in[i]) : oracle_bf16(in[i]))
                    << "in=0x" << std::hex << bits(in[i]);
            }
        }
        for (int isa : isas()) {
            SCOPED_TRACE(dsk_isa_name(isa));
            std::vector<uint16_t> out;
            f32_to_16_on_isa(isa, dtype, in, out);
            for (size_t i = 0; i < in.size(); ++i)
                ASSERT_EQ(out[i], ref[i]) << "in=0x" << std::hex << bits(in[i]);
        }
    }
}

// dsk_convert, every (src, dst) dtype pair, every length, every ISA: bitwise
// equal to the reference conversions, nothing written past n.
TEST(KernelConvert, AnyToAnyAllLengthsEveryIsa) {
    Rng rng(11);
    for (size_t n : lengths()) {
        std::vector<float> vals = rng.uniform_vec(n, -70000.0f, 70000.0f);
        for (size_t i = 0; i < n; i += 5) vals[i] *= 1e-9f;  // small and subnormal-range values too
        for (int sd : {DSK_F32, DSK_F16, DSK_BF16}) {
            Buf src(sd, n);
            src.set_from(vals);
            for (int dd : {DSK_F32, DSK_F16, DSK_BF16}) {
                Buf want(dd, n);
                for (size_t i = 0; i < n; ++i) {
                    float x = src.get(i);
                    if (dd == DSK_F32)
                        want.f32()[i] = x;
                    else if (dd == DSK_F16)
                        reinterpret_cast<uint16_t*>(want.data())[i] = dsk_ref_f32_to_f16(x);
                    else
                        reinterpret_cast<uint16_t*>(want.data())[i] = dsk_ref_f32_to_bf16(x);
                }
                for (int isa : isas()) {
                    SCOPED_TRACE(trace(isa, n) + " " + dtype_name(sd) + "->" + dtype_name(dd));
                    IsaGuard guard(isa);
                    Buf dst(dd, n);
                    dskt::kern().convert(src.data(), sd, dst.data(), dd, n);
                    ASSERT_TRUE(dst.same_bits(want));
                    ASSERT_TRUE(dst.guard_intact());
                }
            }
        }
    }
}

TEST(KernelConvert, SameDtypeInPlaceIsNoOp) {
    std::vector<float> x = {1.5f, -2.0f, 3.25f};
    dskt::kern().convert(x.data(), DSK_F32, x.data(), DSK_F32, x.size());
    EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f, 3.25f}));
    dskt::kern().convert(nullptr, DSK_F32, nullptr, DSK_F16, 0);  // n == 0 with NULL is fine
}

TEST(KernelConvert, RejectsBadDtype) {
    float x = 1.0f;
    uint16_t y = 0;
    try {
        dskt::kern().convert(&x, 7, &y, DSK_F16, 1);
        FAIL() << "expected ds::Error";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(e.what()).find("src_dtype"), std::string::npos) << e.what();
    }
}
