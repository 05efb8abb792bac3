// The per-element bodies the CUDA kernels run (kernels/elem/, compiled here
// by the host compiler, as nvcc compiles them for the device), stepped the
// way the grid-stride kernels step them (ScalarOps, one element at a time),
// against kernels/ref and the independent rounding oracles:
//  * conversions at the edges: bf16 round-to-nearest ties (both parities),
//    fp16 overflow (65504 stays, 65520 -> Inf), fp16 subnormals, NaN, Inf;
//  * scale (the unscale) and axpy in every dtype;
//  * the two-stage reduction's order (kernels/elem/reduce_plan.h, emulated)
//    against the reference sum of squares, and NaN/Inf reported;
//  * LAMB's two passes with the device's reduction order and trust function
//    against dsk_ref_lamb_step.
#include "elem/axpy.h"
#include "elem/convert.h"
#include "elem/lamb.h"
#include "elem/reduce_plan.h"
#include "elem/scale.h"
#include "elem/simd_scalar.h"
#include "elem/step_consts.h"
#include "ref/lamb_trust.h"
#include "test_kernels_common.h"

using namespace dskt;

namespace {

// The grid-stride loop of kernels/cuda/elementwise.cuh, on the host.
template <class Body>
void run_elementwise(const Body& body, size_t n) {
    for (size_t i = 0; i < n; ++i) body.template step<ScalarOps>(i);
}

std::vector<float> edge_values() {
    std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, -65520.0f, 1e-7f, -3e-8f,
                            6.1e-5f, 5.9e-8f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN, 3.14159f};
    // bf16 ties: the dropped half is exactly 0x8000, kept lsb even (round down) and odd (round up).
    for (uint32_t u : {0x3F808000u, 0x3F818000u, 0xBF808000u, 0xBF818000u, 0x7F7F8000u, 0x00018000u})
        v.push_back(from_bits(u));
    // fp16 ties: half-way between two fp16 values.
    for (float x : {1.0f + 0x1.0p-11f, 1.0f + 3 * 0x1.0p-11f, 2048.0f + 1.0f, 2048.0f + 3.0f}) v.push_back(x);
    Rng rng(5);
    for (int i = 0; i < 200; ++i) v.push_back(rng.uniform(-70000.0f, 70000.0f));
    return v;
}

TEST(CudaElemConvert, EdgeCasesMatchOraclesAndReference) {
    const std::vector<float> vals = edge_values();
    const size_t n = vals.size();
    Buf src(DSK_F32, n);
    src.set_from(vals);
    for (int dd : {DSK_F16, DSK_BF16}) {
        Buf dst(dd, n);
        if (dd == DSK_F16)
            run_elementwise(ConvertBody<DSK_F32, DSK_F16>{src.data(), dst.data()}, n);
        else
            run_elementwise(ConvertBody<DSK_F32, DSK_BF16>{src.data(), dst.data()}, n);
        const uint16_t* h = reinterpret_cast<const uint16_t*>(dst.data());
        for (size_t i = 0; i < n; ++i) {
            const uint16_t want = dd == DSK_F16 ? oracle_f16(vals[i]) : oracle_bf16(vals[i]);
            if (std::isnan(vals[i])) {
                EXPECT_TRUE(dd == DSK_F16 ? (h[i] & 0x7C00) == 0x7C00 && (h[i] & 0x3FF) : h[i] == 0x7FC0);
            } else {
                EXPECT_EQ(h[i], want) << dtype_name(dd) << " of " << vals[i] << " (bits " << std::hex
                                      << bits(vals[i]) << ")";
            }
        }
        EXPECT_TRUE(dst.guard_intact());
        // and back: 16-bit -> f32 is exact
        Buf back(DSK_F32, n);
        if (dd == DSK_F16)
            run_elementwise(ConvertBody<DSK_F16, DSK_F32>{dst.data(), back.data()}, n);
        else
            run_elementwise(ConvertBody<DSK_BF16, DSK_F32>{dst.data(), back.data()}, n);
        for (size_t i = 0; i < n; ++i) {
            const float want = load_as_float(dst.data(), dd, i);
            if (std::isnan(want))
                EXPECT_TRUE(std::isnan(back.f32()[i]));
            else
                EXPECT_EQ(bits(back.f32()[i]), bits(want)) << i;
        }
    }
    EXPECT_EQ(oracle_f16(65519.0f), 0x7BFFu);  // the oracle itself at the overflow edge
    EXPECT_EQ(oracle_f16(65520.0f), 0x7C00u);
}

TEST(CudaElemScaleAxpy, EveryDtypeEqualsReferenceBitwise) {
    const std::vector<float> vals = edge_values();
    const size_t n = vals.size();
    for (int dt : {DSK_F32, DSK_F16, DSK_BF16}) {
        for (float s : {0.5f, 1.0f / 65536.0f, 3.0f, 0.0f}) {
            Buf a(dt, n), b(dt, n);
            a.set_from(vals);
            b.set_from(vals);
            with_dtype(dt, [&](auto d) { run_elementwise(ScaleBody<decltype(d)::value>{a.data(), s}, n); });
            dsk_ref_scale(b.data(), dt, s, n);
            EXPECT_TRUE(a.same_bits(b)) << "scale " << dtype_name(dt) << " by " << s;
        }
        for (int sd : {DSK_F32, DSK_F16, DSK_BF16}) {
            Buf d1(dt, n), d2(dt, n), src(sd, n);
            Rng rng(11);
            d1.set_from(rng.uniform_vec(n, -2.0f, 2.0f));
            d2 = d1;
            src.set_from(vals);
            with_dtype(dt, [&](auto dd) {
                with_dtype(sd, [&](auto ss) {
                    run_elementwise(AxpyBody<decltype(dd)::value, decltype(ss)::value>{d1.data(), src.data(), -0.75f}, n);
                });
            });
            dsk_ref_axpy(d2.data(), dt, src.data(), sd, -0.75f, n);
            EXPECT_TRUE(d1.same_bits(d2)) << "axpy dst " << dtype_name(dt) << " src " << dtype_name(sd);
        }
    }
}

TEST(CudaElemReduce, DeviceOrderSumOfSquaresMatchesReference) {
    for (size_t n : {size_t{1}, size_t{255}, size_t{1025}, size_t{70001}, size_t{5000000}}) {
        for (int dt : {DSK_F32, DSK_BF16}) {
            Buf x(dt, n);
            Rng rng(n);
            x.set_from(rng.uniform_vec(n, -3.0f, 3.0f));
            const double emu = ds::kernels::red_emulate(n, [&](size_t i) {
                auto a = ScalarOps::dacc_zero();
                with_dtype(dt, [&](auto d) { ScalarOps::dacc_add_sq(a, vload<ScalarOps, decltype(d)::value>(x.data(), i)); });
                return ScalarOps::dacc_sum(a);
            });
            int nf = -1;
            const double ref = dsk_ref_sumsq(x.data(), dt, n, &nf);
            EXPECT_EQ(nf, 0);
            // float64 sums of the same n terms in two orders: n * 2^-53 relative at most.
            EXPECT_NEAR(emu, ref, ref * 1e-15 * static_cast<double>(n) + 1e-300) << "n=" << n;
        }
    }
    EXPECT_EQ(ds::kernels::red_blocks(1), 1);
    EXPECT_EQ(ds::kernels::red_blocks(size_t{1} << 40), ds::kernels::kRedMaxBlocks);
    // A NaN or Inf element makes the double sum non-finite, which is how the
    // entry point reports *nonfinite.
    std::vector<float> v(3000, 1.0f);
    for (float bad : {NAN, INFINITY}) {
        v[2999] = bad;
        const double s = ds::kernels::red_emulate(v.size(), [&](size_t i) { return double(v[i]) * double(v[i]); });
        EXPECT_FALSE(std::isfinite(s));
    }
}

TEST(CudaElemReduce, FusedAxpySumsqInDeviceOrderMatchesReference) {
    const size_t n = 70001;
    for (int dd : {DSK_F32, DSK_BF16})
        for (int overwrite : {0, 1}) {
            Rng rng(dd * 2 + overwrite);
            Buf d1(dd, n), src(DSK_F16, n);
            d1.set_from(rng.uniform_vec(n, -2.0f, 2.0f));
            src.set_from(rng.uniform_vec(n, -3.0f, 3.0f));
            Buf d2 = d1;
            const double emu = ds::kernels::red_emulate(n, [&](size_t i) {
                auto acc = ScalarOps::dacc_zero();
                with_dtype(dd, [&](auto d) {
                    if (overwrite)
                        axpy_sq_one<ScalarOps, decltype(d)::value, DSK_F16, true>(d1.data(), src.data(), 0.5f, i, acc);
                    else
                        axpy_sq_one<ScalarOps, decltype(d)::value, DSK_F16, false>(d1.data(), src.data(), 0.5f, i, acc);
                });
                return ScalarOps::dacc_sum(acc);
            });
            int nf = -1;
            const double ref = dsk_ref_axpy_sumsq(d2.data(), dd, src.data(), DSK_F16, 0.5f, overwrite, n, &nf);
            EXPECT_TRUE(d1.same_bits(d2)) << "stored values, dst " << dtype_name(dd) << " overwrite " << overwrite;
            EXPECT_NEAR(emu, ref, ref * 1e-15 * static_cast<double>(n));
            EXPECT_EQ(nf, 0);
        }
}

TEST(CudaElemLamb, DeviceOrderTwoPassesMatchReference) {
    for (size_t n : {size_t{1}, size_t{1000}, size_t{300001}}) {
        for (int gd : {DSK_F32, DSK_F16}) {
            dsk_lamb_hparams h{};
            h.lr = 1e-3f;
            h.beta1 = 0.9f;
            h.beta2 = 0.999f;
            h.eps = 1e-6f;
            h.weight_decay = 0.01f;
            h.bias_correction1 = 1.0f - 0.9f;
            h.bias_correction2 = 1.0f - 0.999f;
            h.grad_scale = 1.0f;
            h.max_coeff = 10.0f;
            h.min_coeff = 0.01f;
            Rng rng(n + gd);
            Buf p(DSK_F32, n), g(gd, n), m(DSK_F32, n), v(DSK_F32, n), w(DSK_BF16, n);
            p.set_from(rng.uniform_vec(n, -1.0f, 1.0f));
            g.set_from(rng.uniform_vec(n, -1.0f, 1.0f));
            m.set_from(rng.uniform_vec(n, -1e-2f, 1e-2f));
            v.set_from(rng.uniform_vec(n, 0.0f, 1e-3f));
            Buf rp = p, rm = m, rv = v, rw = w;
            const float ref_trust = dsk_ref_lamb_step(rp.f32(), g.data(), gd, rm.f32(), rv.f32(), rw.data(),
                                                      DSK_BF16, n, &h);

            const ds::kernels::LambConsts c = ds::kernels::lamb_consts(h);
            const ds::kernels::LambArgs a{{p.f32(), g.data(), gd, w.data(), DSK_BF16, n}, m.f32(), v.f32()};
            // Pass 1 per element (each element once), then the device's summation order.
            std::vector<double> psq(n), usq(n);
            with_dtype(gd, [&](auto d) {
                const LambPass1<decltype(d)::value> body{a, c};
                for (size_t i = 0; i < n; ++i) {
                    auto pa = ScalarOps::dacc_zero(), ua = ScalarOps::dacc_zero();
                    body.template step<ScalarOps>(i, pa, ua);
                    psq[i] = ScalarOps::dacc_sum(pa);
                    usq[i] = ScalarOps::dacc_sum(ua);
                }
            });
            const double ps = ds::kernels::red_emulate(n, [&](size_t i) { return psq[i]; });
            const double us = ds::kernels::red_emulate(n, [&](size_t i) { return usq[i]; });
            const float trust = dsk_lamb_trust(ps, us, &h);
            const LambPass2<DSK_BF16> body2{a, c, dsk_lamb_coef(trust, &h), false};
            run_elementwise(body2, n);

            EXPECT_TRUE(m.same_bits(rm) && v.same_bits(rv)) << "n=" << n;
            EXPECT_LE(ulp_distance(trust, ref_trust), 1) << "n=" << n;  // double sums, two orders
            if (trust == ref_trust) EXPECT_TRUE(p.same_bits(rp) && w.same_bits(rw)) << "n=" << n;
            for (size_t i = 0; i < n; ++i) ASSERT_NEAR(p.f32()[i], rp.f32()[i], 1e-6f * (1.0f + std::fabs(rp.f32()[i])));
        }
    }
}

}  // namespace
