// The CUDA attention kernels without a GPU: the steps of
// kernels/cuda/attention_plan.h (the very strides, buffers and order the
// entry points use) with the kernels' per-thread functions
// (kernels/cuda/attention_body.h) run for every (block, thread) by the host
// launcher of cuda_attention_host.h, against the float64 references
// dsk_ref_attention_* and the CPU kernels dsk_cpu_attention_*.
// Tolerance (fp32 products): max |x - y| / (1 + max |y|) < 1e-5 against the
// reference and the CPU kernel (the CPU kernels' own test allows 2e-6 forward
// and 1e-5 backward; 1e-4 backward on saturated softmaxes, as there).
// Shapes: T = 1, T not a multiple of the 16-wide tiles, T > 128 (a row
// block's threads take several columns), hd < 16, = 16 and > 16 (several
// k-steps), several heads and batch elements; causal 0/1, dropout 0 / 0.1
// (stream offset not a multiple of 4), probabilities saved and recomputed.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cuda_attention_host.h"
#include "nn_attention.h"

namespace {

struct Shape {
    int64_t B, T, C, H;
};

// max |x - y| / (1 + max |y|); a NaN anywhere makes it NaN (fails every bound).
template <class Y>
double rel_err(const std::vector<float>& x, const std::vector<Y>& y) {
    double e = 0.0, m = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double d = std::fabs(static_cast<double>(x[i]) - static_cast<double>(y[i]));
        if (!(d <= e)) e = d;
        m = std::max(m, std::fabs(static_cast<double>(y[i])));
    }
    return e / (1.0 + m);
}

dsk_attention_args args_for(const Shape& s, int causal, float p) {
    dsk_attention_args a{};
    a.batch = s.B, a.seq = s.T, a.channels = s.C, a.heads = s.H, a.causal = causal, a.dropout_p = p;
    a.dropout_key.seed = 5, a.dropout_key.stream = 2 + (uint64_t{1} << 32), a.dropout_key.module_id = 3;
    a.dropout_key.offset = 777;
    return a;
}

struct Result {
    std::vector<float> out, probs, dqkv;
};

struct Inputs {
    std::vector<float> qkv, dout;
};

Inputs inputs(const dsk_attention_args& a, float sd, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, sd), nd1(0.0f, 1.0f);
    Inputs in;
    in.qkv.resize(static_cast<size_t>(a.batch * a.seq * 3 * a.channels));
    in.dout.resize(static_cast<size_t>(a.batch * a.seq * a.channels));
    for (auto& x : in.qkv) x = nd(rng);
    for (auto& x : in.dout) x = nd1(rng);
    return in;
}

size_t probs_size(const dsk_attention_args& a) { return static_cast<size_t>(a.batch * a.heads * a.seq * a.seq); }

// The emulated kernels; `saved`: forward saves A and backward uses it, else
// neither gets probs (backward recomputes A).
Result emulate(const dsk_attention_args& a, const Inputs& in, bool saved) {
    Result r;
    r.out.assign(in.dout.size(), NAN);
    r.dqkv.assign(in.qkv.size(), NAN);
    if (saved) r.probs.assign(probs_size(a), NAN);
    float* probs = saved ? r.probs.data() : nullptr;
    attn_host::forward(a, in.qkv.data(), r.out.data(), probs);
    attn_host::backward(a, in.qkv.data(), probs, in.dout.data(), r.dqkv.data());
    return r;
}

Result cpu(const dsk_attention_args& a, const Inputs& in, int kernel) {
    const int before = dsk_cpu_attention_kernel();
    EXPECT_EQ(DSK_OK, dsk_cpu_attention_set_kernel(kernel));
    Result r;
    r.out.assign(in.dout.size(), NAN);
    r.dqkv.assign(in.qkv.size(), NAN);
    r.probs.assign(probs_size(a), NAN);
    EXPECT_EQ(DSK_OK, dsk_cpu_attention_forward(in.qkv.data(), r.out.data(), r.probs.data(), &a)) << dsk_last_error();
    EXPECT_EQ(DSK_OK, dsk_cpu_attention_backward(in.qkv.data(), r.probs.data(), in.dout.data(), r.dqkv.data(), &a))
        << dsk_last_error();
    dsk_cpu_attention_set_kernel(before);
    return r;
}

struct Ref {
    std::vector<double> out, probs, dqkv;
};

Ref reference(const dsk_attention_args& a, const Inputs& in) {
    const std::vector<double> qkv(in.qkv.begin(), in.qkv.end()), dout(in.dout.begin(), in.dout.end());
    Ref r;
    r.out.resize(in.dout.size());
    r.probs.resize(probs_size(a));
    r.dqkv.resize(in.qkv.size());
    dsk_ref_attention_forward(qkv.data(), r.out.data(), r.probs.data(), &a);
    dsk_ref_attention_backward(qkv.data(), dout.data(), r.dqkv.data(), &a);
    return r;
}

const Shape kShapes[] = {{1, 1, 4, 1},   {2, 7, 12, 3},  {2, 17, 32, 2},
                         {3, 33, 24, 4}, {1, 40, 64, 2}, {1, 150, 8, 1}};

}  // namespace

TEST(CudaAttentionHost, MatchesReferenceAndCpuKernels) {
    for (const Shape& s : kShapes)
        for (int causal : {0, 1})
            for (float p : {0.0f, 0.1f}) {
                SCOPED_TRACE(::testing::Message() << "B=" << s.B << " T=" << s.T << " C=" << s.C << " H=" << s.H
                                                  << " causal=" << causal << " p=" << p);
                const dsk_attention_args a = args_for(s, causal, p);
                const Inputs in = inputs(a, 1.0f, static_cast<unsigned>(s.T * 4 + causal * 2 + (p > 0)));
                const Ref ref = reference(a, in);
                const Result saved = emulate(a, in, true), recomputed = emulate(a, in, false);
                EXPECT_LT(rel_err(saved.out, ref.out), 1e-5);
                EXPECT_LT(rel_err(saved.probs, ref.probs), 1e-5);
                EXPECT_LT(rel_err(saved.dqkv, ref.dqkv), 1e-5);
                // Recomputing A runs forward's steps: the same bits.
                EXPECT_EQ(saved.out, recomputed.out);
                EXPECT_EQ(saved.dqkv, recomputed.dqkv);
                for (int k : {DSK_ATTENTION_KERNEL_GEMM, DSK_ATTENTION_KERNEL_ROWS}) {
                    SCOPED_TRACE(k == DSK_ATTENTION_KERNEL_GEMM ? "cpu gemm" : "cpu rows");
                    const Result c = cpu(a, in, k);
                    EXPECT_LT(rel_err(saved.out, c.out), 1e-5);
                    EXPECT_LT(rel_err(saved.probs, c.probs), 1e-5);
                    EXPECT_LT(rel_err(saved.dqkv, c.dqkv), 1e-5);
                }
                if (causal) {  // A is exactly zero above the diagonal
                    bool zero = true;
                    for (int64_t r = 0; r < s.B * s.H * s.T; ++r)
                        for (int64_t j = r % s.T + 1; j < s.T; ++j) zero &= saved.probs[r * s.T + j] == 0.0f;
                    EXPECT_TRUE(zero);
                }
            }
}

TEST(CudaAttentionHost, SaturatedSoftmaxMatchesReference) {
    // Scores of tens (a nearly one-hot softmax, as trained heads have).
    for (int causal : {0, 1}) {
        SCOPED_TRACE(::testing::Message() << "causal=" << causal);
        const dsk_attention_args a = args_for({4, 12, 64, 4}, causal, 0.1f);
        const Inputs in = inputs(a, 4.0f, 11u + static_cast<unsigned>(causal));
        const Ref ref = reference(a, in);
        const Result r = emulate(a, in, true);
        EXPECT_LT(rel_err(r.out, ref.out), 1e-5);
        EXPECT_LT(rel_err(r.probs, ref.probs), 1e-5);
        EXPECT_LT(rel_err(r.dqkv, ref.dqkv), 1e-4);
    }
}

TEST(CudaAttentionHost, DropoutDrawsTheCpuMaskOnTheProbabilities) {
    // The launcher's dropout step on A (stream index key.offset + position in
    // [B, H, T, T]) equals dsk_cpu_dropout_apply on A bit for bit.
    const dsk_attention_args a = args_for({2, 9, 12, 3}, 1, 0.3f);
    const Inputs in = inputs(a, 1.0f, 5u);
    const Result r = emulate(a, in, true);
    std::vector<float> d(r.probs.size(), NAN), cpu_d = r.probs;
    attn_host::HostLauncher{}.dropout(r.probs.data(), d.data(), d.size(), a);
    ASSERT_EQ(DSK_OK, dsk_cpu_dropout_apply(cpu_d.data(), cpu_d.size(), a.dropout_p, &a.dropout_key));
    EXPECT_EQ(d, cpu_d);
    size_t dropped = 0, visible = 0;
    for (size_t e = 0; e < d.size(); ++e)
        if (r.probs[e] != 0.0f) {
            ++visible;
            dropped += d[e] == 0.0f;
        }
    EXPECT_GT(dropped, 0u);
    EXPECT_LT(dropped, visible);
}

TEST(CudaAttentionHost, Bf16ProductsMatchReferenceAndCpuGemmKernel) {
    // bf16_products: operands rounded to bf16 as they are loaded into the
    // tiles, fp32 accumulation: bf16-sized errors against the float64
    // reference (the CPU test's bounds), close to the CPU GEMM kernel's bf16
    // products (same roundings; an fp32 ulp apart before rounding can flip a
    // bf16 rounding), and clearly not the fp32 result.
    for (const Shape& s : {Shape{3, 11, 64, 4}, Shape{2, 40, 64, 4}})
        for (float p : {0.0f, 0.1f}) {
            SCOPED_TRACE(::testing::Message() << "T=" << s.T << " p=" << p);
            dsk_attention_args a = args_for(s, 1, p);
            const Inputs in = inputs(a, 1.0f, static_cast<unsigned>(s.T) + (p > 0 ? 100u : 0u));
            const Ref ref = reference(a, in);
            const Result f32 = emulate(a, in, true);
            a.bf16_products = 1;
            const Result g = emulate(a, in, true), recomputed = emulate(a, in, false);
            EXPECT_LT(rel_err(g.out, ref.out), 2e-2);
            EXPECT_LT(rel_err(g.probs, ref.probs), 2e-2);
            EXPECT_LT(rel_err(g.dqkv, ref.dqkv), 5e-2);
            EXPECT_GT(rel_err(g.out, ref.out), 10 * rel_err(f32.out, ref.out));
            EXPECT_EQ(g.dqkv, recomputed.dqkv);
            const Result c = cpu(a, in, DSK_ATTENTION_KERNEL_GEMM);
            EXPECT_LT(rel_err(g.out, c.out), 1e-2);
            EXPECT_LT(rel_err(g.probs, c.probs), 1e-2);
            EXPECT_LT(rel_err(g.dqkv, c.dqkv), 2e-2);
        }
}

TEST(CudaAttentionHost, ProductsCoverTheHeadsSlicesOnly) {
    // The six products' strides: each writes exactly its head's slice. With
    // one head's q, k, v made zero, that head's output is zero and the other
    // heads' outputs are unchanged (bit for bit); dqkv is fully overwritten
    // (no NaN left from the NaN-filled buffer).
    const dsk_attention_args a = args_for({2, 20, 36, 3}, 0, 0.0f);
    Inputs in = inputs(a, 1.0f, 9u);
    const Result before = emulate(a, in, false);
    const int64_t T = a.seq, C = a.channels, hd = C / a.heads;
    for (int64_t b = 0; b < a.batch; ++b)
        for (int64_t t = 0; t < T; ++t)
            for (int part = 0; part < 3; ++part)
                for (int64_t k = 0; k < hd; ++k) in.qkv[static_cast<size_t>((b * T + t) * 3 * C + part * C + hd + k)] = 0;
    const Result after = emulate(a, in, false);
    for (int64_t r = 0; r < a.batch * T; ++r)
        for (int64_t c = 0; c < C; ++c) {
            const size_t e = static_cast<size_t>(r * C + c);
            if (c / hd == 1)
                EXPECT_EQ(after.out[e], 0.0f) << r << " " << c;
            else
                EXPECT_EQ(after.out[e], before.out[e]) << r << " " << c;
        }
    for (float x : after.dqkv) EXPECT_FALSE(std::isnan(x));
}
