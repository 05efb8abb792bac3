// dsk_sgd_step (torch.optim.SGD semantics) on every ISA and length: bitwise
// equal to dsk_ref_sgd_step (same fp32 operations and FMA placement, see
// test_kernels_adam.cpp), and the reference within 1e-6 relative of a float64
// evaluation; momentum / dampening / nesterov / first step / weight decay.
#include "core/error.h"
#include "test_kernels_common.h"

using namespace dskt;

namespace {

constexpr int kNoW = -1;

dsk_sgd_hparams make_hparams(float momentum, float dampening, float wd, bool nesterov, bool first, float gs) {
    dsk_sgd_hparams h{};
    h.lr = 0.05f;
    h.momentum = momentum;
    h.dampening = dampening;
    h.weight_decay = wd;
    h.grad_scale = gs;
    h.nesterov = nesterov ? 1 : 0;
    h.first_step = first ? 1 : 0;
    return h;
}

struct SgdState {
    Buf p, g, buf, w;
    SgdState(size_t n, int gd, int wd)
        : p(DSK_F32, n), g(gd, n), buf(DSK_F32, n), w(wd == kNoW ? DSK_F16 : wd, n) {}
};

void run_sgd(SgdState& s, int wd, const dsk_sgd_hparams& h, bool ref) {
    float* buf = h.momentum != 0 ? s.buf.f32() : nullptr;
    void* w = wd == kNoW ? nullptr : s.w.data();
    const int wdt = wd == kNoW ? DSK_F16 : wd;
    if (ref)
        dsk_ref_sgd_step(s.p.f32(), s.g.data(), s.g.dtype, buf, w, wdt, s.p.n, &h);
    else
        dskt::kern().sgd_step(s.p.f32(), s.g.data(), s.g.dtype, buf, w, wdt, s.p.n, &h);
}

void check_against_float64(const SgdState& in, const SgdState& out, int wd, const dsk_sgd_hparams& h) {
    for (size_t i = 0; i < in.p.n; ++i) {
        const double p0 = in.p.get(i);
        double g = static_cast<double>(in.g.get(i)) * h.grad_scale;
        if (h.weight_decay != 0) g += static_cast<double>(h.weight_decay) * p0;
        double g_mag = std::fabs(g);
        if (h.momentum != 0) {
            const double mu = h.momentum;
            const double b =
                h.first_step ? g : mu * in.buf.get(i) + (1 - static_cast<double>(h.dampening)) * g;
            const double b_mag = h.first_step ? g_mag : std::fabs(mu * in.buf.get(i)) + std::fabs(g);
            ASSERT_NEAR(out.buf.get(i), b, 1e-6 * b_mag) << "buf, i=" << i;
            g = h.nesterov ? g + mu * b : b;
            g_mag = h.nesterov ? g_mag + mu * b_mag : b_mag;
        }
        const double p = p0 - static_cast<double>(h.lr) * g;
        ASSERT_NEAR(out.p.get(i), p, 1e-6 * std::max({std::fabs(p), std::fabs(p0), h.lr * g_mag}))
            << "p, i=" << i;
        if (wd != kNoW) {
            const uint16_t want = wd == DSK_F16 ? oracle_f16(out.p.get(i)) : oracle_bf16(out.p.get(i));
            ASSERT_EQ(reinterpret_cast<const uint16_t*>(out.w.data())[i], want) << "w16, i=" << i;
        }
    }
}

void check_config(int gd, int wd, const dsk_sgd_hparams& h, uint64_t seed,
                  const std::vector<size_t>& ns = lengths()) {
    Rng rng(seed);
    for (size_t n : ns) {
        SgdState init(n, gd, wd);
        init.p.set_from(rng.uniform_vec(n, -1.0f, 1.0f));
        init.g.set_from(rng.uniform_vec(n, -1.0f, 1.0f));
        if (h.first_step)
            init.buf.set_from(std::vector<float>(n, NAN));  // must not be read
        else
            init.buf.set_from(rng.uniform_vec(n, -0.5f, 0.5f));
        SgdState ref = init;
        run_sgd(ref, wd, h, true);
        {
            SCOPED_TRACE("reference vs float64, n=" + std::to_string(n));
            check_against_float64(init, ref, wd, h);
        }
        for (int isa : isas()) {
            SCOPED_TRACE(trace(isa, n) + " g=" + dtype_name(gd));
            IsaGuard guard(isa);
            SgdState out = init;
            run_sgd(out, wd, h, false);
            ASSERT_TRUE(out.p.same_bits(ref.p));
            ASSERT_TRUE(out.buf.same_bits(ref.buf));
            ASSERT_TRUE(out.w.same_bits(ref.w));
        }
    }
}

}  // namespace

TEST(KernelSgd, LargeAlignedW16StreamingStores) {
    const std::vector<size_t> ns = {(size_t{1} << 20) + 37};
    check_config(DSK_F32, DSK_F16, make_hparams(0.9f, 0.0f, 1e-4f, true, false, 1), 8, ns);
    check_config(DSK_BF16, DSK_BF16, make_hparams(0.0f, 0.0f, 0.0f, false, false, 1), 9, ns);
}

TEST(KernelSgd, PlainNoMomentumNullBuffer) {
    check_config(DSK_F32, kNoW, make_hparams(0, 0, 0, false, false, 1), 1);
}

TEST(KernelSgd, MomentumDampeningWeightDecay) {
    check_config(DSK_F32, kNoW, make_hparams(0.9f, 0.1f, 1e-4f, false, false, 1), 2);
    check_config(DSK_BF16, DSK_BF16, make_hparams(0.9f, 0.1f, 1e-4f, false, false, 1), 3);
}

TEST(KernelSgd, FirstStepInitialisesBufferToGradient) {
    check_config(DSK_F32, kNoW, make_hparams(0.9f, 0.5f, 0.01f, false, true, 1), 4);
    check_config(DSK_F16, DSK_F16, make_hparams(0.9f, 0.0f, 0.0f, true, true, 1), 5);
}

TEST(KernelSgd, Nesterov) {
    check_config(DSK_F32, DSK_BF16, make_hparams(0.8f, 0.0f, 0.001f, true, false, 1), 6);
}

TEST(KernelSgd, GradScaleAndFp16Grads) {
    check_config(DSK_F16, DSK_BF16, make_hparams(0.9f, 0.0f, 0.0f, false, false, 0.5f), 7);
}

TEST(KernelSgd, RejectsNullBufferWithMomentum) {
    float p = 0, g = 0;
    EXPECT_THROW(dskt::kern().sgd_step(&p, &g, DSK_F32, nullptr, nullptr, DSK_F16, 1, nullptr), ds::Error);
    const dsk_sgd_hparams h = make_hparams(0.9f, 0, 0, false, false, 1);
    EXPECT_THROW(dskt::kern().sgd_step(&p, &g, DSK_F32, nullptr, nullptr, DSK_F16, 1, &h), ds::Error);
}
