// The GEMM kernels (kernels/nn_gemm.h) on every engine this build and
// machine have, against the float64 triple loop: every transpose
// combination, odd sizes including 1 and 0, padded leading dimensions,
// alpha/beta, beta 0 ignoring NaN in C, the batched form (with a broadcast
// operand), the Linear forward kernel, the bias gradient; bad arguments are
// refused with a message naming the argument.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "catch_error.h"
#include "core/kernel_backend.h"
#include "backend.h"
#include "nn_gemm.h"
#include "nn_gemm_test_util.h"

namespace {

using namespace gemm_test;  // random_vec, EngineScope, Case, Layout, expect_c_matches, expect_refused

const char* engine_name(int e) {
    return e == DSK_GEMM_ENGINE_ONEDNN ? "onednn" : e == DSK_GEMM_ENGINE_OPENBLAS ? "openblas" : "reference";
}

// Runs one case on the current engine and compares every element of C (and
// the padding, which must stay untouched) with the float64 reference.
void check_case(const Case& t, uint32_t seed) {
    SCOPED_TRACE(testing::Message() << t);
    const Layout l(t);
    const int64_t lda = l.lda, ldb = l.ldb, ldc = l.ldc;
    auto [a, b, c] = Operands(t, l, seed);
    if (t.beta == 0.0f)  // beta 0 must not read C: NaN in the block stays out of the result
        for (int64_t i = 0; i < t.m; ++i)
            for (int64_t j = 0; j < t.n; ++j) c[i * ldc + j] = std::numeric_limits<float>::quiet_NaN();
    std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end()), cd(c.begin(), c.end());
    if (t.beta == 0.0f) std::fill(cd.begin(), cd.end(), 0.0);
    dsk_ref_gemm_f64(t.ta, t.tb, t.m, t.n, t.k, t.alpha, ad.data(), lda, bd.data(), ldb, t.beta, cd.data(), ldc);
    const std::vector<double> mag = magnitudes(t, l, ad, bd, c);
    const std::vector<float> c_before = c;
    ASSERT_EQ(dsk_cpu_gemm(t.ta, t.tb, t.m, t.n, t.k, t.alpha, a.data(), lda, b.data(), ldb, t.beta, c.data(), ldc),
              DSK_OK)
        << dsk_last_error();
    expect_c_matches(t, l, c, c_before, cd, mag, "float64 reference");
}

}  // namespace

TEST(NnGemm, EngineIsNamed) {
    const std::string name = dsk_cpu_gemm_engine();
    EXPECT_FALSE(name.empty());
#ifdef DS_WITH_ONEDNN
    if (std::getenv("DS_GEMM_ENGINE") == nullptr) EXPECT_EQ(name.rfind("onednn ", 0), 0u) << name;
#endif
    EXPECT_EQ(dsk_cpu_gemm_set_engine(7), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("engine = 7"), std::string::npos) << dsk_last_error();
}

TEST(NnGemm, AllTransposesAndSizesOnEveryEngine) {
    EngineScope scope;
    const int64_t dims[][3] = {{1, 1, 1}, {0, 3, 4}, {3, 0, 4}, {3, 4, 0}, {1, 9, 5}, {7, 1, 3},
                               {5, 6, 1}, {17, 33, 65}, {64, 48, 130}, {130, 70, 33}};
    for (int e : EngineScope::available()) {
        SCOPED_TRACE(engine_name(e));
        ASSERT_EQ(dsk_cpu_gemm_set_engine(e), DSK_OK);
        uint32_t seed = 1;
        for (int ta = 0; ta < 2; ++ta)
            for (int tb = 0; tb < 2; ++tb)
                for (const auto& d : dims)
                    for (int64_t pad : {0, 3}) {
                        check_case({ta, tb, d[0], d[1], d[2], pad, 1.0f, 0.0f}, seed++);
                        check_case({ta, tb, d[0], d[1], d[2], pad, -0.75f, 1.0f}, seed++);
                        check_case({ta, tb, d[0], d[1], d[2], pad, 1.5f, 0.5f}, seed++);
                    }
    }
}

TEST(NnGemm, BatchedMatchesPerItemReference) {
    EngineScope scope;
    for (int e : EngineScope::available()) {
        SCOPED_TRACE(engine_name(e));
        ASSERT_EQ(dsk_cpu_gemm_set_engine(e), DSK_OK);
        for (int ta = 0; ta < 2; ++ta)
            for (int tb = 0; tb < 2; ++tb)
                for (bool broadcast_b : {false, true}) {
                    const int64_t batch = 3, m = 9, n = 7, k = 11;
                    const int64_t lda = ta ? m : k, ldb = tb ? k : n, ldc = n + 2;
                    const int64_t sa = m * k + 5, sb = broadcast_b ? 0 : k * n + 1, sc = m * ldc + 3;
                    auto a = random_vec(static_cast<size_t>(batch * sa), 10 + ta);
                    auto b = random_vec(static_cast<size_t>(batch * (k * n + 1)), 20 + tb);
                    auto c = random_vec(static_cast<size_t>(batch * sc), 30);
                    std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end()), cd(c.begin(), c.end());
                    ASSERT_EQ(dsk_cpu_gemm_batched(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 1.0f,
                                                   c.data(), ldc, batch, sa, sb, sc),
                              DSK_OK)
                        << dsk_last_error();
                    for (int64_t i = 0; i < batch; ++i)
                        dsk_ref_gemm_f64(ta, tb, m, n, k, 0.5, ad.data() + i * sa, lda, bd.data() + i * sb, ldb, 1.0,
                                         cd.data() + i * sc, ldc);
                    for (size_t i = 0; i < c.size(); ++i)
                        ASSERT_NEAR(c[i], cd[i], 1e-5) << "ta=" << ta << " tb=" << tb << " broadcast_b=" << broadcast_b
                                                       << " element " << i;
                }
    }
}

TEST(NnGemm, LinearForwardAndBiasGrad) {
    EngineScope scope;
    for (int e : EngineScope::available()) {
        SCOPED_TRACE(engine_name(e));
        ASSERT_EQ(dsk_cpu_gemm_set_engine(e), DSK_OK);
        for (bool with_bias : {false, true}) {
            const int64_t rows = 37, in = 45, out = 29;
            auto x = random_vec(rows * in, 1), w = random_vec(out * in, 2), bias = random_vec(out, 3);
            for (auto fwd : {&dsk_cpu_linear_fwd, &dsk_cpu_linear_fwd_packed}) {
                std::vector<float> y(rows * out, std::numeric_limits<float>::quiet_NaN());
                ASSERT_EQ(fwd(x.data(), w.data(), with_bias ? bias.data() : nullptr, y.data(), rows, in, out), DSK_OK)
                    << dsk_last_error();
                for (int64_t r = 0; r < rows; ++r)
                    for (int64_t j = 0; j < out; ++j) {
                        double s = with_bias ? bias[j] : 0.0;
                        for (int64_t p = 0; p < in; ++p) s += static_cast<double>(x[r * in + p]) * w[j * in + p];
                        ASSERT_NEAR(y[r * out + j], s, 2e-5) << "row " << r << " col " << j << " bias " << with_bias
                                                             << (fwd == &dsk_cpu_linear_fwd ? "" : " (packed)");
                    }
            }
        }
    }
    // db += column sums of dy (it accumulates).
    const int64_t rows = 300, out = 301;
    auto dy = random_vec(rows * out, 4);
    std::vector<float> db(out, 1.0f);
    ASSERT_EQ(dsk_cpu_bias_grad(dy.data(), db.data(), rows, out), DSK_OK);
    for (int64_t j = 0; j < out; ++j) {
        double s = 1.0;
        for (int64_t r = 0; r < rows; ++r) s += dy[r * out + j];
        ASSERT_NEAR(db[j], s, 1e-5) << "column " << j;
    }
}

TEST(NnGemm, BadArgumentsAreRefusedWithAMessage) {
    float a[16] = {}, b[16] = {}, c[16] = {};
    expect_refused(dsk_cpu_gemm(2, 0, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2), "trans_a = 2");
    expect_refused(dsk_cpu_gemm(0, -1, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2), "trans_b = -1");
    expect_refused(dsk_cpu_gemm(0, 0, -2, 2, 2, 1, a, 2, b, 2, 0, c, 2), "m = -2");
    expect_refused(dsk_cpu_gemm(0, 0, 2, 2, 3, 1, a, 2, b, 2, 0, c, 2), "lda = 2");
    expect_refused(dsk_cpu_gemm(1, 0, 4, 2, 2, 1, a, 2, b, 2, 0, c, 2), "lda = 2");  // A stored [k, m]: lda >= m
    expect_refused(dsk_cpu_gemm(0, 1, 2, 2, 3, 1, a, 3, b, 2, 0, c, 2), "ldb = 2");
    expect_refused(dsk_cpu_gemm(0, 0, 2, 3, 2, 1, a, 2, b, 3, 0, c, 2), "ldc = 2");
    expect_refused(dsk_cpu_gemm(0, 0, 2, 2, 2, 1, nullptr, 2, b, 2, 0, c, 2), "a is NULL");
    expect_refused(dsk_cpu_gemm(0, 0, 2, 2, 2, 1, a, 2, nullptr, 2, 0, c, 2), "b is NULL");
    expect_refused(dsk_cpu_gemm(0, 0, 2, 2, 2, 1, a, 2, b, 2, 0, nullptr, 2), "c is NULL");
    expect_refused(dsk_cpu_gemm_batched(0, 0, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2, 2, 4, 4, 3), "stride_c = 3");
    expect_refused(dsk_cpu_gemm_batched(0, 0, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2, -1, 4, 4, 4), "batch = -1");
    expect_refused(dsk_cpu_gemm(0, 0, INT64_MAX / 2, 2, 2, 1, a, 2, b, 2, 0, c, 4), "spans more than");
    expect_refused(dsk_cpu_linear_fwd(a, b, nullptr, c, -1, 2, 2), "negative size");
    expect_refused(dsk_cpu_linear_fwd(a, nullptr, nullptr, c, 2, 2, 2), "dsk_linear_fwd: w is NULL");
    expect_refused(dsk_cpu_linear_fwd(nullptr, b, nullptr, c, 2, 2, 2), "dsk_linear_fwd: x is NULL");
    expect_refused(dsk_cpu_bias_grad(nullptr, c, 2, 2), "dy is NULL");
    // Nothing may be written by a refused call; empty products with NULL are fine.
    EXPECT_EQ(dsk_cpu_gemm(0, 0, 0, 0, 0, 1, nullptr, 1, nullptr, 1, 0, nullptr, 1), DSK_OK);
    // Through ds::Kernels the same refusal is a ds::Error with the message.
    ds::Error err = catch_error([&] { ds::cpu_kernels().gemm(false, false, 2, 2, 3, 1, a, 2, b, 2, 0, c, 2); });
    EXPECT_EQ(err.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(err.what()).find("dsk_gemm: lda = 2"), std::string::npos) << err.what();
}

TEST(NnGemm, CpuTableHasTheDenseEntries) {
    const dsk_backend* b = dsk_backend_cpu();
    EXPECT_NE(b->gemm, nullptr);
    EXPECT_NE(b->gemm_batched, nullptr);
    EXPECT_NE(b->linear_fwd, nullptr);
    EXPECT_NE(b->bias_grad, nullptr);
    EXPECT_NE(b->embedding_fwd, nullptr);
    EXPECT_NE(b->embedding_bwd, nullptr);
    // Through the table: 2x2 times identity.
    const float a[4] = {1, 2, 3, 4}, eye[4] = {1, 0, 0, 1};
    float c[4] = {};
    ASSERT_EQ(b->gemm(b, 0, 0, 2, 2, 2, 1.0f, a, 2, eye, 2, 0.0f, c, 2), DSK_OK);
    EXPECT_EQ(c[0], 1);
    EXPECT_EQ(c[3], 4);
}

// The oneDNN primitive cache and per-thread scratchpads: threads running the
// same and different shapes at once all get the right products.
TEST(NnGemm, ConcurrentCallsAreCorrect) {
    const int64_t m = 33, k = 40;
    auto a = random_vec(m * k, 50);
    auto b = random_vec(k * 64, 51);
    std::vector<std::thread> threads;
    std::vector<int> failures(4, 0);
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            const int64_t n = t % 2 ? 64 : 17;  // two threads per shape
            std::vector<float> c(m * n), ref(m * n);
            dsk_ref_gemm(0, 0, m, n, k, 1.0f, a.data(), k, b.data(), 64, 0.0f, ref.data(), n);
            for (int it = 0; it < 20; ++it) {
                if (dsk_cpu_gemm(0, 0, m, n, k, 1.0f, a.data(), k, b.data(), 64, 0.0f, c.data(), n) != DSK_OK) {
                    ++failures[t];
                    continue;
                }
                for (int64_t i = 0; i < m * n; ++i)
                    if (std::fabs(c[i] - ref[i]) > 1e-4f) {
                        ++failures[t];
                        break;
                    }
            }
        });
    for (auto& th : threads) th.join();
    for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}
