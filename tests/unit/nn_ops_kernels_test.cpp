// The nn layers' kernels (kernels/nn_ops.h) against their float64 references
// (kernels/ref/ref_*.cpp) on every ISA this CPU runs, at odd sizes and at
// sizes that take the multi-threaded path; Philox4x32-10 against Random123's
// published known answers; dropout's statistics and key separation; and the
// refusals (status + message naming the argument).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "catch_error.h"
#include "nn_ops.h"
#include "test_kernels_common.h"

namespace {

using dskt::IsaGuard;
using dskt::Rng;

std::vector<double> to_d(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// max |a - b| / (atol + rtol*|b|) over the elements: <= 1 passes.
double worst(const std::vector<float>& a, const std::vector<double>& b, double atol, double rtol) {
    EXPECT_EQ(a.size(), b.size());
    double w = 0.0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        const double e = std::fabs(static_cast<double>(a[i]) - b[i]) / (atol + rtol * std::fabs(b[i]));
        if (!(e <= w)) w = e;  // NaN propagates as a failure
    }
    return w;
}

const std::vector<std::pair<size_t, size_t>>& row_shapes() {
    // (rows, dim): tiny, odd, around vector widths, and > 65536 elements
    // (several threads, per-chunk parameter-gradient partials).
    static const std::vector<std::pair<size_t, size_t>> v = {{1, 1},  {3, 7},    {5, 17},  {2, 33},
                                                             {9, 768}, {70, 1001}, {300, 257}};
    return v;
}

}  // namespace

// ---- Philox -------------------------------------------------------------------

TEST(NnOpsKernels, PhiloxMatchesRandom123KnownAnswers) {
    // Random123 tests/kat_vectors, "philox4x32 10" lines: ctr[4] key[2] -> out[4].
    struct Kat {
        uint32_t ctr[4], key[2], out[4];
    };
    const Kat kats[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (const Kat& k : kats) {
        uint32_t out[4];
        dsk_philox4x32_10(k.ctr, k.key, out);
        for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], k.out[i]) << "word " << i;
    }
}

// ---- LayerNorm ------------------------------------------------------------------

TEST(NnOpsKernels, LayerNormMatchesReference) {
    for (int isa : dskt::isas()) {
        IsaGuard guard(isa);
        for (auto [rows, dim] : row_shapes()) {
            for (bool affine : {true, false}) {
                SCOPED_TRACE(dskt::trace(isa, rows * dim) + " dim=" + std::to_string(dim) +
                             (affine ? " affine" : " plain"));
                Rng rng(rows * 131 + dim);
                // An offset mean (3) so a one-pass variance would lose digits.
                auto x = rng.uniform_vec(rows * dim, 2.0f, 4.0f);
                auto gamma = rng.uniform_vec(dim, 0.5f, 1.5f), beta = rng.uniform_vec(dim, -0.5f, 0.5f);
                auto dy = rng.uniform_vec(rows * dim, -1.0f, 1.0f);
                const float* g = affine ? gamma.data() : nullptr;
                const float* b = affine ? beta.data() : nullptr;
                std::vector<float> y(rows * dim), mean(rows), rstd(rows);
                ASSERT_EQ(dsk_cpu_layernorm_fwd(x.data(), g, b, y.data(), mean.data(), rstd.data(), rows, dim,
                                                1e-5f),
                          DSK_OK)
                    << dsk_last_error();
                auto xd = to_d(x), gd = to_d(gamma), bd = to_d(beta), dyd = to_d(dy);
                std::vector<double> yr(rows * dim), mr(rows), rr(rows);
                dsk_ref_layernorm_fwd(xd.data(), affine ? gd.data() : nullptr, affine ? bd.data() : nullptr,
                                      yr.data(), mr.data(), rr.data(), rows, dim, 1e-5);
                EXPECT_LE(worst(y, yr, 2e-5, 1e-5), 1.0);
                // A float sum of dim terms: rounding grows ~sqrt(dim) (sequential, unvectorised build).
                EXPECT_LE(worst(mean, mr, 0, 1e-6 + 2e-7 * std::sqrt(double(dim))), 1.0);
                // dim = 1: var = 0, rstd = 1/sqrt(eps) amplifies float rounding of x - mean.
                EXPECT_LE(worst(rstd, rr, 0, dim == 1 ? 1e-2 : 1e-5), 1.0);

                // Backward from the input, and from the output (normalize_invertible).
                std::vector<double> dxr(rows * dim), dgr(dim, 0.25), dbr(dim, -0.5);
                dsk_ref_layernorm_bwd(dyd.data(), xd.data(), mr.data(), rr.data(), affine ? gd.data() : nullptr,
                                      dxr.data(), dgr.data(), dbr.data(), rows, dim);
                for (bool from_output : {false, true}) {
                    SCOPED_TRACE(from_output ? "from output" : "from input");
                    std::vector<float> dx(rows * dim), dg(dim, 0.25f), db(dim, -0.5f);  // accumulates
                    const int s = from_output ? dsk_cpu_layernorm_bwd_from_output(dy.data(), y.data(), rstd.data(),
                                                                                  g, b, dx.data(), dg.data(),
                                                                                  db.data(), rows, dim)
                                              : dsk_cpu_layernorm_bwd(dy.data(), x.data(), mean.data(), rstd.data(),
                                                                      g, dx.data(), dg.data(), db.data(), rows, dim);
                    ASSERT_EQ(s, DSK_OK) << dsk_last_error();
                    if (dim > 1) EXPECT_LE(worst(dx, dxr, 2e-4, 1e-4), 1.0);
                    EXPECT_LE(worst(dg, dgr, 1e-4 * std::sqrt(double(rows)), 1e-4), 1.0);
                    EXPECT_LE(worst(db, dbr, 1e-5 * rows, 1e-6), 1.0);
                }
            }
        }
    }
}

TEST(NnOpsKernels, LayerNormBackwardMayOverwriteDy) {
    const size_t rows = 4, dim = 19;
    Rng rng(5);
    auto x = rng.uniform_vec(rows * dim, -1, 1), dy = rng.uniform_vec(rows * dim, -1, 1);
    std::vector<float> y(rows * dim), mean(rows), rstd(rows), dx(rows * dim);
    ASSERT_EQ(dsk_cpu_layernorm_fwd(x.data(), nullptr, nullptr, y.data(), mean.data(), rstd.data(), rows, dim, 1e-5f),
              DSK_OK);
    ASSERT_EQ(dsk_cpu_layernorm_bwd(dy.data(), x.data(), mean.data(), rstd.data(), nullptr, dx.data(), nullptr,
                                    nullptr, rows, dim),
              DSK_OK);
    ASSERT_EQ(dsk_cpu_layernorm_bwd(dy.data(), x.data(), mean.data(), rstd.data(), nullptr, dy.data(), nullptr,
                                    nullptr, rows, dim),
              DSK_OK);
    EXPECT_EQ(dx, dy);
}

TEST(NnOpsKernels, LayerNormRefusals) {
    float x[4] = {1, 2, 3, 4}, y[4], m[1], r[1], g[4] = {1, 1, 0, 1}, b[4] = {};
    EXPECT_EQ(dsk_cpu_layernorm_fwd(nullptr, nullptr, nullptr, y, m, r, 1, 4, 1e-5f), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("dsk_layernorm_fwd: x is NULL"), std::string::npos)
        << dsk_last_error();
    EXPECT_EQ(dsk_cpu_layernorm_fwd(x, g, nullptr, y, m, r, 1, 4, 1e-5f), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("gamma and beta"), std::string::npos);
    EXPECT_EQ(dsk_cpu_layernorm_fwd(x, nullptr, nullptr, y, m, r, 1, 4, -1.0f), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("eps = -1"), std::string::npos);
    EXPECT_EQ(dsk_cpu_layernorm_fwd(x, nullptr, nullptr, y, m, r, 1, 0, 1e-5f), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("dim = 0"), std::string::npos);
    // A zero weight: the input cannot be recovered from the output.
    float dy[4] = {1, 1, 1, 1}, dx[4], dg[4] = {}, db[4] = {};
    EXPECT_EQ(dsk_cpu_layernorm_bwd_from_output(dy, y, r, g, b, dx, dg, db, 1, 4), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("gamma[2] = 0"), std::string::npos) << dsk_last_error();
    EXPECT_EQ(dsk_cpu_layernorm_bwd(dy, x, m, r, g, dx, nullptr, nullptr, 1, 4), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("dgamma/dbeta are NULL"), std::string::npos);
    // Through ds::Kernels: the same status and message as ds::Error.
    ds::Error e = catch_error([&] { ds::cpu_kernels().layernorm_fwd(x, nullptr, nullptr, nullptr, m, r, 1, 4, 1e-5f); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("y is NULL"), std::string::npos) << e.what();
}

// ---- GELU ---------------------------------------------------------------------------

TEST(NnOpsKernels, GeluMatchesReference) {
    for (int isa : dskt::isas()) {
        IsaGuard guard(isa);
        for (size_t n : dskt::lengths()) {
            SCOPED_TRACE(dskt::trace(isa, n));
            Rng rng(n);
            auto x = rng.uniform_vec(n, -12.0f, 12.0f);
            if (n > 3) x[0] = 0.0f, x[1] = -100.0f, x[2] = 100.0f;
            auto dy = rng.uniform_vec(n, -1.0f, 1.0f);
            std::vector<float> y(n), dx(n);
            ASSERT_EQ(dsk_cpu_gelu_fwd(x.data(), y.data(), n), DSK_OK);
            ASSERT_EQ(dsk_cpu_gelu_bwd(x.data(), dy.data(), dx.data(), n), DSK_OK);
            auto xd = to_d(x), dyd = to_d(dy);
            std::vector<double> yr(n), dxr(n);
            dsk_ref_gelu_fwd(xd.data(), yr.data(), n);
            dsk_ref_gelu_bwd(xd.data(), dyd.data(), dxr.data(), n);
            EXPECT_LE(worst(y, yr, 1e-6, 4e-6), 1.0);
            EXPECT_LE(worst(dx, dxr, 2e-6, 4e-6), 1.0);
            // In place: dx over dy.
            ASSERT_EQ(dsk_cpu_gelu_bwd(x.data(), dy.data(), dy.data(), n), DSK_OK);
            EXPECT_EQ(dy, dx);
        }
    }
    // NaN stays NaN (and, under UBSan, the exp's bit building stays defined).
    const float nan_in[3] = {NAN, 1.0f, NAN};
    float nan_out[3], nan_dx[3];
    ASSERT_EQ(dsk_cpu_gelu_fwd(nan_in, nan_out, 3), DSK_OK);
    ASSERT_EQ(dsk_cpu_gelu_bwd(nan_in, nan_in, nan_dx, 3), DSK_OK);
    EXPECT_TRUE(std::isnan(nan_out[0]) && std::isnan(nan_out[2]) && std::isnan(nan_dx[0]));
    EXPECT_FALSE(std::isnan(nan_out[1]));
    EXPECT_EQ(dsk_cpu_gelu_fwd(nullptr, nullptr, 3), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("dsk_gelu_fwd: x is NULL"), std::string::npos);
    EXPECT_EQ(dsk_cpu_gelu_fwd(nullptr, nullptr, 0), DSK_OK);
}

// ---- dropout ------------------------------------------------------------------------

TEST(NnOpsKernels, DropoutMatchesReferenceAtAnyOffset) {
    const dsk_dropout_key base{0x0123456789abcdefull, 0x100000007ull, 42u, 0u, 0u};
    for (int isa : dskt::isas()) {
        IsaGuard guard(isa);
        for (size_t n : dskt::lengths()) {
            for (uint64_t offset : {uint64_t{0}, uint64_t{3}, (uint64_t{1} << 34) + 1}) {
                if (offset != 0 && n > 70000) continue;  // the reference is slow; one offset covers the big sizes
                SCOPED_TRACE(dskt::trace(isa, n) + " offset=" + std::to_string(offset));
                dsk_dropout_key key = base;
                key.offset = offset;
                Rng rng(n + offset);
                auto x = rng.uniform_vec(n, 0.5f, 2.0f);  // never 0: a zero output means dropped
                std::vector<float> y(n);
                ASSERT_EQ(dsk_cpu_dropout_fwd(x.data(), y.data(), n, 0.3f, &key), DSK_OK) << dsk_last_error();
                auto xd = to_d(x);
                std::vector<double> yr(n);
                dsk_ref_dropout_fwd(xd.data(), yr.data(), n, 0.3f, &key);
                size_t mismatched_mask = 0;
                for (size_t i = 0; i < n; ++i) mismatched_mask += (y[i] == 0.0f) != (yr[i] == 0.0);
                EXPECT_EQ(mismatched_mask, 0u);
                EXPECT_LE(worst(y, yr, 1e-30, 1e-6), 1.0);
                // The same elements as part of a longer buffer starting earlier.
                if (offset >= 3) {
                    dsk_dropout_key k2 = key;
                    k2.offset = offset - 3;
                    std::vector<float> x2(n + 3, 1.0f), y2(n + 3);
                    std::memcpy(x2.data() + 3, x.data(), n * sizeof(float));
                    ASSERT_EQ(dsk_cpu_dropout_fwd(x2.data(), y2.data(), n + 3, 0.3f, &k2), DSK_OK);
                    EXPECT_EQ(0, std::memcmp(y2.data() + 3, y.data(), n * sizeof(float)));
                }
                // Backward and in-place use the same mask.
                std::vector<float> dx(n);
                ASSERT_EQ(dsk_cpu_dropout_bwd(x.data(), dx.data(), n, 0.3f, &key), DSK_OK);
                EXPECT_EQ(dx, y);
                ASSERT_EQ(dsk_cpu_dropout_apply(x.data(), n, 0.3f, &key), DSK_OK);
                EXPECT_EQ(x, y);
            }
        }
    }
}

TEST(NnOpsKernels, DropoutKeptFractionAndKeySeparation) {
    const size_t n = 1u << 20;
    const float p = 0.1f;
    std::vector<float> ones(n, 1.0f);
    auto mask = [&](const dsk_dropout_key& k) {
        std::vector<float> y(n);
        EXPECT_EQ(dsk_cpu_dropout_fwd(ones.data(), y.data(), n, p, &k), DSK_OK);
        std::vector<uint8_t> m(n);
        for (size_t i = 0; i < n; ++i) m[i] = y[i] != 0.0f;
        return m;
    };
    const dsk_dropout_key k0{1234, 7, 3, 0, 0};
    const auto m0 = mask(k0);
    size_t kept = 0;
    for (uint8_t b : m0) kept += b;
    const double mean = n * (1.0 - p), sigma = std::sqrt(n * p * (1.0 - p));
    EXPECT_LE(std::fabs(kept - mean), 5 * sigma) << "kept " << kept << " of " << n;
    // Kept values are scaled by 1/(1-p).
    std::vector<float> y(16);
    ASSERT_EQ(dsk_cpu_dropout_fwd(ones.data(), y.data(), 16, p, &k0), DSK_OK);
    for (float v : y) EXPECT_TRUE(v == 0.0f || v == 1.0f / (1.0f - p)) << v;

    EXPECT_EQ(mask(k0), m0);  // same key, same mask
    // Another module, forward, seed, or the high half of the forward index:
    // independent masks differ in a fraction 2p(1-p) of the positions.
    auto k_mod = k0, k_fwd = k0, k_seed = k0, k_hi = k0;
    k_mod.module_id = 4;
    k_fwd.stream = 8;
    k_seed.seed = 1235;
    k_hi.stream = k0.stream | (uint64_t{1} << 40);
    for (const auto& k : {k_mod, k_fwd, k_seed, k_hi}) {
        const auto m = mask(k);
        size_t diff = 0;
        for (size_t i = 0; i < n; ++i) diff += m[i] != m0[i];
        const double q = 2 * p * (1 - p);
        EXPECT_LE(std::fabs(diff - n * q), 5 * std::sqrt(n * q * (1 - q))) << "differing " << diff;
    }
}

TEST(NnOpsKernels, DropoutMaskDoesNotDependOnTheThreadCount) {
    const size_t n = 300001;  // several OpenMP chunks
    const dsk_dropout_key k{77, 1, 2, 0, 5};
    std::vector<float> ones(n, 1.0f), y1(n), y4(n);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    ASSERT_EQ(dsk_cpu_dropout_fwd(ones.data(), y1.data(), n, 0.25f, &k), DSK_OK);
    omp_set_num_threads(4);
    ASSERT_EQ(dsk_cpu_dropout_fwd(ones.data(), y4.data(), n, 0.25f, &k), DSK_OK);
    omp_set_num_threads(saved);
    EXPECT_EQ(y1, y4);
}

TEST(NnOpsKernels, DropoutEdgeCasesAndRefusals) {
    const dsk_dropout_key k{1, 2, 3, 0, 0};
    std::vector<float> x = {1, 2, 3, 4, 5}, y(5, -1.0f);
    ASSERT_EQ(dsk_cpu_dropout_fwd(x.data(), y.data(), 5, 0.0f, &k), DSK_OK);
    EXPECT_EQ(y, x);  // p = 0 keeps everything, scale 1
    ASSERT_EQ(dsk_cpu_dropout_fwd(x.data(), y.data(), 5, 1.0f, &k), DSK_OK);
    EXPECT_EQ(y, std::vector<float>(5, 0.0f));  // p = 1 drops everything
    EXPECT_EQ(dsk_dropout_threshold(0.0f), 0u);
    EXPECT_EQ(dsk_dropout_threshold(0.5f), uint64_t{1} << 31);
    EXPECT_EQ(dsk_dropout_threshold(1.0f), uint64_t{1} << 32);

    EXPECT_EQ(dsk_cpu_dropout_fwd(x.data(), y.data(), 5, 1.5f, &k), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("p = 1.5 is not in [0, 1]"), std::string::npos);
    EXPECT_EQ(dsk_cpu_dropout_fwd(x.data(), y.data(), 5, NAN, &k), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(dsk_cpu_dropout_bwd(x.data(), y.data(), 5, 0.1f, nullptr), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("dsk_dropout_bwd: key is NULL"), std::string::npos);
    EXPECT_EQ(dsk_cpu_dropout_apply(nullptr, 5, 0.1f, &k), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("dsk_dropout_apply: x is NULL"), std::string::npos);
}

// ---- softmax cross-entropy -----------------------------------------------------------

TEST(NnOpsKernels, SoftmaxXentMatchesReference) {
    for (int isa : dskt::isas()) {
        IsaGuard guard(isa);
        for (auto [rows, V] : row_shapes()) {
            for (int tdt : {DSK_I32, DSK_I64}) {
                SCOPED_TRACE(dskt::trace(isa, rows * V) + " V=" + std::to_string(V) +
                             (tdt == DSK_I32 ? " i32" : " i64"));
                Rng rng(rows + 7 * V);
                auto l = rng.uniform_vec(rows * V, -8.0f, 8.0f);
                // Rows far from 0 (a naive exp would overflow to Inf).
                for (size_t j = 0; j < V; ++j) l[j] += 500.0f;
                std::vector<int64_t> t64(rows);
                for (size_t r = 0; r < rows; ++r) t64[r] = (r % 3 == 1) ? -100 : static_cast<int64_t>(rng.u32() % V);
                std::vector<int32_t> t32(t64.begin(), t64.end());
                const void* t = tdt == DSK_I32 ? static_cast<const void*>(t32.data()) : t64.data();
                std::vector<float> loss(rows), lse(rows), dl(rows * V);
                double sum = 0;
                int64_t count = -1;
                ASSERT_EQ(dsk_cpu_softmax_xent_fwd(l.data(), t, tdt, rows, V, -100, loss.data(), lse.data(), &sum,
                                                   &count),
                          DSK_OK)
                    << dsk_last_error();
                auto ld = to_d(l);
                std::vector<double> lser(rows), dlr(rows * V);
                const double sumr = dsk_ref_softmax_xent_fwd(ld.data(), t64.data(), rows, V, -100, lser.data());
                int64_t want_count = 0;
                for (int64_t v : t64) want_count += v != -100;
                EXPECT_EQ(count, want_count);
                EXPECT_NEAR(sum, sumr, 2e-5 * (1 + std::fabs(sumr)));
                EXPECT_LE(worst(lse, lser, 1e-5, 1e-6), 1.0);
                const float scale = count ? 0.7f / count : 0.0f;
                ASSERT_EQ(dsk_cpu_softmax_xent_bwd(l.data(), t, tdt, lse.data(), rows, V, -100, scale, dl.data()),
                          DSK_OK);
                dsk_ref_softmax_xent_bwd(ld.data(), t64.data(), rows, V, -100, scale, dlr.data());
                EXPECT_LE(worst(dl, dlr, 1e-6 * scale, 1e-4), 1.0);
            }
        }
    }
}

TEST(NnOpsKernels, SoftmaxXentRefusals) {
    const float l[6] = {1, 2, 3, 4, 5, 6};
    const int64_t bad[2] = {1, 3};
    double s;
    int64_t c;
    float lse[2], dl[6];
    EXPECT_EQ(dsk_cpu_softmax_xent_fwd(l, bad, DSK_I64, 2, 3, -100, nullptr, lse, &s, &c), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("targets[1] = 3 is outside [0, 3)"), std::string::npos)
        << dsk_last_error();
    const int32_t neg[2] = {-1, 0};
    EXPECT_EQ(dsk_cpu_softmax_xent_bwd(l, neg, DSK_I32, lse, 2, 3, -100, 1.0f, dl), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("targets[0] = -1"), std::string::npos) << dsk_last_error();
    EXPECT_EQ(dsk_cpu_softmax_xent_fwd(l, bad, DSK_F32, 2, 3, -100, nullptr, lse, &s, &c), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("target_dtype = 0"), std::string::npos);
    const int64_t good[2] = {0, 2};
    EXPECT_EQ(dsk_cpu_softmax_xent_fwd(l, good, DSK_I64, 2, 3, -100, nullptr, lse, nullptr, &c),
              DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("loss_sum is NULL"), std::string::npos) << dsk_last_error();
    // All rows ignored: sum 0 over count 0.
    const int64_t ign[2] = {-100, -100};
    ASSERT_EQ(dsk_cpu_softmax_xent_fwd(l, ign, DSK_I64, 2, 3, -100, nullptr, lse, &s, &c), DSK_OK);
    EXPECT_EQ(c, 0);
    EXPECT_EQ(s, 0.0);
}

// ---- elementwise and MSE -----------------------------------------------------------------

TEST(NnOpsKernels, AddAndMseMatchReference) {
    for (int isa : dskt::isas()) {
        IsaGuard guard(isa);
        for (size_t n : dskt::lengths()) {
            SCOPED_TRACE(dskt::trace(isa, n));
            Rng rng(n * 3);
            auto a = rng.uniform_vec(n, -2, 2), b = rng.uniform_vec(n, -2, 2);
            auto ad = to_d(a), bd = to_d(b);
            std::vector<float> y(n);
            std::vector<double> yr(n);
            ASSERT_EQ(dsk_cpu_add(a.data(), b.data(), y.data(), n), DSK_OK);
            dsk_ref_add(ad.data(), bd.data(), yr.data(), n);
            EXPECT_LE(worst(y, yr, 0, 1e-7), 1.0);
            auto y2 = a;
            ASSERT_EQ(dsk_cpu_add_inplace(y2.data(), b.data(), n), DSK_OK);
            EXPECT_EQ(y2, y);
            double s = -1;
            ASSERT_EQ(dsk_cpu_mse_fwd(a.data(), b.data(), n, &s), DSK_OK);
            const double sr = dsk_ref_mse_fwd(ad.data(), bd.data(), n);
            EXPECT_NEAR(s, sr, 1e-12 * sr);
            std::vector<float> d(n);
            ASSERT_EQ(dsk_cpu_mse_bwd(a.data(), b.data(), n, 0.5f, d.data()), DSK_OK);
            for (size_t i = 0; i < n; ++i) yr[i] = 0.5 * (ad[i] - bd[i]);
            EXPECT_LE(worst(d, yr, 1e-7, 1e-6), 1.0);
        }
    }
    float v[2] = {1, 2};
    EXPECT_EQ(dsk_cpu_add(v, nullptr, v, 2), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("dsk_add: b is NULL"), std::string::npos);
    EXPECT_EQ(dsk_cpu_add_inplace(nullptr, v, 2), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(dsk_cpu_mse_fwd(v, v, 2, nullptr), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("sum_sq is NULL"), std::string::npos);
}

TEST(NnOpsKernels, CpuTableHasTheNnEntries) {
    const dsk_backend* b = dsk_backend_cpu();
    const void* entries[] = {
        reinterpret_cast<const void*>(b->layernorm_fwd),    reinterpret_cast<const void*>(b->layernorm_bwd),
        reinterpret_cast<const void*>(b->layernorm_bwd_from_output), reinterpret_cast<const void*>(b->gelu_fwd),
        reinterpret_cast<const void*>(b->gelu_bwd),         reinterpret_cast<const void*>(b->dropout_fwd),
        reinterpret_cast<const void*>(b->dropout_bwd),      reinterpret_cast<const void*>(b->dropout_apply),
        reinterpret_cast<const void*>(b->softmax_xent_fwd), reinterpret_cast<const void*>(b->softmax_xent_bwd),
        reinterpret_cast<const void*>(b->mse_fwd),          reinterpret_cast<const void*>(b->mse_bwd),
        reinterpret_cast<const void*>(b->add),              reinterpret_cast<const void*>(b->add_inplace)};
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; ++i) EXPECT_NE(entries[i], nullptr) << i;
    // A call through the table computes.
    float a[3] = {1, 2, 3}, c[3] = {10, 20, 30}, y[3];
    ds::cpu_kernels().add(a, c, y, 3);
    EXPECT_EQ(y[2], 33.0f);
}
