// dsk_lamb_step (FusedLamb semantics, one tensor) on every ISA and length:
//  (a) against dsk_ref_lamb_step: m, v bitwise; trust ratio within 1 ulp
//      (the double norms are summed in a different order per ISA and thread
//      count, ~1e-16 relative, which can move the fp32 trust by one ulp); p
//      bitwise when the trust ratios agree, else within 2 ulp;
//  (b) the reference against a float64 evaluation: trust, m, v, p within
//      1e-6 relative; w16 equal to the rounding oracle of the fp32 result;
//  plus trust clamping to [min_coeff, max_coeff] and the zero-norm cases.
#include "core/error.h"
#include "test_kernels_common.h"

using namespace dskt;

namespace {

constexpr int kNoW = -1;

dsk_lamb_hparams make_hparams(float wd, int step, float grad_scale, bool eps_inside) {
    dsk_lamb_hparams h{};
    h.lr = 1e-3f;
    h.beta1 = 0.9f;
    h.beta2 = 0.999f;
    h.eps = 1e-8f;
    h.weight_decay = wd;
    h.bias_correction1 = 1.0f - std::pow(0.9f, static_cast<float>(step));
    h.bias_correction2 = 1.0f - std::pow(0.999f, static_cast<float>(step));
    h.grad_scale = grad_scale;
    h.max_coeff = 10.0f;
    h.min_coeff = 0.01f;
    h.eps_inside_sqrt = eps_inside ? 1 : 0;
    return h;
}

struct LambState {
    Buf p, g, m, v, w;
    float trust = 0;
    LambState(size_t n, int gd, int wd)
        : p(DSK_F32, n), g(gd, n), m(DSK_F32, n), v(DSK_F32, n), w(wd == kNoW ? DSK_F16 : wd, n) {}
};

LambState make_state(Rng& rng, size_t n, int gd, int wd, float p_mag, float g_mag) {
    LambState s(n, gd, wd);
    s.p.set_from(rng.uniform_vec(n, -p_mag, p_mag));
    s.g.set_from(rng.uniform_vec(n, -g_mag, g_mag));
    s.m.set_from(rng.uniform_vec(n, -1e-2f, 1e-2f));
    s.v.set_from(rng.uniform_vec(n, 0.0f, 1e-3f));
    return s;
}

void run_lamb(LambState& s, int wd, const dsk_lamb_hparams& h, bool ref) {
    void* w = wd == kNoW ? nullptr : s.w.data();
    const int wdt = wd == kNoW ? DSK_F16 : wd;
    s.trust =
        ref ? dsk_ref_lamb_step(s.p.f32(), s.g.data(), s.g.dtype, s.m.f32(), s.v.f32(), w, wdt, s.p.n, &h)
            : dskt::kern().lamb_step(s.p.f32(), s.g.data(), s.g.dtype, s.m.f32(), s.v.f32(), w, wdt, s.p.n, &h);
}

void check_against_float64(const LambState& in, const LambState& out, int wd, const dsk_lamb_hparams& h) {
    const size_t n = in.p.n;
    const double b1 = h.beta1, b2 = h.beta2;
    std::vector<double> m(n), v(n), u(n), u_mag(n);
    double pn = 0, un = 0;
    for (size_t i = 0; i < n; ++i) {
        const double g = static_cast<double>(in.g.get(i)) * h.grad_scale, p = in.p.get(i);
        m[i] = b1 * in.m.get(i) + (1 - b1) * g;
        v[i] = b2 * in.v.get(i) + (1 - b2) * g * g;
        const double denom = h.eps_inside_sqrt ? std::sqrt(v[i] + h.eps) : std::sqrt(v[i]) + h.eps;
        u[i] = m[i] / denom + h.weight_decay * p;
        // Size of the terms u is made of: m may cancel, its error does not.
        u_mag[i] =
            (std::fabs(b1 * in.m.get(i)) + std::fabs((1 - b1) * g)) / denom + std::fabs(h.weight_decay * p);
        pn += p * p;
        un += u[i] * u[i];
        ASSERT_NEAR(out.m.get(i), m[i], 1e-6 * (std::fabs(b1 * in.m.get(i)) + std::fabs((1 - b1) * g))) << i;
        ASSERT_NEAR(out.v.get(i), v[i], 1e-6 * v[i]) << i;
    }
    double trust = 1;
    if (pn != 0 && un != 0)
        trust = std::min<double>(std::max<double>(std::sqrt(pn / un), h.min_coeff), h.max_coeff);
    ASSERT_NEAR(out.trust, trust, 1e-6 * trust);
    const double step_size =
        static_cast<double>(h.lr) * std::sqrt(static_cast<double>(h.bias_correction2)) / h.bias_correction1;
    for (size_t i = 0; i < n; ++i) {
        const double p0 = in.p.get(i), d = step_size * trust * u[i], p = p0 - d;
        const double mag = std::max({std::fabs(p), std::fabs(p0), step_size * trust * u_mag[i]});
        ASSERT_NEAR(out.p.get(i), p, 1e-6 * mag) << "p, i=" << i;
        if (wd != kNoW) {
            const uint16_t want = wd == DSK_F16 ? oracle_f16(out.p.get(i)) : oracle_bf16(out.p.get(i));
            ASSERT_EQ(reinterpret_cast<const uint16_t*>(out.w.data())[i], want) << "w16, i=" << i;
        }
    }
}

void compare_to_reference(const LambState& out, const LambState& ref) {
    ASSERT_TRUE(out.m.same_bits(ref.m));
    ASSERT_TRUE(out.v.same_bits(ref.v));
    ASSERT_LE(ulp_distance(out.trust, ref.trust), 1) << out.trust << " vs " << ref.trust;
    if (out.trust == ref.trust) {
        ASSERT_TRUE(out.p.same_bits(ref.p));
        ASSERT_TRUE(out.w.same_bits(ref.w));
    } else {
        for (size_t i = 0; i < out.p.n; ++i) ASSERT_LE(ulp_distance(out.p.get(i), ref.p.get(i)), 2) << i;
    }
}

void check_config(int gd, int wd, const dsk_lamb_hparams& h, float p_mag, float g_mag, uint64_t seed,
                  const std::vector<size_t>& ns = lengths()) {
    Rng rng(seed);
    for (size_t n : ns) {
        const LambState init = make_state(rng, n, gd, wd, p_mag, g_mag);
        LambState ref = init;
        run_lamb(ref, wd, h, true);
        {
            SCOPED_TRACE("reference vs float64, n=" + std::to_string(n));
            check_against_float64(init, ref, wd, h);
        }
        for (int isa : isas()) {
            SCOPED_TRACE(trace(isa, n) + " g=" + dtype_name(gd) +
                         " w16=" + (wd == kNoW ? "none" : dtype_name(wd)));
            IsaGuard guard(isa);
            LambState out = init;
            run_lamb(out, wd, h, false);
            compare_to_reference(out, ref);
            check_against_float64(init, out, wd, h);
        }
    }
}

}  // namespace

TEST(KernelLamb, LargeAlignedW16StreamingStores) {
    const std::vector<size_t> ns = {(size_t{1} << 20) + 37};
    check_config(DSK_F32, DSK_BF16, make_hparams(0.01f, 3, 1.0f, false), 1.0f, 0.1f, 9, ns);
    check_config(DSK_F16, DSK_F16, make_hparams(0.01f, 3, 1.0f, true), 1.0f, 0.1f, 10, ns);
}

TEST(KernelLamb, Fp32GradsEpsOutsideSqrt) {
    check_config(DSK_F32, kNoW, make_hparams(0.01f, 3, 1.0f, false), 1.0f, 0.1f, 1);
}

TEST(KernelLamb, Fp16GradsEpsInsideSqrtBf16Copy) {
    check_config(DSK_F16, DSK_BF16, make_hparams(0.01f, 7, 1.0f, true), 1.0f, 0.1f, 2);
}

TEST(KernelLamb, Bf16GradsScaledFp16CopyNoWeightDecay) {
    check_config(DSK_BF16, DSK_F16, make_hparams(0.0f, 2, 1.0f / 256.0f, false), 1.0f, 25.0f, 3);
}

TEST(KernelLamb, TrustRatioClampsToMaxAndMin) {
    const dsk_lamb_hparams h = make_hparams(0.0f, 1, 1.0f, false);
    // First step from zero state: |u_i| ~ 1, so |p| ~ 100 gives ratio ~ 100 -> max_coeff,
    // |p| ~ 1e-5 gives ~ 1e-5 -> min_coeff. Both run through the float64 check too.
    for (float p_mag : {100.0f, 1e-5f}) {
        const float want = p_mag > 1 ? h.max_coeff : h.min_coeff;
        Rng rng(40);
        for (size_t n : lengths()) {
            LambState init = make_state(rng, n, DSK_F32, kNoW, p_mag, 0.1f);
            std::fill(init.m.f32(), init.m.f32() + n, 0.0f);
            std::fill(init.v.f32(), init.v.f32() + n, 0.0f);
            for (int isa : isas()) {
                IsaGuard guard(isa);
                LambState out = init;
                run_lamb(out, kNoW, h, false);
                EXPECT_EQ(out.trust, want) << trace(isa, n);
                check_against_float64(init, out, kNoW, h);
            }
        }
    }
}

TEST(KernelLamb, ZeroNormGivesTrustOne) {
    const size_t n = 1000;
    for (int isa : isas()) {
        IsaGuard guard(isa);
        // |p| = 0 (with weight decay, |u| > 0): trust 1, p = -step_size * u.
        Rng rng(50);
        LambState a = make_state(rng, n, DSK_F32, kNoW, 1.0f, 0.1f);
        std::fill(a.p.f32(), a.p.f32() + n, 0.0f);
        const LambState a0 = a;
        run_lamb(a, kNoW, make_hparams(0.01f, 1, 1.0f, false), false);
        EXPECT_EQ(a.trust, 1.0f) << dsk_isa_name(isa);
        check_against_float64(a0, a, kNoW, make_hparams(0.01f, 1, 1.0f, false));
        // |u| = 0 (g = m = v = 0, no weight decay): trust 1 and p unchanged.
        LambState b = make_state(rng, n, DSK_F32, kNoW, 1.0f, 0.1f);
        for (Buf* z : {&b.g, &b.m, &b.v}) std::fill(z->f32(), z->f32() + n, 0.0f);
        const LambState b0 = b;
        run_lamb(b, kNoW, make_hparams(0.0f, 1, 1.0f, false), false);
        EXPECT_EQ(b.trust, 1.0f) << dsk_isa_name(isa);
        EXPECT_TRUE(b.p.same_bits(b0.p)) << dsk_isa_name(isa);
    }
}

TEST(KernelLamb, RejectsBadArguments) {
    float p = 0, g = 0, m = 0, v = 0;
    const dsk_lamb_hparams h = make_hparams(0.0f, 1, 1.0f, false);
    EXPECT_THROW(dskt::kern().lamb_step(&p, &g, 5, &m, &v, nullptr, DSK_F16, 1, &h), ds::Error);
    EXPECT_THROW(dskt::kern().lamb_step(&p, &g, DSK_F32, nullptr, &v, nullptr, DSK_F16, 1, &h), ds::Error);
}
