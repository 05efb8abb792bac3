// dsk_adam_step (DeepSpeed CPU-Adam semantics) on every ISA, every length and
// every (g, state, w16) dtype combination:
//  (a) bitwise equal to dsk_ref_adam_step. Tolerance 0 ulp is deliberate: the
//      kernels and the reference perform the same fp32 operations in the same
//      order, with FMA in the same places (the reference calls fmaf where the
//      SIMD code uses vfmadd), and IEEE sqrt/div are correctly rounded, so
//      any difference is a bug (wrong order, a missing or extra fusion);
//  (b) within 1e-6 relative of a float64 evaluation of the reference formula
//      (one 16-bit ulp when m/v are stored in fp16/bf16), and the w16 copy
//      equal to the independent rounding oracle applied to the fp32 result.
#include "core/error.h"
#include "test_kernels_common.h"

using namespace dskt;

namespace {

constexpr int kNoW = -1;

dsk_adam_hparams make_hparams(bool adamw, float wd, bool bias_correction, int step, float grad_scale) {
    dsk_adam_hparams h{};
    h.lr = 1e-3f;
    h.beta1 = 0.9f;
    h.beta2 = 0.999f;
    h.eps = 1e-8f;
    h.weight_decay = wd;
    h.bias_correction1 = bias_correction ? 1.0f - std::pow(0.9f, static_cast<float>(step)) : 1.0f;
    h.bias_correction2_rsqrt =
        bias_correction ? 1.0f / std::sqrt(1.0f - std::pow(0.999f, static_cast<float>(step))) : 1.0f;
    h.grad_scale = grad_scale;
    h.adamw_mode = adamw ? 1 : 0;
    return h;
}

struct AdamState {
    Buf p, g, m, v, w;
    AdamState(size_t n, int gd, int sd, int wd)
        : p(DSK_F32, n), g(gd, n), m(sd, n), v(sd, n), w(wd == kNoW ? DSK_F16 : wd, n) {}
};

AdamState make_state(Rng& rng, size_t n, int gd, int sd, int wd, float g_mag) {
    AdamState s(n, gd, sd, wd);
    s.p.set_from(rng.uniform_vec(n, -1.0f, 1.0f));
    s.g.set_from(rng.uniform_vec(n, -g_mag, g_mag));
    s.m.set_from(rng.uniform_vec(n, -1e-2f, 1e-2f));
    s.v.set_from(rng.uniform_vec(n, 0.0f, 1e-3f));
    return s;
}

void run_adam(AdamState& s, int wd, const dsk_adam_hparams& h, bool ref) {
    void* w = wd == kNoW ? nullptr : s.w.data();
    const int wdt = wd == kNoW ? DSK_F16 : wd;
    if (ref)
        dsk_ref_adam_step(s.p.f32(), s.g.data(), s.g.dtype, s.m.data(), s.v.data(), s.m.dtype, w, wdt, s.p.n,
                          &h);
    else
        dskt::kern().adam_step(s.p.f32(), s.g.data(), s.g.dtype, s.m.data(), s.v.data(), s.m.dtype, w, wdt, s.p.n, &h);
}

// (b): float64 evaluation of DEEPSPEED_SEMANTICS.md §2.1 from the same inputs.
void check_against_float64(const AdamState& before, const AdamState& after, int wd,
                           const dsk_adam_hparams& h) {
    const double b1 = h.beta1, b2 = h.beta2, lr = h.lr, wdec = h.weight_decay;
    const int sd = before.m.dtype;
    for (size_t i = 0; i < before.p.n; ++i) {
        double g = static_cast<double>(before.g.get(i)) * h.grad_scale;
        double p = before.p.get(i);
        const double m0 = before.m.get(i), v0 = before.v.get(i), p0 = p;
        if (wdec > 0 && !h.adamw_mode) g += wdec * p;
        const double m = b1 * m0 + (1 - b1) * g;
        const double v = b2 * v0 + (1 - b2) * g * g;
        const double denom = std::sqrt(v) * h.bias_correction2_rsqrt + h.eps;
        if (wdec > 0 && h.adamw_mode) p -= lr * wdec * p;
        const double step = lr / h.bias_correction1 * m / denom;
        p -= step;
        const double tol_rel = sd == DSK_F32 ? 1e-6 : rel_ulp(sd);
        const double tol_abs = sd == DSK_F32 ? 0.0 : abs_floor(sd);
        const double m_mag = std::max({std::fabs(m), b1 * std::fabs(m0), (1 - b1) * std::fabs(g)});
        const double v_mag = std::max({v, b2 * v0, (1 - b2) * g * g});
        // Size of the update's terms (m may cancel; its rounding error does not).
        const double step_mag = lr / h.bias_correction1 * m_mag / denom;
        const double p_mag = std::max({std::fabs(p), std::fabs(p0), step_mag});
        ASSERT_NEAR(after.m.get(i), m, tol_rel * m_mag + tol_abs) << "m, i=" << i;
        ASSERT_NEAR(after.v.get(i), v, tol_rel * v_mag + tol_abs) << "v, i=" << i;
        // p uses m, v before they are rounded to 16 bits, so fp32 accuracy holds.
        ASSERT_NEAR(after.p.get(i), p, 1e-6 * p_mag) << "p, i=" << i;
        if (wd != kNoW) {
            const uint16_t want = wd == DSK_F16 ? oracle_f16(after.p.get(i)) : oracle_bf16(after.p.get(i));
            ASSERT_EQ(reinterpret_cast<const uint16_t*>(after.w.data())[i], want) << "w16, i=" << i;
        }
    }
}

// One configuration on every ISA and every length: (a) and (b).
void check_config(int gd, int sd, int wd, const dsk_adam_hparams& h, float g_mag, uint64_t seed,
                  const std::vector<size_t>& ns = lengths()) {
    Rng rng(seed);
    for (size_t n : ns) {
        const AdamState init = make_state(rng, n, gd, sd, wd, g_mag);
        AdamState ref = init;
        run_adam(ref, wd, h, true);
        {
            SCOPED_TRACE("reference vs float64, n=" + std::to_string(n));
            check_against_float64(init, ref, wd, h);
        }
        // Every ISA is bitwise equal to the reference, hence (b) holds for it too.
        for (int isa : isas()) {
            SCOPED_TRACE(trace(isa, n) + " g=" + dtype_name(gd) + " state=" + dtype_name(sd) +
                         " w16=" + (wd == kNoW ? "none" : dtype_name(wd)));
            IsaGuard guard(isa);
            AdamState out = init;
            run_adam(out, wd, h, false);
            ASSERT_TRUE(out.p.same_bits(ref.p));
            ASSERT_TRUE(out.m.same_bits(ref.m));
            ASSERT_TRUE(out.v.same_bits(ref.v));
            ASSERT_TRUE(out.w.same_bits(ref.w));  // untouched (guard pattern) when w16 is NULL
            ASSERT_TRUE(out.g.same_bits(init.g));
        }
    }
}

}  // namespace

// n >= 2^20 with a 64-byte aligned w16: the kernels write the 16-bit copy
// with non-temporal stores; results must not change.
TEST(KernelAdam, LargeAlignedW16StreamingStores) {
    const std::vector<size_t> ns = {(size_t{1} << 20) + 37};
    const dsk_adam_hparams h = make_hparams(true, 0.01f, true, 4, 1.0f);
    check_config(DSK_F32, DSK_F32, DSK_F16, h, 0.1f, 701, ns);
    check_config(DSK_BF16, DSK_F16, DSK_BF16, h, 0.1f, 702, ns);
}

TEST(KernelAdam, AdamWEveryDtypeCombination) {
    const dsk_adam_hparams h = make_hparams(true, 0.01f, true, 3, 1.0f);
    uint64_t seed = 100;
    for (int gd : {DSK_F32, DSK_F16, DSK_BF16})
        for (int sd : {DSK_F32, DSK_F16, DSK_BF16})
            for (int wd : {kNoW, int{DSK_F16}, int{DSK_BF16}}) check_config(gd, sd, wd, h, 0.1f, ++seed);
}

TEST(KernelAdam, L2ModeWeightDecay) {
    const dsk_adam_hparams h = make_hparams(false, 0.01f, true, 5, 1.0f);
    check_config(DSK_F32, DSK_F32, kNoW, h, 0.1f, 201);
    check_config(DSK_BF16, DSK_BF16, DSK_BF16, h, 0.1f, 202);
    check_config(DSK_F16, DSK_F16, DSK_F16, h, 0.1f, 203);
}

TEST(KernelAdam, NoBiasCorrectionNoWeightDecay) {
    const dsk_adam_hparams h = make_hparams(true, 0.0f, false, 1, 1.0f);
    check_config(DSK_F32, DSK_F32, kNoW, h, 0.1f, 301);
    check_config(DSK_F16, DSK_F32, DSK_F16, h, 0.1f, 302);
}

TEST(KernelAdam, GradScaleUnscalesOnLoad) {
    // Gradients stored 1024x too large; grad_scale = 1/1024 brings them back.
    const dsk_adam_hparams h = make_hparams(true, 0.01f, true, 2, 1.0f / 1024.0f);
    check_config(DSK_F32, DSK_F32, kNoW, h, 100.0f, 401);
    check_config(DSK_F16, DSK_F32, DSK_BF16, h, 100.0f, 402);
    check_config(DSK_BF16, DSK_F32, kNoW, h, 100.0f, 403);
}

TEST(KernelAdam, NegativeWeightDecayIsIgnored) {
    Rng rng(500);
    const size_t n = 1000;
    const AdamState init = make_state(rng, n, DSK_F32, DSK_F32, kNoW, 0.1f);
    for (bool adamw : {true, false}) {
        AdamState a = init, b = init;
        run_adam(a, kNoW, make_hparams(adamw, -0.1f, true, 3, 1.0f), false);
        run_adam(b, kNoW, make_hparams(adamw, 0.0f, true, 3, 1.0f), false);
        EXPECT_TRUE(a.p.same_bits(b.p)) << "adamw=" << adamw;
    }
}

TEST(KernelAdam, FiveStepsStayBitwiseEqualEveryIsa) {
    Rng rng(600);
    for (size_t n : {size_t{33}, size_t{200003}}) {
        const AdamState init = make_state(rng, n, DSK_BF16, DSK_F32, DSK_BF16, 0.1f);
        AdamState ref = init;
        for (int t = 1; t <= 5; ++t) run_adam(ref, DSK_BF16, make_hparams(true, 0.01f, true, t, 1.0f), true);
        for (int isa : isas()) {
            IsaGuard guard(isa);
            AdamState out = init;
            for (int t = 1; t <= 5; ++t)
                run_adam(out, DSK_BF16, make_hparams(true, 0.01f, true, t, 1.0f), false);
            EXPECT_TRUE(out.p.same_bits(ref.p)) << trace(isa, n);
            EXPECT_TRUE(out.m.same_bits(ref.m)) << trace(isa, n);
            EXPECT_TRUE(out.v.same_bits(ref.v)) << trace(isa, n);
            EXPECT_TRUE(out.w.same_bits(ref.w)) << trace(isa, n);
        }
    }
}

TEST(KernelAdam, FirstStepFromZeroStateIsSignedLr) {
    // t = 1, m = v = 0, no weight decay, eps negligible: p moves by -lr*sign(g).
    const size_t n = 37;
    std::vector<float> p(n, 0.5f), g(n), m(n, 0.0f), v(n, 0.0f);
    for (size_t i = 0; i < n; ++i) g[i] = (i % 2 ? 1.0f : -1.0f) * (0.01f + 0.001f * i);
    const dsk_adam_hparams h = make_hparams(true, 0.0f, true, 1, 1.0f);
    dskt::kern().adam_step(p.data(), g.data(), DSK_F32, m.data(), v.data(), DSK_F32, nullptr, DSK_F16, n, &h);
    for (size_t i = 0; i < n; ++i)
        EXPECT_NEAR(p[i], 0.5 - 1e-3 * (i % 2 ? 1 : -1), 1e-7) << i;  // float ulp at 0.5 is 6e-8
}

TEST(KernelAdam, RejectsBadArguments) {
    float p = 0, g = 0, m = 0, v = 0;
    uint16_t w = 0;
    const dsk_adam_hparams h = make_hparams(true, 0.0f, true, 1, 1.0f);
    try {
        dskt::kern().adam_step(&p, &g, DSK_F32, &m, &v, 9, nullptr, DSK_F16, 1, &h);
        FAIL() << "expected ds::Error";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(e.what()).find("state_dtype"), std::string::npos) << e.what();
    }
    EXPECT_THROW(dskt::kern().adam_step(&p, &g, DSK_F32, &m, &v, DSK_F32, &w, DSK_F32, 1, &h), ds::Error);
    EXPECT_THROW(dskt::kern().adam_step(&p, &g, DSK_F32, &m, &v, DSK_F32, nullptr, DSK_F16, 1, nullptr), ds::Error);
    EXPECT_THROW(dskt::kern().adam_step(&p, nullptr, DSK_F32, &m, &v, DSK_F32, nullptr, DSK_F16, 1, &h), ds::Error);
}
