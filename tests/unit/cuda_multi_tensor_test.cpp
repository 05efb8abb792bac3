// The CUDA multi-tensor optimizers without a GPU: the launch planner
// (kernels/elem/multi_tensor.h) and the very functions the CUDA kernel runs
// per block (mt_step_block with the Adam/SGD/Lion makers of
// kernels/elem/optim_mt.h), executed here by a host "launcher" for every
// (block, thread). Only the <<<>>> launch and the memory movement are left
// to tests/gpu.
//  * the plan covers every element of every tensor exactly once, in chunks
//    of kMtChunkElems, within the slot and block limits, with a tensor
//    continued across launches (it is checked on lengths up to 330 chunks,
//    with no memory behind the pointers);
//  * the host-launched steps equal dsk_ref_*_step bit for bit (the same fp32
//    operations in the same order) over 40 tensors (more than one launch's
//    32 slots), every dtype combination, NaN/Inf/zero gradients, a w16 copy
//    that overflows fp16, bias correction at steps 1 and 1000.
#include <map>
#include <set>

#include "elem/optim_mt.h"
#include "elem/step_consts.h"
#include "test_kernels_common.h"

using namespace dskt;
using ds::kernels::kMtChunkElems;
using ds::kernels::kMtMaxBlocks;
using ds::kernels::kMtMaxTensors;
using ds::kernels::MtLaunch;

namespace {

// The host launcher: what the CUDA grid would do, one (block, thread) at a time.
struct HostLaunch {
    int* launches;
    template <class Make>
    int operator()(const MtLaunch& l, const Make& make) const {
        ++*launches;
        for (int b = 0; b < l.blocks; ++b)
            for (int t = 0; t < ds::kernels::kMtThreads; ++t)
                ds::kernels::mt_step_block(l, b, t, ds::kernels::kMtThreads, make);
        return 0;
    }
};

// Fake, distinct pointers: tensor t's pointer d is (t+1)*16 + d (never dereferenced).
void* fake_ptr(size_t t, int d) { return reinterpret_cast<void*>((t + 1) * 16 + static_cast<size_t>(d)); }

TEST(CudaMultiTensorPlan, CoversEveryElementOnceWithinLimits) {
    const size_t C = kMtChunkElems;
    std::vector<size_t> lens = {0, 1, C - 1, C, C + 1, 3 * C + 5, 0, 7};
    for (int i = 0; i < 40; ++i) lens.push_back(1000 + 37 * static_cast<size_t>(i));  // > kMtMaxTensors
    lens.push_back(330 * C + 3);                                                       // > kMtMaxBlocks chunks
    lens.push_back(2 * C);
    // covered[t] = the chunk starts seen for tensor t, in order.
    std::map<size_t, std::vector<size_t>> covered;
    int launches = 0;
    const int rc = ds::kernels::mt_plan(
        lens.size(), fake_ptr, [&](size_t t) { return lens[t]; },
        [&](const MtLaunch& l) {
            ++launches;
            EXPECT_GE(l.blocks, 1);
            EXPECT_LE(l.blocks, kMtMaxBlocks);
            EXPECT_GE(l.tensors, 1);
            EXPECT_LE(l.tensors, kMtMaxTensors);
            std::set<int> used_slots;
            for (int b = 0; b < l.blocks; ++b) {
                int slot;
                size_t lo, hi;
                ds::kernels::mt_block_range(l, b, &slot, &lo, &hi);
                EXPECT_LT(slot, l.tensors);
                used_slots.insert(slot);
                const size_t t = reinterpret_cast<size_t>(l.ptr[0][slot]) / 16 - 1;  // undo fake_ptr
                for (int d = 0; d < ds::kernels::kMtDepth; ++d) EXPECT_EQ(l.ptr[d][slot], fake_ptr(t, d));
                EXPECT_EQ(static_cast<size_t>(l.n[slot]), lens[t]);
                EXPECT_EQ(lo % C, 0u);
                EXPECT_LT(lo, hi);
                EXPECT_EQ(hi, std::min(lo + C, lens[t]));
                covered[t].push_back(lo);
            }
            EXPECT_EQ(static_cast<int>(used_slots.size()), l.tensors) << "a slot with no block";
            return 0;
        });
    EXPECT_EQ(rc, 0);
    for (size_t t = 0; t < lens.size(); ++t) {
        const size_t chunks = (lens[t] + C - 1) / C;
        ASSERT_EQ(covered[t].size(), chunks) << "tensor " << t << " n=" << lens[t];
        for (size_t c = 0; c < chunks; ++c) EXPECT_EQ(covered[t][c], c * C) << "tensor " << t;
    }
    // 330 chunks need 2 launches of blocks by themselves; 40+ tensors need 2 of slots.
    EXPECT_GE(launches, 3);
}

TEST(CudaMultiTensorPlan, StopsAtTheFirstFailedLaunch) {
    int calls = 0;
    const int rc = ds::kernels::mt_plan(
        100, fake_ptr, [](size_t) { return size_t{10}; },
        [&](const MtLaunch&) { return ++calls == 2 ? 7 : 0; });
    EXPECT_EQ(rc, 7);
    EXPECT_EQ(calls, 2);
}

// One optimizer state per tensor, filled with edge cases.
struct TensorState {
    Buf p, g, s1, s2, w;
    TensorState(size_t n, int gd, int sd, int wd) : p(DSK_F32, n), g(gd, n), s1(sd, n), s2(sd, n), w(wd, n) {}
};

std::vector<TensorState> make_tensors(Rng& rng, int gd, int sd, int wd, float g_mag) {
    std::vector<TensorState> ts;
    for (int i = 0; i < 40; ++i) {
        const size_t n = i == 5 ? 0 : i == 7 ? kMtChunkElems + 3 : 1 + 97 * static_cast<size_t>(i);
        ts.emplace_back(n, gd, sd, wd);
        TensorState& s = ts.back();
        std::vector<float> p = rng.uniform_vec(n, -1.0f, 1.0f), g = rng.uniform_vec(n, -g_mag, g_mag);
        std::vector<float> m = rng.uniform_vec(n, -1e-2f, 1e-2f), v = rng.uniform_vec(n, 0.0f, 1e-3f);
        for (size_t j = 0; j < n; ++j) {
            switch (j % 11) {
                case 1: g[j] = 0.0f; break;                            // zero gradient
                case 2: g[j] = NAN; break;                             // NaN propagates
                case 3: g[j] = (j & 16) ? INFINITY : -INFINITY; break;  // Inf
                case 4: p[j] = 70000.0f; break;                        // w16 overflows fp16
                case 5: m[j] = v[j] = 0.0f; break;                     // fresh state
                default: break;
            }
        }
        s.p.set_from(p);
        s.g.set_from(g);
        s.s1.set_from(m);
        s.s2.set_from(v);
    }
    return ts;
}

std::vector<dsk_opt_tensor> views(std::vector<TensorState>& ts, bool w16, bool s2) {
    std::vector<dsk_opt_tensor> v;
    for (auto& s : ts)
        v.push_back({s.p.f32(), s.g.data(), s.s1.data(), s2 ? s.s2.data() : nullptr, w16 ? s.w.data() : nullptr,
                     s.p.n});
    return v;
}

void expect_same(const std::vector<TensorState>& a, const std::vector<TensorState>& b, bool w16,
                 const std::string& what) {
    for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_TRUE(a[i].p.same_bits(b[i].p)) << what << " tensor " << i << " p";
        EXPECT_TRUE(a[i].s1.same_bits(b[i].s1)) << what << " tensor " << i << " state1";
        EXPECT_TRUE(a[i].s2.same_bits(b[i].s2)) << what << " tensor " << i << " state2";
        if (w16) EXPECT_TRUE(a[i].w.same_bits(b[i].w)) << what << " tensor " << i << " w16";
        EXPECT_TRUE(a[i].p.guard_intact() && a[i].w.guard_intact()) << what << " tensor " << i << " overrun";
    }
}

dsk_adam_hparams adam_h(bool adamw, float wd, int step) {
    dsk_adam_hparams h{};
    h.lr = 1e-3f;
    h.beta1 = 0.9f;
    h.beta2 = 0.999f;
    h.eps = 1e-8f;
    h.weight_decay = wd;
    h.bias_correction1 = 1.0f - static_cast<float>(std::pow(0.9, step));
    h.bias_correction2_rsqrt = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(0.999, step)));
    h.grad_scale = 0.5f;
    h.adamw_mode = adamw ? 1 : 0;
    return h;
}

TEST(CudaMultiTensorAdam, HostLaunchedBlocksEqualReferenceBitwise) {
    const int dts[] = {DSK_F32, DSK_F16, DSK_BF16};
    for (int gd : dts)
        for (int sd : dts)
            for (int wsel = 0; wsel < 3; ++wsel)
                for (int step : {1, 1000}) {
                    const bool w16 = wsel > 0;
                    const int wd = wsel == 2 ? DSK_BF16 : DSK_F16;
                    const bool adamw = step == 1000;
                    const dsk_adam_hparams h = adam_h(adamw, 0.01f, step);
                    Rng rng(1234 + gd * 100 + sd * 10 + wsel);
                    std::vector<TensorState> dev = make_tensors(rng, gd, sd, wd, 2.0f), ref = dev;
                    const auto tv = views(dev, w16, true);
                    int launches = 0;
                    const int rc = ds::kernels::adam_mt(tv.data(), tv.size(), gd, sd, wd,
                                                        ds::kernels::adam_consts(h), HostLaunch{&launches});
                    ASSERT_EQ(rc, 0);
                    EXPECT_EQ(launches, 2);  // 39 non-empty tensors > 32 slots
                    for (auto& s : ref)
                        dsk_ref_adam_step(s.p.f32(), s.g.data(), gd, s.s1.data(), s.s2.data(), sd,
                                          w16 ? s.w.data() : nullptr, wd, s.p.n, &h);
                    expect_same(dev, ref, w16,
                                std::string("adam g=") + dtype_name(gd) + " state=" + dtype_name(sd) +
                                    " w16=" + (w16 ? dtype_name(wd) : "none") + " step=" + std::to_string(step));
                }
}

TEST(CudaMultiTensorSgd, HostLaunchedBlocksEqualReferenceBitwise) {
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
            Rng rng(77 + variant);
            std::vector<TensorState> dev = make_tensors(rng, gd, DSK_F32, DSK_BF16, 1.0f), ref = dev;
            const auto tv = views(dev, true, false);
            int launches = 0;
            ASSERT_EQ(ds::kernels::sgd_mt(tv.data(), tv.size(), gd, DSK_BF16, ds::kernels::sgd_consts(h),
                                          HostLaunch{&launches}),
                      0);
            for (auto& s : ref)
                dsk_ref_sgd_step(s.p.f32(), s.g.data(), gd, s.s1.f32(), s.w.data(), DSK_BF16, s.p.n, &h);
            expect_same(dev, ref, true, std::string("sgd g=") + dtype_name(gd) + " variant " + std::to_string(variant));
        }
}

TEST(CudaMultiTensorLion, HostLaunchedBlocksEqualReferenceBitwise) {
    for (int gd : {DSK_F32, DSK_BF16}) {
        dsk_lion_hparams h{};
        h.lr = 1e-4f;
        h.beta1 = 0.9f;
        h.beta2 = 0.99f;
        h.weight_decay = 0.1f;
        h.grad_scale = 1.0f;
        Rng rng(99);
        std::vector<TensorState> dev = make_tensors(rng, gd, DSK_F32, DSK_F16, 1.0f), ref = dev;
        const auto tv = views(dev, false, false);
        int launches = 0;
        ASSERT_EQ(ds::kernels::lion_mt(tv.data(), tv.size(), gd, DSK_F16, ds::kernels::lion_consts(h),
                                       HostLaunch{&launches}),
                  0);
        for (auto& s : ref) dsk_ref_lion_step(s.p.f32(), s.g.data(), gd, s.s1.f32(), nullptr, DSK_F16, s.p.n, &h);
        expect_same(dev, ref, false, std::string("lion g=") + dtype_name(gd));
    }
}

}  // namespace
