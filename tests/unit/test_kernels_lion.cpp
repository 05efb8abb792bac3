// dsk_lion_step (DEEPSPEED_SEMANTICS.md §2.5) on every ISA and length: bitwise equal to
// dsk_ref_lion_step (same fp32 operations and FMA placement), the reference
// within 1e-6 relative of a float64 evaluation; sign(0) = 0; NaN propagates.
#include "core/error.h"
#include "test_kernels_common.h"

using namespace dskt;

namespace {

constexpr int kNoW = -1;

dsk_lion_hparams make_hparams(float wd, float gs) {
    dsk_lion_hparams h{};
    h.lr = 1e-4f;
    h.beta1 = 0.9f;
    h.beta2 = 0.99f;
    h.weight_decay = wd;
    h.grad_scale = gs;
    return h;
}

struct LionState {
    Buf p, g, m, w;
    LionState(size_t n, int gd, int wd)
        : p(DSK_F32, n), g(gd, n), m(DSK_F32, n), w(wd == kNoW ? DSK_F16 : wd, n) {}
};

void run_lion(LionState& s, int wd, const dsk_lion_hparams& h, bool ref) {
    void* w = wd == kNoW ? nullptr : s.w.data();
    const int wdt = wd == kNoW ? DSK_F16 : wd;
    if (ref)
        dsk_ref_lion_step(s.p.f32(), s.g.data(), s.g.dtype, s.m.f32(), w, wdt, s.p.n, &h);
    else
        dskt::kern().lion_step(s.p.f32(), s.g.data(), s.g.dtype, s.m.f32(), w, wdt, s.p.n, &h);
}

void check_against_float64(const LionState& in, const LionState& out, int wd, const dsk_lion_hparams& h) {
    const double b1 = h.beta1, b2 = h.beta2, lr = h.lr;
    for (size_t i = 0; i < in.p.n; ++i) {
        const double g = static_cast<double>(in.g.get(i)) * h.grad_scale, m0 = in.m.get(i), p0 = in.p.get(i);
        const double c = b1 * m0 + (1 - b1) * g;
        const double c_mag = std::fabs(b1 * m0) + std::fabs((1 - b1) * g);
        const double m = b2 * m0 + (1 - b2) * g;
        ASSERT_NEAR(out.m.get(i), m, 1e-6 * (std::fabs(b2 * m0) + std::fabs((1 - b2) * g))) << "m, i=" << i;
        double p = p0;
        if (h.weight_decay > 0) p *= 1 - lr * h.weight_decay;
        const double s = c > 0 ? 1 : c < 0 ? -1 : 0;
        // Skip p where fp32 rounding could flip the sign of a cancelling c.
        if (c != 0 && std::fabs(c) < 1e-6 * c_mag) continue;
        p -= lr * s;
        ASSERT_NEAR(out.p.get(i), p, 1e-6 * std::max({std::fabs(p), std::fabs(p0), lr})) << "p, i=" << i;
        if (wd != kNoW) {
            const uint16_t want = wd == DSK_F16 ? oracle_f16(out.p.get(i)) : oracle_bf16(out.p.get(i));
            ASSERT_EQ(reinterpret_cast<const uint16_t*>(out.w.data())[i], want) << "w16, i=" << i;
        }
    }
}

void check_config(int gd, int wd, const dsk_lion_hparams& h, uint64_t seed,
                  const std::vector<size_t>& ns = lengths()) {
    Rng rng(seed);
    for (size_t n : ns) {
        LionState init(n, gd, wd);
        init.p.set_from(rng.uniform_vec(n, -1.0f, 1.0f));
        std::vector<float> g = rng.uniform_vec(n, -1.0f, 1.0f), m = rng.uniform_vec(n, -0.1f, 0.1f);
        for (size_t i = 0; i < n; i += 9) g[i] = m[i] = 0.0f;  // interpolant exactly 0: sign(0) = 0
        init.g.set_from(g);
        init.m.set_from(m);
        LionState ref = init;
        run_lion(ref, wd, h, true);
        {
            SCOPED_TRACE("reference vs float64, n=" + std::to_string(n));
            check_against_float64(init, ref, wd, h);
        }
        for (int isa : isas()) {
            SCOPED_TRACE(trace(isa, n) + " g=" + dtype_name(gd));
            IsaGuard guard(isa);
            LionState out = init;
            run_lion(out, wd, h, false);
            ASSERT_TRUE(out.p.same_bits(ref.p));
            ASSERT_TRUE(out.m.same_bits(ref.m));
            ASSERT_TRUE(out.w.same_bits(ref.w));
        }
    }
}

}  // namespace

TEST(KernelLion, LargeAlignedW16StreamingStores) {
    const std::vector<size_t> ns = {(size_t{1} << 20) + 37};
    check_config(DSK_F32, DSK_BF16, make_hparams(0.1f, 1.0f), 4, ns);
    check_config(DSK_F16, DSK_F16, make_hparams(0.0f, 1.0f), 5, ns);
}

TEST(KernelLion, NoWeightDecayFp32) { check_config(DSK_F32, kNoW, make_hparams(0.0f, 1.0f), 1); }

TEST(KernelLion, WeightDecayBf16GradsFp16Copy) {
    check_config(DSK_BF16, DSK_F16, make_hparams(0.1f, 1.0f), 2);
}

TEST(KernelLion, GradScaleFp16GradsBf16Copy) {
    check_config(DSK_F16, DSK_BF16, make_hparams(0.01f, 0.25f), 3);
}

TEST(KernelLion, SignOfZeroLeavesWeightUnchanged) {
    for (size_t n : lengths()) {
        std::vector<float> p(n), g(n, 0.0f), m(n, 0.0f);
        for (size_t i = 0; i < n; ++i) {
            p[i] = 0.25f + static_cast<float>(i % 13);
            if (i % 2) g[i] = -0.0f;  // -0 counts as 0 too
        }
        for (int isa : isas()) {
            IsaGuard guard(isa);
            std::vector<float> q = p, mm = m;
            const dsk_lion_hparams h = make_hparams(0.0f, 1.0f);
            dskt::kern().lion_step(q.data(), g.data(), DSK_F32, mm.data(), nullptr, DSK_F16, n, &h);
            for (size_t i = 0; i < n; ++i) ASSERT_EQ(q[i], p[i]) << trace(isa, n) << " i=" << i;
        }
    }
}

TEST(KernelLion, NanGradientPropagatesToWeight) {
    const size_t n = 40;
    for (int isa : isas()) {
        IsaGuard guard(isa);
        std::vector<float> p(n, 1.0f), g(n, 0.5f), m(n, 0.0f);
        g[3] = NAN;
        g[n - 1] = NAN;  // scalar tail on the SIMD paths
        const dsk_lion_hparams h = make_hparams(0.0f, 1.0f);
        dskt::kern().lion_step(p.data(), g.data(), DSK_F32, m.data(), nullptr, DSK_F16, n, &h);
        EXPECT_TRUE(std::isnan(p[3]) && std::isnan(p[n - 1])) << dsk_isa_name(isa);
        EXPECT_FLOAT_EQ(p[0], 1.0f - 1e-4f) << dsk_isa_name(isa);
    }
}

TEST(KernelLion, RejectsBadArguments) {
    float p = 0, g = 0, m = 0;
    const dsk_lion_hparams h = make_hparams(0.0f, 1.0f);
    EXPECT_THROW(dskt::kern().lion_step(&p, &g, 4, &m, nullptr, DSK_F16, 1, &h), ds::Error);
    EXPECT_THROW(dskt::kern().lion_step(&p, &g, DSK_F32, &m, &p, DSK_F32, 1, &h), ds::Error);
}
