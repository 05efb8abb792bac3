// The CUDA optimizers on the device against kernels/ref: multi-tensor
// Adam/AdamW, SGD and Lion bit for bit (the device runs the CPU kernels'
// per-element bodies; fmaf, sqrtf and division are correctly rounded without
// fast-math), over 40 tensors (two launches' worth of slots), one tensor of
// 330 chunks (two launches' worth of blocks), every g/state/w16 dtype, with
// NaN/Inf/zero gradients; LAMB with m, v bitwise and the trust ratio within
// 1 ulp (its norms are double sums in another order), p within 1e-6.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include "gpu_test_util.h"
#include "kernels.h"

using gput::DevBuf;

namespace {

size_t esize(int dt) { return dt == DSK_F32 ? 4 : 2; }

// A host tensor of n elements of a dtype, filled from floats.
struct HostBuf {
    int dtype;
    size_t n;
    std::vector<uint8_t> b;
    HostBuf(int dt, size_t count) : dtype(dt), n(count), b(count * esize(dt)) {}
    void fill(const std::vector<float>& v) {
        for (size_t i = 0; i < n; ++i) {
            gput::ref_store(b.data(), dtype, i, v[i]);
        }
    }
    void* data() { return b.data(); }
    size_t bytes() const { return b.size(); }
};

std::vector<float> randv(std::mt19937& r, size_t n, float lo, float hi, bool edges) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = u(r);
        if (edges && i % 13 == 1) v[i] = 0.0f;
        if (edges && i % 97 == 2) v[i] = NAN;
        if (edges && i % 101 == 3) v[i] = -INFINITY;
    }
    return v;
}

struct Tensors {
    std::vector<HostBuf> p, g, s1, s2, w;
};

Tensors make(std::mt19937& r, const std::vector<size_t>& lens, int gd, int sd, int wd) {
    Tensors t;
    for (size_t n : lens) {
        t.p.emplace_back(DSK_F32, n);
        t.p.back().fill(randv(r, n, -1, 1, false));
        t.g.emplace_back(gd, n);
        t.g.back().fill(randv(r, n, -2, 2, true));
        t.s1.emplace_back(sd, n);
        t.s1.back().fill(randv(r, n, -1e-2f, 1e-2f, false));
        t.s2.emplace_back(sd, n);
        t.s2.back().fill(randv(r, n, 0, 1e-3f, false));
        t.w.emplace_back(wd, n);
    }
    return t;
}

// Runs `dev(list)` on device copies of t, `ref(i, tensors)` on the host copy, compares bytes.
template <class Dev, class Ref>
void compare(Tensors host, bool w16, bool s2, const std::string& what, Dev&& dev, Ref&& ref) {
    Tensors out = host;
    std::vector<DevBuf> keep;
    std::vector<dsk_opt_tensor> list;
    keep.reserve(5 * host.p.size());
    for (size_t i = 0; i < host.p.size(); ++i) {
        keep.emplace_back(host.p[i].data(), host.p[i].bytes());
        keep.emplace_back(host.g[i].data(), host.g[i].bytes());
        keep.emplace_back(host.s1[i].data(), host.s1[i].bytes());
        keep.emplace_back(host.s2[i].data(), host.s2[i].bytes());
        keep.emplace_back(host.w[i].data(), host.w[i].bytes());
        DevBuf* k = &keep[keep.size() - 5];
        list.push_back({k[0].as<float>(), k[1].d, k[2].d, s2 ? k[3].d : nullptr, w16 ? k[4].d : nullptr,
                        host.p[i].n});
    }
    GPU_OK(dev(list));
    for (size_t i = 0; i < host.p.size(); ++i) {
        DevBuf* k = &keep[5 * i];
        k[0].download(out.p[i].data());
        k[2].download(out.s1[i].data());
        k[3].download(out.s2[i].data());
        k[4].download(out.w[i].data());
        ref(i, host);
        GPU_CHECK(out.p[i].b == host.p[i].b, "%s tensor %zu: p differs from the reference", what.c_str(), i);
        GPU_CHECK(out.s1[i].b == host.s1[i].b, "%s tensor %zu: state1 differs", what.c_str(), i);
        GPU_CHECK(out.s2[i].b == host.s2[i].b, "%s tensor %zu: state2 differs", what.c_str(), i);
        if (w16) GPU_CHECK(out.w[i].b == host.w[i].b, "%s tensor %zu: w16 differs", what.c_str(), i);
    }
}

std::vector<size_t> list_lengths() {
    std::vector<size_t> lens;
    for (int i = 0; i < 40; ++i) lens.push_back(i == 3 ? 0 : 1 + 1237 * static_cast<size_t>(i));
    lens.push_back(65536 * 3 + 1);
    return lens;
}

void test_adam() {
    const int dts[] = {DSK_F32, DSK_F16, DSK_BF16};
    std::mt19937 r(1);
    for (int gd : dts)
        for (int sd : dts)
            for (int wsel = 0; wsel < 3; ++wsel)
                for (int step : {1, 1000}) {
                    const int wd = wsel == 2 ? DSK_BF16 : DSK_F16;
                    const bool w16 = wsel > 0;
                    dsk_adam_hparams h{};
                    h.lr = 1e-3f;
                    h.beta1 = 0.9f;
                    h.beta2 = 0.999f;
                    h.eps = 1e-8f;
                    h.weight_decay = 0.01f;
                    h.bias_correction1 = 1.0f - static_cast<float>(std::pow(0.9, step));
                    h.bias_correction2_rsqrt = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(0.999, step)));
                    h.grad_scale = 0.5f;
                    h.adamw_mode = step == 1000;
                    const std::string what = "adam g" + std::to_string(gd) + " s" + std::to_string(sd) + " w" +
                                             std::to_string(w16 ? wd : -1) + " step " + std::to_string(step);
                    compare(make(r, list_lengths(), gd, sd, wd), w16, true, what,
                            [&](const std::vector<dsk_opt_tensor>& l) {
                                return dsk_cuda_adam_multi(l.data(), l.size(), gd, sd, wd, &h, nullptr);
                            },
                            [&](size_t i, Tensors& t) {
                                dsk_ref_adam_step(static_cast<float*>(t.p[i].data()), t.g[i].data(), gd,
                                                  t.s1[i].data(), t.s2[i].data(), sd,
                                                  w16 ? t.w[i].data() : nullptr, wd, t.p[i].n, &h);
                            });
                }
    // One tensor of 330 chunks: more blocks than one launch holds.
    dsk_adam_hparams h{1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0.1f, 31.6f, 1.0f, 1};
    compare(make(r, {330 * 65536 + 7}, DSK_BF16, DSK_F32, DSK_BF16), true, true, "adam 330 chunks",
            [&](const std::vector<dsk_opt_tensor>& l) {
                return dsk_cuda_adam_multi(l.data(), l.size(), DSK_BF16, DSK_F32, DSK_BF16, &h, nullptr);
            },
            [&](size_t i, Tensors& t) {
                dsk_ref_adam_step(static_cast<float*>(t.p[i].data()), t.g[i].data(), DSK_BF16, t.s1[i].data(),
                                  t.s2[i].data(), DSK_F32, t.w[i].data(), DSK_BF16, t.p[i].n, &h);
            });
}

void test_sgd_lion() {
    std::mt19937 r(2);
    for (int gd : {DSK_F32, DSK_F16, DSK_BF16})
        for (int variant = 0; variant < 4; ++variant) {
            dsk_sgd_hparams h{};
            h.lr = 0.1f;
            h.momentum = variant == 0 ? 0.0f : 0.9f;
            h.dampening = variant == 3 ? 0.1f : 0.0f;
            h.weight_decay = 1e-4f;
            h.grad_scale = 0.25f;
            h.nesterov = variant == 2;
            h.first_step = variant == 1;
            compare(make(r, list_lengths(), gd, DSK_F32, DSK_F16), true, false, "sgd variant " + std::to_string(variant),
                    [&](const std::vector<dsk_opt_tensor>& l) {
                        return dsk_cuda_sgd_multi(l.data(), l.size(), gd, DSK_F16, &h, nullptr);
                    },
                    [&](size_t i, Tensors& t) {
                        dsk_ref_sgd_step(static_cast<float*>(t.p[i].data()), t.g[i].data(), gd,
                                         static_cast<float*>(t.s1[i].data()), t.w[i].data(), DSK_F16, t.p[i].n, &h);
                    });
        }
    dsk_lion_hparams h{1e-4f, 0.9f, 0.99f, 0.1f, 1.0f};
    for (int gd : {DSK_F32, DSK_BF16})
        compare(make(r, list_lengths(), gd, DSK_F32, DSK_BF16), true, false, "lion",
                [&](const std::vector<dsk_opt_tensor>& l) {
                    return dsk_cuda_lion_multi(l.data(), l.size(), gd, DSK_BF16, &h, nullptr);
                },
                [&](size_t i, Tensors& t) {
                    dsk_ref_lion_step(static_cast<float*>(t.p[i].data()), t.g[i].data(), gd,
                                      static_cast<float*>(t.s1[i].data()), t.w[i].data(), DSK_BF16, t.p[i].n, &h);
                });
}

uint32_t fbits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

void test_lamb() {
    std::mt19937 r(3);
    for (size_t n : {size_t{1}, size_t{4099}, size_t{3000001}}) {
        dsk_lamb_hparams h{1e-3f, 0.9f, 0.999f, 1e-6f, 0.01f, 0.1f, 0.001f, 1.0f, 10.0f, 0.01f, 0};
        Tensors t = make(r, {n}, DSK_F16, DSK_F32, DSK_BF16);
        // finite gradients: the trust ratio is the point here
        t.g[0].fill(randv(r, n, -1, 1, false));
        DevBuf p(t.p[0].data(), t.p[0].bytes()), g(t.g[0].data(), t.g[0].bytes()), m(t.s1[0].data(), t.s1[0].bytes()),
            v(t.s2[0].data(), t.s2[0].bytes()), w(t.w[0].data(), t.w[0].bytes());
        float trust = -1.0f;
        GPU_OK(dsk_cuda_lamb_step(p.as<float>(), g.d, DSK_F16, m.as<float>(), v.as<float>(), w.d, DSK_BF16, n, &h,
                                  &trust, nullptr));
        Tensors out = t;
        p.download(out.p[0].data());
        m.download(out.s1[0].data());
        v.download(out.s2[0].data());
        const float ref_trust =
            dsk_ref_lamb_step(static_cast<float*>(t.p[0].data()), t.g[0].data(), DSK_F16,
                              static_cast<float*>(t.s1[0].data()), static_cast<float*>(t.s2[0].data()),
                              t.w[0].data(), DSK_BF16, n, &h);
        const int64_t d = static_cast<int64_t>(fbits(trust)) - static_cast<int64_t>(fbits(ref_trust));
        GPU_CHECK(d >= -1 && d <= 1, "lamb n=%zu: trust %.9g vs reference %.9g", n, trust, ref_trust);
        GPU_CHECK(out.s1[0].b == t.s1[0].b && out.s2[0].b == t.s2[0].b, "lamb n=%zu: m/v differ", n);
        const float* a = static_cast<const float*>(out.p[0].data());
        const float* b = static_cast<const float*>(t.p[0].data());
        size_t bad = 0;
        for (size_t i = 0; i < n; ++i) bad += std::fabs(a[i] - b[i]) > 1e-6f * (1.0f + std::fabs(b[i]));
        GPU_CHECK(bad == 0, "lamb n=%zu: %zu elements of p off by more than 1e-6", n, bad);
    }
}

}  // namespace

int main() {
    if (const int rc = gput::require_device()) return rc;
    test_adam();
    test_sgd_lion();
    test_lamb();
    return gput::finish("gpu optimizers");
}
