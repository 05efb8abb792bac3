// The CUDA attention's products on cuBLAS without a GPU: the steps of
// kernels/cuda/attention_plan.h run on the host with each product replaced
// by the cuBLAS calls kernels/cuda/attention_cublas_plan.h plans for it,
// every call going through gemm_plan.h's row-major -> column-major mapping
// (what device_gemm hands cuBLAS) and executed by a column-major loop
// written from cuBLAS's contract. The loop reads the operands only inside
// the spans the plan names (what a bf16 copy holds; .at() throws beyond),
// rounded to bf16 for bf16 products, and writes C only inside its span.
// Each planned call passes the CPU's GEMM argument check and cuBLAS's own
// leading-dimension rules. The results: against the float64 references
// (the tolerances of cuda_attention_test.cpp) and the tiled kernels' host
// emulation; saved and recomputed probabilities give the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

#include "cpu/gemm_check.h"
#include "cuda/attention_cublas_plan.h"
#include "cuda/attention_fused_body.h"
#include "cuda/gemm_plan.h"
#include "cuda_attention_host.h"
#include "nn_attention.h"

namespace {

using ds::kernels::AttnDims;
using ds::kernels::AttnDrop;
using ds::kernels::AttnGemm;
using ds::kernels::kAttnRowThreads;
namespace cu = ds::kernels::cu;

double bf16_round(float x) { return dsk_bf16_bits_to_f32(dsk_f32_to_bf16_bits(x)); }

// attention_plan.h's launcher with the products as planned cuBLAS calls.
// With `fuse`, bf16 products take attention.cu's fused steps
// (attention_fused_body.h, every (block, thread) run here) and read the bf16
// copies they leave, kept by fp32 address range as AttnCublasProducts keeps
// them; the fp32 buffers those steps skip stay NaN.
struct CublasModelLauncher : attn_host::HostLauncher {
    int calls = 0;
    bool fuse = false;
    struct Copy {
        const float* src;
        int64_t n;
        std::vector<uint16_t> v;
    };
    std::vector<Copy> copies;

    static constexpr bool kFuses = true;
    bool fused_bf16(const dsk_attention_args& a) const { return fuse && a.bf16_products != 0; }

    void written(const float* p, int64_t n) {
        for (size_t i = copies.size(); i-- > 0;)
            if (copies[i].src < p + n && p < copies[i].src + copies[i].n) copies.erase(copies.begin() + i);
    }
    uint16_t* fresh_copy(const float* src, int64_t n) {
        written(src, n);
        copies.push_back(Copy{src, n, std::vector<uint16_t>(static_cast<size_t>(n), 0xFFFF)});
        return copies.back().v.data();
    }
    // An operand's values as a bf16 product reads them: its copy, else its fp32 values rounded.
    std::vector<double> bf16_operand(const float* x, int64_t n) const {
        std::vector<double> v(static_cast<size_t>(n));
        for (const Copy& c : copies)
            if (x >= c.src && x + n <= c.src + c.n) {
                for (int64_t i = 0; i < n; ++i) v[i] = dsk_bf16_bits_to_f32(c.v[static_cast<size_t>(x - c.src + i)]);
                return v;
            }
        for (int64_t i = 0; i < n; ++i) v[i] = bf16_round(x[i]);
        return v;
    }

    int softmax(float* P, int64_t rows, int64_t T, int32_t causal) {
        written(P, rows * T);
        return HostLauncher::softmax(P, rows, T, causal);
    }
    int dropout(const float* x, float* y, size_t n, const dsk_attention_args& a) {
        written(y, static_cast<int64_t>(n));
        return HostLauncher::dropout(x, y, n, a);
    }
    int softmax_bwd(float* G, const float* P, int64_t rows, int64_t T, int32_t causal, float scale) {
        written(G, rows * T);
        return HostLauncher::softmax_bwd(G, P, rows, T, causal, scale);
    }

    // attn_softmax_kernel with its bf16 output: one block per row.
    int softmax_d16(float* P, int64_t rows, int64_t T, const dsk_attention_args& a) {
        uint16_t* d16 = fresh_copy(P, rows * T);
        const AttnDrop drop = attn_drop_of(a);
        float red_max[kAttnRowThreads], red_sum[kAttnRowThreads];
        for (int64_t r = 0; r < rows; ++r) {
            float* row = P + r * T;
            const int64_t jn = attn_visible(r % T, T, a.causal);
            for (int t = 0; t < kAttnRowThreads; ++t) red_max[t] = attn_row_max_part(row, jn, t, kAttnRowThreads);
            tree(red_max, AttnMax{});
            for (int t = 0; t < kAttnRowThreads; ++t)
                red_sum[t] = attn_row_exp_part(row, jn, red_max[0], t, kAttnRowThreads);
            tree(red_sum, AttnSum{});
            for (int t = 0; t < kAttnRowThreads; ++t)
                attn_row_normalize_d16(row, d16 + r * T, r, jn, T, red_sum[0], drop, t, kAttnRowThreads);
        }
        return 0;
    }
    // attn_dropout_d16_kernel: one thread per element.
    int dropout_d16(const float* P, const float* D, size_t n, const dsk_attention_args& a) {
        uint16_t* d16 = fresh_copy(D, static_cast<int64_t>(n));
        const AttnDrop drop = attn_drop_of(a);
        for (uint64_t i = 0; i < n; ++i) attn_drop_d16(P, d16, i, drop);
        return 0;
    }
    // attn_softmax_bwd_d16_kernel: one block per row.
    int softmax_bwd_d16(const float* G, const float* P, int64_t rows, int64_t T, float scale,
                        const dsk_attention_args& a) {
        uint16_t* g16 = fresh_copy(G, rows * T);
        const AttnDrop drop = attn_drop_of(a);
        float red[kAttnRowThreads];
        for (int64_t r = 0; r < rows; ++r) {
            const float* g = G + r * T;
            const float* p = P + r * T;
            const int64_t jn = attn_visible(r % T, T, a.causal);
            for (int t = 0; t < kAttnRowThreads; ++t)
                red[t] = attn_sbwd_dot_part_drop(g, p, r, jn, T, drop, t, kAttnRowThreads);
            tree(red, AttnSum{});
            for (int t = 0; t < kAttnRowThreads; ++t)
                attn_sbwd_write_d16(g, p, g16 + r * T, r, jn, T, red[0], scale, drop, t, kAttnRowThreads);
        }
        return 0;
    }

    int gemm(const AttnGemm& g) {
        cu::AttnCublasCalls r;
        EXPECT_TRUE(cu::attn_cublas_calls(g, &r));
        const int64_t na = cu::attn_span_a(g), nb = cu::attn_span_b(g), nc = cu::attn_span_c(g);
        written(g.c, nc);
        std::vector<double> a(g.a, g.a + na), b(g.b, g.b + nb), c(static_cast<size_t>(nc));
        if (g.bf16) a = bf16_operand(g.a, na), b = bf16_operand(g.b, nb);
        for (int64_t i = 0; i < nc; ++i) c[i] = g.c[i];  // what C's rows skip stays as it was
        std::vector<int> written(static_cast<size_t>(nc), 0);
        for (int64_t call = 0; call < r.calls; ++call) {
            ds::kernels::gemm::Problem p = r.p;
            p.a = g.a + call * r.a_step, p.b = g.b + call * r.b_step, p.c = g.c + call * r.c_step;
            // Each head's product passes the CPU's argument check (per item: the
            // heads' C matrices interleave in qkv's rows; that no element is
            // written twice is checked below).
            for (int64_t h = 0; h < p.batch; ++h)
                EXPECT_EQ(DSK_OK, ds::kernels::gemm::check_gemm("planned attention product",
                                                                ds::kernels::gemm::batch_item(p, h), p.trans_a,
                                                                p.trans_b))
                    << dsk_last_error();
            const cu::GemmPlan q = cu::plan_gemm(p.trans_a, p.trans_b, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.batch,
                                                 p.stride_a, p.stride_b, p.stride_c);
            // cuBLAS's rules: each column-major operand's ld covers its rows.
            EXPECT_GE(q.ld_first, std::max<int64_t>(1, q.trans_first ? q.k : q.m));
            EXPECT_GE(q.ld_second, std::max<int64_t>(1, q.trans_second ? q.n : q.k));
            EXPECT_GE(q.ldc, std::max<int64_t>(1, q.m));
            // The first operand is B's memory, the second A's (gemm_plan.h).
            const std::vector<double>& x = q.first_is_b ? b : a;
            const std::vector<double>& y = q.first_is_b ? a : b;
            const int64_t x0 = call * (q.first_is_b ? r.b_step : r.a_step);
            const int64_t y0 = call * (q.first_is_b ? r.a_step : r.b_step);
            for (int64_t bi = 0; bi < q.batch; ++bi) {
                const int64_t ox = x0 + bi * q.stride_first, oy = y0 + bi * q.stride_second;
                const int64_t oc = call * r.c_step + bi * q.stride_c;
                for (int64_t j = 0; j < q.n; ++j)
                    for (int64_t i = 0; i < q.m; ++i) {
                        double s = 0;
                        for (int64_t l = 0; l < q.k; ++l) {
                            const double xv =
                                q.trans_first ? x.at(ox + l + i * q.ld_first) : x.at(ox + i + l * q.ld_first);
                            const double yv =
                                q.trans_second ? y.at(oy + j + l * q.ld_second) : y.at(oy + l + j * q.ld_second);
                            s += xv * yv;
                        }
                        const int64_t e = oc + i + j * q.ldc;
                        c.at(e) = static_cast<double>(g.alpha) * s;
                        EXPECT_EQ(written.at(e)++, 0) << "C element " << e << " written twice";
                    }
            }
            ++calls;
        }
        for (int64_t i = 0; i < nc; ++i) g.c[i] = static_cast<float>(c[i]);
        return 0;
    }
};

struct Shape {
    int64_t B, T, C, H;
};

dsk_attention_args args_for(const Shape& s, int causal, float p, int bf16) {
    dsk_attention_args a{};
    a.batch = s.B, a.seq = s.T, a.channels = s.C, a.heads = s.H, a.causal = causal, a.dropout_p = p;
    a.bf16_products = bf16;
    a.dropout_key.seed = 5, a.dropout_key.stream = 2, a.dropout_key.module_id = 3, a.dropout_key.offset = 777;
    return a;
}

struct Result {
    std::vector<float> out, probs, dqkv;
};

// Forward then backward (a launcher each, as each entry point has its own
// products) with launcher L; `saved`: A saved and reused, else recomputed;
// `fuse`: CublasModelLauncher's fused steps.
template <class L>
Result run(const dsk_attention_args& a, const std::vector<float>& qkv, const std::vector<float>& dout, bool saved,
           int* calls = nullptr, bool fuse = false) {
    const AttnDims d = attn_host::dims_of(a);
    Result r;
    r.out.assign(dout.size(), NAN);
    r.dqkv.assign(qkv.size(), NAN);
    if (saved) r.probs.assign(d.tt(), NAN);
    float* probs = saved ? r.probs.data() : nullptr;
    L lf, lb;
    if constexpr (std::is_same_v<L, CublasModelLauncher>) lf.fuse = lb.fuse = fuse;
    // Scratch as the entry points size it, and a guard element after it that no step may touch.
    std::vector<float> fs(d.tt() * ds::kernels::attn_scratch_buffers(lf, false, saved, a) + 1, NAN);
    ds::kernels::attn_forward_steps(lf, d, a, qkv.data(), r.out.data(), probs, fs.data());
    std::vector<float> bs(d.tt() * ds::kernels::attn_scratch_buffers(lb, true, saved, a) + 1, NAN);
    ds::kernels::attn_backward_steps(lb, d, a, qkv.data(), probs, dout.data(), r.dqkv.data(), bs.data());
    EXPECT_TRUE(std::isnan(fs.back()) && std::isnan(bs.back())) << "a step wrote past the scratch it was sized for";
    if constexpr (std::is_same_v<L, CublasModelLauncher>)
        if (calls) *calls = lf.calls + lb.calls;
    return r;
}

template <class Y>
double rel_err(const std::vector<float>& x, const std::vector<Y>& y) {
    double e = 0.0, m = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double dd = std::fabs(static_cast<double>(x[i]) - static_cast<double>(y[i]));
        if (!(dd <= e)) e = dd;
        m = std::max(m, std::fabs(static_cast<double>(y[i])));
    }
    return e / (1.0 + m);
}

}  // namespace

TEST(CudaAttentionCublasPlan, MatchesReferenceAndTheTiledKernels) {
    const Shape shapes[] = {{1, 1, 4, 1}, {2, 7, 12, 3}, {2, 17, 32, 2}, {3, 33, 24, 4}, {1, 150, 8, 1}};
    for (const Shape& s : shapes)
        for (int causal : {0, 1})
            for (float p : {0.0f, 0.1f})
                for (int bf16 : {0, 1}) {
                    SCOPED_TRACE(::testing::Message() << "B=" << s.B << " T=" << s.T << " C=" << s.C << " H=" << s.H
                                                      << " causal=" << causal << " p=" << p << " bf16=" << bf16);
                    const dsk_attention_args a = args_for(s, causal, p, bf16);
                    std::mt19937 rng(static_cast<unsigned>(s.T * 4 + causal));
                    std::normal_distribution<float> nd(0.0f, 1.0f);
                    std::vector<float> qkv(static_cast<size_t>(s.B * s.T * 3 * s.C));
                    std::vector<float> dout(static_cast<size_t>(s.B * s.T * s.C));
                    for (auto& x : qkv) x = nd(rng);
                    for (auto& x : dout) x = nd(rng);
                    const std::vector<double> rq(qkv.begin(), qkv.end()), rdo(dout.begin(), dout.end());
                    std::vector<double> ro(dout.size()), rg(qkv.size());
                    std::vector<double> rp(static_cast<size_t>(s.B * s.H * s.T * s.T));
                    dsk_ref_attention_forward(rq.data(), ro.data(), rp.data(), &a);
                    dsk_ref_attention_backward(rq.data(), rdo.data(), rg.data(), &a);

                    int calls = 0;
                    const Result saved = run<CublasModelLauncher>(a, qkv, dout, true, &calls);
                    const Result again = run<CublasModelLauncher>(a, qkv, dout, false);
                    EXPECT_EQ(calls, 6 * s.B);  // scores, out; dv, dd, dq, dk: one call per batch element each
                    const double tf = bf16 ? 2e-2 : 1e-5, tb = bf16 ? 5e-2 : 1e-5;
                    EXPECT_LT(rel_err(saved.out, ro), tf);
                    EXPECT_LT(rel_err(saved.probs, rp), tf);
                    EXPECT_LT(rel_err(saved.dqkv, rg), tb);
                    EXPECT_EQ(saved.out, again.out);
                    EXPECT_EQ(saved.dqkv, again.dqkv);
                    const Result tiled = run<attn_host::HostLauncher>(a, qkv, dout, true);
                    EXPECT_LT(rel_err(saved.out, tiled.out), bf16 ? 1e-2 : 1e-5);
                    EXPECT_LT(rel_err(saved.dqkv, tiled.dqkv), bf16 ? 2e-2 : 1e-5);
                    if (bf16) {  // the fused steps: the same bits, the fp32 D and dS never needed
                        CublasModelLauncher fl;
                        fl.fuse = true;
                        const size_t unfused = ds::kernels::attn_scratch_buffers(CublasModelLauncher{}, true, false, a);
                        EXPECT_EQ(ds::kernels::attn_scratch_buffers(fl, true, false, a), unfused - (p > 0 ? 1 : 0))
                            << "the fused steps keep no fp32 D";
                        const Result fused = run<CublasModelLauncher>(a, qkv, dout, true, nullptr, true);
                        const Result fused_again = run<CublasModelLauncher>(a, qkv, dout, false, nullptr, true);
                        EXPECT_EQ(fused.out, saved.out);
                        EXPECT_EQ(fused.probs, saved.probs);
                        EXPECT_EQ(fused.dqkv, saved.dqkv);
                        EXPECT_EQ(fused_again.dqkv, saved.dqkv);
                    }
                    if (causal) {  // the products computed whole: A still exactly zero above the diagonal
                        bool zero = true;
                        for (int64_t r = 0; r < s.B * s.H * s.T; ++r)
                            for (int64_t j = r % s.T + 1; j < s.T; ++j) zero &= saved.probs[r * s.T + j] == 0.0f;
                        EXPECT_TRUE(zero);
                    }
                }
}

// The mapping itself on one product of each kind: the plan's operands are a
// row-major matrix or a transposed one as their unit stride says, one call
// per batch element over its heads; a product with no unit stride on an
// operand does not map (the launcher keeps the tiled kernel for it).
TEST(CudaAttentionCublasPlan, MapsEachProductAndRefusesOthers) {
    const dsk_attention_args a = args_for({3, 10, 24, 4}, 1, 0.0f, 0);
    const AttnDims d = attn_host::dims_of(a);
    std::vector<float> buf(1);
    const float* x = buf.data();
    float* y = buf.data();
    struct Want {
        AttnGemm g;
        bool ta, tb;
        int64_t lda, ldb, ldc;
    };
    const int64_t s3 = 3 * d.C;
    const Want wants[] = {
        {ds::kernels::attn_gemm_scores(d, a, x, y), false, true, s3, s3, d.T},
        {ds::kernels::attn_gemm_out(d, a, x, x, y), false, false, d.T, s3, d.C},
        {ds::kernels::attn_gemm_dv(d, a, x, x, y), true, false, d.T, d.C, s3},
        {ds::kernels::attn_gemm_dd(d, a, x, x, y), false, true, d.C, s3, d.T},
        {ds::kernels::attn_gemm_dq(d, a, x, x, y), false, false, d.T, s3, s3},
        {ds::kernels::attn_gemm_dk(d, a, x, x, y), true, false, d.T, s3, s3},
    };
    for (const Want& w : wants) {
        cu::AttnCublasCalls r;
        ASSERT_TRUE(cu::attn_cublas_calls(w.g, &r));
        EXPECT_EQ(r.p.trans_a, w.ta);
        EXPECT_EQ(r.p.trans_b, w.tb);
        EXPECT_EQ(r.p.lda, w.lda);
        EXPECT_EQ(r.p.ldb, w.ldb);
        EXPECT_EQ(r.p.ldc, w.ldc);
        EXPECT_EQ(r.calls, d.B);
        EXPECT_EQ(r.p.batch, d.H);
        EXPECT_EQ(r.p.beta, 0.0f);
    }
    AttnGemm bad = wants[0].g;
    bad.a_cs = 2;  // A(m, k) at m*3C + 2k: no unit stride
    cu::AttnCublasCalls r;
    EXPECT_FALSE(cu::attn_cublas_calls(bad, &r));
    bad = wants[0].g;
    bad.items = d.B * d.H + 1;  // not whole batch elements
    EXPECT_FALSE(cu::attn_cublas_calls(bad, &r));
}
