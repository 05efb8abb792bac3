// dsk_sumsq (double accumulation, non-finite flag) and dsk_axpy: every dtype,
// length and ISA against the scalar reference and an independent formula.
#include "core/error.h"
#include "test_kernels_common.h"

using namespace dskt;

namespace {

// Independent sum of squares: long double accumulation of exact squares.
long double sumsq_oracle(const Buf& x) {
    long double s = 0;
    for (size_t i = 0; i < x.n; ++i) {
        const long double v = x.get(i);
        s += v * v;
    }
    return s;
}

void store_any(Buf& b, size_t i, float x) {
    if (b.dtype == DSK_F32)
        b.f32()[i] = x;
    else if (b.dtype == DSK_F16)
        reinterpret_cast<uint16_t*>(b.data())[i] = oracle_f16(x);
    else
        reinterpret_cast<uint16_t*>(b.data())[i] = oracle_bf16(x);
}

}  // namespace

TEST(KernelSumsq, MatchesReferenceAndLongDoubleEveryIsa) {
    Rng rng(21);
    for (size_t n : lengths()) {
        const std::vector<float> vals = rng.uniform_vec(n, -300.0f, 300.0f);
        for (int dt : {DSK_F32, DSK_F16, DSK_BF16}) {
            Buf x(dt, n);
            x.set_from(vals);
            int ref_flag = -1;
            const double ref = dsk_ref_sumsq(x.data(), dt, n, &ref_flag);
            const long double exact = sumsq_oracle(x);
            EXPECT_EQ(ref_flag, 0);
            EXPECT_NEAR(ref, static_cast<double>(exact), 1e-12 * static_cast<double>(exact));
            for (int isa : isas()) {
                SCOPED_TRACE(trace(isa, n) + " " + dtype_name(dt));
                IsaGuard guard(isa);
                int flag = -1;
                const double s = dskt::kern().sumsq(x.data(), dt, n, &flag);
                EXPECT_EQ(flag, 0);
                EXPECT_NEAR(s, ref, 1e-12 * ref);
                EXPECT_NEAR(s, static_cast<double>(exact), 1e-12 * static_cast<double>(exact));
                // Deterministic for a fixed thread count: same bits twice.
                EXPECT_EQ(s, dskt::kern().sumsq(x.data(), dt, n, nullptr));
            }
        }
    }
}

TEST(KernelSumsq, FlagsInfAndNanAnywhere) {
    for (size_t n : lengths()) {
        for (int dt : {DSK_F32, DSK_F16, DSK_BF16}) {
            Buf x(dt, n);
            x.set_from(std::vector<float>(n, 0.5f));
            const Buf clean = x;
            // Positions: first element, middle (vector body), last (scalar tail).
            for (size_t pos : {size_t{0}, n / 2, n - 1}) {
                for (float bad : {INFINITY, -INFINITY, NAN}) {
                    x = clean;
                    store_any(x, pos, bad);
                    int ref_flag = 0;
                    dsk_ref_sumsq(x.data(), dt, n, &ref_flag);
                    EXPECT_EQ(ref_flag, 1);
                    for (int isa : isas()) {
                        SCOPED_TRACE(trace(isa, n) + " pos=" + std::to_string(pos) + " " + dtype_name(dt));
                        IsaGuard guard(isa);
                        int flag = 0;
                        dskt::kern().sumsq(x.data(), dt, n, &flag);
                        EXPECT_EQ(flag, 1);
                    }
                }
            }
        }
    }
}

TEST(KernelSumsq, LargestFiniteValuesDoNotFlag) {
    // FLT_MAX^2 overflows float but not double: must not be reported non-finite.
    std::vector<float> x(1000, 3.4e38f);
    for (int isa : isas()) {
        IsaGuard guard(isa);
        int flag = -1;
        const double s = dskt::kern().sumsq(x.data(), DSK_F32, x.size(), &flag);
        EXPECT_EQ(flag, 0) << dsk_isa_name(isa);
        const double x0 = x[0];
        EXPECT_NEAR(s, 1000.0 * x0 * x0, 1e-12 * s);
    }
}

TEST(KernelAxpy, AllDtypePairsMatchReferenceAndFormulaEveryIsa) {
    Rng rng(31);
    const float scale = -0.37f;
    for (size_t n : lengths()) {
        const std::vector<float> dv = rng.uniform_vec(n, -10.0f, 10.0f);
        const std::vector<float> sv = rng.uniform_vec(n, -10.0f, 10.0f);
        for (int dd : {DSK_F32, DSK_F16, DSK_BF16}) {
            for (int sd : {DSK_F32, DSK_F16, DSK_BF16}) {
                Buf dst0(dd, n), src(sd, n);
                dst0.set_from(dv);
                src.set_from(sv);
                Buf want = dst0;
                dsk_ref_axpy(want.data(), dd, src.data(), sd, scale, n);
                // Independent formula: dst + scale*src in double, one ulp of dst's dtype.
                for (size_t i = 0; i < n; ++i) {
                    const double e =
                        static_cast<double>(dst0.get(i)) + static_cast<double>(scale) * src.get(i);
                    ASSERT_NEAR(want.get(i), e, rel_ulp(dd) * std::fabs(e) + abs_floor(dd)) << "i=" << i;
                }
                for (int isa : isas()) {
                    SCOPED_TRACE(trace(isa, n) + " dst=" + dtype_name(dd) + " src=" + dtype_name(sd));
                    IsaGuard guard(isa);
                    Buf dst = dst0;
                    dskt::kern().axpy(dst.data(), dd, src.data(), sd, scale, n);
                    ASSERT_TRUE(dst.same_bits(want));  // includes the guard bytes
                }
            }
        }
    }
}

TEST(KernelAxpy, RejectsBadDtype) {
    float a = 0, b = 0;
    EXPECT_THROW(dskt::kern().axpy(&a, DSK_F32, &b, 3, 1.0f, 1), ds::Error);
    EXPECT_THROW(dskt::kern().sumsq(&a, -1, 1, nullptr), ds::Error);
}

// dsk_axpy_sumsq: the stored values are dsk_axpy's (or scale * src when
// overwriting) bit for bit on every ISA, and the returned sum of squares is
// the float64 sum of the stored values; Inf/NaN anywhere is flagged.
TEST(KernelAxpySumsq, StoresAsAxpyAndSumsTheStoredValuesEveryIsa) {
    Rng rng(41);
    const float scale = 0.61f;
    for (size_t n : lengths()) {
        const std::vector<float> dv = rng.uniform_vec(n, -10.0f, 10.0f);
        const std::vector<float> sv = rng.uniform_vec(n, -10.0f, 10.0f);
        for (int dd : {DSK_F32, DSK_F16, DSK_BF16}) {
            for (int sd : {DSK_F32, DSK_F16, DSK_BF16}) {
                Buf dst0(dd, n), src(sd, n);
                dst0.set_from(dv);
                src.set_from(sv);
                for (int over : {0, 1}) {
                    Buf want = dst0;
                    if (over) {
                        Buf zero(dd, n);
                        zero.set_from(std::vector<float>(n, 0.0f));
                        want = zero;  // scale*src + 0 == scale*src (the product rounded once)
                    }
                    dsk_ref_axpy(want.data(), dd, src.data(), sd, scale, n);
                    long double exact = 0;  // of the stored values, independently
                    for (size_t i = 0; i < n; ++i) exact += static_cast<long double>(want.get(i)) * want.get(i);
                    for (int isa : isas()) {
                        SCOPED_TRACE(trace(isa, n) + " dst=" + dtype_name(dd) + " src=" + dtype_name(sd) +
                                     " overwrite=" + std::to_string(over));
                        IsaGuard guard(isa);
                        Buf dst = dst0;
                        int flag = -1;
                        const double s = dskt::kern().axpy_sumsq(dst.data(), dd, src.data(), sd, scale, over, n, &flag);
                        ASSERT_TRUE(dst.same_bits(want));  // includes the guard bytes
                        EXPECT_EQ(flag, 0);
                        EXPECT_NEAR(s, static_cast<double>(exact), 1e-12 * static_cast<double>(exact));
                        Buf dst_r = dst0;
                        int rflag = -1;
                        const double r = dsk_ref_axpy_sumsq(dst_r.data(), dd, src.data(), sd, scale, over, n, &rflag);
                        EXPECT_TRUE(dst_r.same_bits(want));
                        EXPECT_EQ(rflag, 0);
                        EXPECT_NEAR(r, static_cast<double>(exact), 1e-12 * static_cast<double>(exact));
                    }
                }
            }
        }
    }
}

TEST(KernelAxpySumsq, FlagsInfAndNanAnywhereEveryIsa) {
    for (size_t n : lengths()) {
        if (n == 0) continue;
        std::vector<float> src(n, 0.25f), dst0(n, 0.5f);
        for (size_t pos : {size_t{0}, n / 2, n - 1}) {
            for (float bad : {INFINITY, -INFINITY, NAN}) {
                std::vector<float> s = src;
                s[pos] = bad;
                for (int isa : isas()) {
                    SCOPED_TRACE(trace(isa, n) + " pos=" + std::to_string(pos));
                    IsaGuard guard(isa);
                    for (int over : {0, 1}) {
                        std::vector<float> d = dst0;
                        int flag = 0;
                        dskt::kern().axpy_sumsq(d.data(), DSK_F32, s.data(), DSK_F32, 1.0f, over, n, &flag);
                        EXPECT_EQ(flag, 1);
                    }
                }
            }
        }
    }
}
