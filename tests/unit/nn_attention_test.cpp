// The attention kernels (kernels/nn_attention.h) against the double
// reference: causal and not, probabilities saved or recomputed, dropout on
// the probabilities, shapes with odd T and H, and the argument checks. Every
// test runs with both CPU implementations (the per-head GEMMs and the row
// loops), selected with dsk_cpu_attention_set_kernel().
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "catch_error.h"
#include "core/kernel_backend.h"
#include "nn_attention.h"

namespace {

struct Case {
    int64_t B, T, C, H;
};
const Case kCases[] = {{1, 1, 4, 1}, {2, 7, 12, 3}, {3, 13, 10, 5}, {2, 33, 64, 4}, {1, 5, 9, 9}, {64, 11, 64, 4}, {64, 12, 64, 4}};

dsk_attention_args args_for(const Case& c, int causal, float p = 0.0f, uint64_t seed = 0) {
    dsk_attention_args a{};
    a.batch = c.B;
    a.seq = c.T;
    a.channels = c.C;
    a.heads = c.H;
    a.causal = causal;
    a.dropout_p = p;
    a.dropout_key.seed = seed;
    a.dropout_key.stream = 3;
    a.dropout_key.module_id = 17;
    return a;
}

std::vector<float> randn(size_t n, unsigned seed, float sd = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, sd);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
}
std::vector<double> widen(const std::vector<float>& v) {
    return std::vector<double>(v.begin(), v.end());
}

// max |x - y| / (1 + max |y|): relative to the data's scale.
double rel_err(const std::vector<float>& x, const std::vector<double>& y) {
    double e = 0.0, m = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
        e = std::max(e, std::fabs(static_cast<double>(x[i]) - y[i]));
        m = std::max(m, std::fabs(y[i]));
    }
    return e / (1.0 + m);
}

struct AttnRun {
    std::vector<float> out, probs, dqkv_saved, dqkv_recomputed;
};
AttnRun run_kernel(const dsk_attention_args& a, const std::vector<float>& qkv, const std::vector<float>& dout) {
    const ds::Kernels k = ds::cpu_kernels();
    AttnRun r;
    r.out.assign(static_cast<size_t>(a.batch * a.seq * a.channels), NAN);
    r.probs.assign(static_cast<size_t>(a.batch * a.heads * a.seq * a.seq), NAN);
    k.attention_forward(qkv.data(), r.out.data(), r.probs.data(), a);
    std::vector<float> out2(r.out.size(), NAN);
    k.attention_forward(qkv.data(), out2.data(), nullptr, a);
    EXPECT_EQ(out2, r.out) << "saving the probabilities changed the output";
    r.dqkv_saved.assign(qkv.size(), NAN);
    r.dqkv_recomputed.assign(qkv.size(), NAN);
    k.attention_backward(qkv.data(), r.probs.data(), dout.data(), r.dqkv_saved.data(), a);
    k.attention_backward(qkv.data(), nullptr, dout.data(), r.dqkv_recomputed.data(), a);
    return r;
}

void check_against_ref(const Case& c, int causal, float p) {
    SCOPED_TRACE(::testing::Message() << "B=" << c.B << " T=" << c.T << " C=" << c.C << " H=" << c.H
                                      << " causal=" << causal << " p=" << p);
    const dsk_attention_args a = args_for(c, causal, p, 1234);
    const auto qkv = randn(static_cast<size_t>(c.B * c.T * 3 * c.C), 7 + static_cast<unsigned>(c.T));
    const auto dout = randn(static_cast<size_t>(c.B * c.T * c.C), 99 + static_cast<unsigned>(c.C));
    const AttnRun r = run_kernel(a, qkv, dout);

    std::vector<double> out(r.out.size()), probs(r.probs.size()), dqkv(qkv.size());
    dsk_ref_attention_forward(widen(qkv).data(), out.data(), probs.data(), &a);
    dsk_ref_attention_backward(widen(qkv).data(), widen(dout).data(), dqkv.data(), &a);
    EXPECT_LT(rel_err(r.out, out), 2e-6);
    EXPECT_LT(rel_err(r.probs, probs), 2e-6);
    EXPECT_LT(rel_err(r.dqkv_saved, dqkv), 1e-5);
    // Recomputing A gives the same bits as reading the saved one.
    EXPECT_EQ(r.dqkv_saved, r.dqkv_recomputed);
    // The mask: nothing above the diagonal when causal; rows of A sum to 1.
    for (int64_t bh = 0; bh < c.B * c.H; ++bh)
        for (int64_t i = 0; i < c.T; ++i) {
            double s = 0.0;
            for (int64_t j = 0; j < c.T; ++j) {
                const float v = r.probs[static_cast<size_t>((bh * c.T + i) * c.T + j)];
                if (causal && j > i) ASSERT_EQ(v, 0.0f) << i << "," << j;
                if (!causal) ASSERT_GT(v, 0.0f) << i << "," << j;
                s += v;
            }
            ASSERT_NEAR(s, 1.0, 1e-5);
        }
}

// Runs each test with one implementation, restoring the previous choice.
class NnAttention : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override {
        before_ = dsk_cpu_attention_kernel();
        ASSERT_EQ(DSK_OK, dsk_cpu_attention_set_kernel(GetParam()));
    }
    void TearDown() override { dsk_cpu_attention_set_kernel(before_); }

private:
    int before_ = DSK_ATTENTION_KERNEL_GEMM;
};

}  // namespace

TEST_P(NnAttention, CausalMatchesDoubleReference) {
    for (const Case& c : kCases) check_against_ref(c, 1, 0.0f);
}

TEST_P(NnAttention, NonCausalMatchesDoubleReference) {
    for (const Case& c : kCases) check_against_ref(c, 0, 0.0f);
}

TEST_P(NnAttention, DropoutOnProbabilitiesMatchesReference) {
    for (const Case& c : kCases) {
        check_against_ref(c, 1, 0.25f);
        check_against_ref(c, 0, 0.5f);
    }
}

TEST_P(NnAttention, CausalFirstTokenAttendsOnlyToItself) {
    // Row 0 of a causal head is softmax over one key: out[0] = v[0] exactly.
    const Case c{2, 6, 8, 2};
    const dsk_attention_args a = args_for(c, 1);
    const auto qkv = randn(static_cast<size_t>(c.B * c.T * 3 * c.C), 5, 3.0f);
    std::vector<float> out(static_cast<size_t>(c.B * c.T * c.C));
    ds::cpu_kernels().attention_forward(qkv.data(), out.data(), nullptr, a);
    for (int64_t b = 0; b < c.B; ++b)
        for (int64_t k = 0; k < c.C; ++k)
            EXPECT_EQ(out[static_cast<size_t>(b * c.T * c.C + k)],
                      qkv[static_cast<size_t>(b * c.T * 3 * c.C + 2 * c.C + k)]);
}

TEST_P(NnAttention, DropoutIsTheDropoutKernelOnTheProbabilities) {
    // out with dropout == (dsk_cpu_dropout_apply on the saved A) times V:
    // the same mask as the Dropout layer's, element index = position in [B, H, T, T].
    for (int causal : {1, 0}) {
        const Case c{2, 9, 12, 3};
        dsk_attention_args a = args_for(c, causal, 0.3f, 42);
        a.dropout_key.offset = 1000;
        const auto qkv = randn(static_cast<size_t>(c.B * c.T * 3 * c.C), 11);
        std::vector<float> out(static_cast<size_t>(c.B * c.T * c.C)), probs(static_cast<size_t>(c.B * c.H * c.T * c.T));
        const ds::Kernels k = ds::cpu_kernels();
        k.attention_forward(qkv.data(), out.data(), probs.data(), a);
        std::vector<float> D = probs;
        k.dropout_apply(D.data(), D.size(), a.dropout_p, a.dropout_key);
        size_t dropped = 0, visible = 0;
        for (int64_t b = 0; b < c.B; ++b)
            for (int64_t h = 0; h < c.H; ++h)
                for (int64_t i = 0; i < c.T; ++i)
                    for (int64_t kk = 0; kk < c.C / c.H; ++kk) {
                        double want = 0.0;
                        for (int64_t j = 0; j < c.T; ++j) {
                            const float dv = D[static_cast<size_t>(((b * c.H + h) * c.T + i) * c.T + j)];
                            want += static_cast<double>(dv) *
                                    qkv[static_cast<size_t>((b * c.T + j) * 3 * c.C + 2 * c.C + h * (c.C / c.H) + kk)];
                            if (kk == 0 && (!causal || j <= i)) {
                                ++visible;
                                dropped += dv == 0.0f;
                            }
                        }
                        ASSERT_NEAR(out[static_cast<size_t>((b * c.T + i) * c.C + h * (c.C / c.H) + kk)], want, 1e-5);
                    }
        EXPECT_GT(dropped, visible / 6);  // about 30% of the visible entries
        EXPECT_LT(dropped, visible / 2);
    }
}

TEST_P(NnAttention, DropoutKeyDecidesTheMask) {
    const Case c{2, 16, 8, 2};
    dsk_attention_args a = args_for(c, 0, 0.3f, 42);
    const auto qkv = randn(static_cast<size_t>(c.B * c.T * 3 * c.C), 11);
    auto fwd = [&](const dsk_attention_args& x) {
        std::vector<float> out(static_cast<size_t>(c.B * c.T * c.C));
        ds::cpu_kernels().attention_forward(qkv.data(), out.data(), nullptr, x);
        return out;
    };
    const auto base = fwd(a);
    EXPECT_EQ(base, fwd(a));
    dsk_attention_args b = a;
    b.dropout_key.seed = 43;
    EXPECT_NE(base, fwd(b));
    b = a;
    b.dropout_key.stream = 4;
    EXPECT_NE(base, fwd(b));
    b = a;
    b.dropout_key.module_id = 18;
    EXPECT_NE(base, fwd(b));
    b = a;
    b.dropout_key.offset = 1;
    EXPECT_NE(base, fwd(b));
    b = a;
    b.dropout_p = 0.0f;
    EXPECT_NE(base, fwd(b));
}

TEST_P(NnAttention, ResultsDoNotDependOnThreadCount) {
    const Case c{3, 19, 24, 4};
    const dsk_attention_args a = args_for(c, 1, 0.1f, 9);
    const auto qkv = randn(static_cast<size_t>(c.B * c.T * 3 * c.C), 3);
    const auto dout = randn(static_cast<size_t>(c.B * c.T * c.C), 4);
    const int before = omp_get_max_threads();
    omp_set_num_threads(1);
    const AttnRun one = run_kernel(a, qkv, dout);
    omp_set_num_threads(3);
    const AttnRun three = run_kernel(a, qkv, dout);
    omp_set_num_threads(before);
    EXPECT_EQ(one.out, three.out);
    EXPECT_EQ(one.probs, three.probs);
    EXPECT_EQ(one.dqkv_saved, three.dqkv_saved);
}

TEST_P(NnAttention, BadArgumentsAreRefusedWithTheirName) {
    const Case c{1, 4, 8, 2};
    std::vector<float> qkv(96, 0.1f), out(32), dq(96);
    auto expect_bad = [&](const dsk_attention_args* a, const float* x, float* o, const char* needle) {
        EXPECT_EQ(DSK_ERR_INVALID_ARGUMENT, dsk_cpu_attention_forward(x, o, nullptr, a)) << needle;
        EXPECT_NE(std::string(dsk_last_error()).find(needle), std::string::npos) << dsk_last_error();
        EXPECT_EQ(DSK_ERR_INVALID_ARGUMENT, dsk_cpu_attention_backward(x, nullptr, o, dq.data(), a)) << needle;
        EXPECT_NE(std::string(dsk_last_error()).find(needle), std::string::npos) << dsk_last_error();
    };
    dsk_attention_args a = args_for(c, 1);
    expect_bad(nullptr, qkv.data(), out.data(), "args is NULL");
    expect_bad(&a, nullptr, out.data(), "qkv is NULL");
    a.channels = 7;
    expect_bad(&a, qkv.data(), out.data(), "channels=7 is not a multiple of heads=2");
    a = args_for(c, 1);
    a.seq = 0;
    expect_bad(&a, qkv.data(), out.data(), "seq=0");
    a = args_for(c, 1);
    a.heads = -1;
    expect_bad(&a, qkv.data(), out.data(), "heads=-1");
    a = args_for(c, 1, 1.0f);
    expect_bad(&a, qkv.data(), out.data(), "dropout_p=1");
    a = args_for(c, 1, NAN);
    expect_bad(&a, qkv.data(), out.data(), "dropout_p=nan");
    a = args_for(c, 2);
    expect_bad(&a, qkv.data(), out.data(), "causal=2");
    a = args_for(c, 1);
    a.batch = int64_t{1} << 40;
    a.seq = int64_t{1} << 20;
    expect_bad(&a, qkv.data(), out.data(), "too large");
    a = args_for(c, 1);
    EXPECT_EQ(DSK_ERR_INVALID_ARGUMENT, dsk_cpu_attention_forward(qkv.data(), nullptr, nullptr, &a));
    EXPECT_NE(std::string(dsk_last_error()).find("out is NULL"), std::string::npos);
    EXPECT_EQ(DSK_ERR_INVALID_ARGUMENT, dsk_cpu_attention_backward(qkv.data(), nullptr, out.data(), nullptr, &a));
    EXPECT_NE(std::string(dsk_last_error()).find("dqkv is NULL"), std::string::npos);
    // Through the table, the failure is a ds::Error naming the kernel.
    a.channels = 7;
    const ds::Error e = catch_error([&] { ds::cpu_kernels().attention_forward(qkv.data(), out.data(), nullptr, a); });
    EXPECT_EQ(DS_ERR_INVALID_ARGUMENT, e.status());
    EXPECT_NE(std::string(e.what()).find("dsk_attention_forward"), std::string::npos) << e.what();
}

INSTANTIATE_TEST_SUITE_P(Kernels, NnAttention,
                         ::testing::Values(DSK_ATTENTION_KERNEL_GEMM, DSK_ATTENTION_KERNEL_ROWS),
                         [](const ::testing::TestParamInfo<int>& i) {
                             return std::string(i.param == DSK_ATTENTION_KERNEL_GEMM ? "Gemm" : "Rows");
                         });
