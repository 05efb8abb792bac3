// The MoE gate's Jitter kernel on the CPU (kernels/cpu/moe_jitter.cpp)
// against the float64 reference: one product (and one add) per element of a
// factor within a few float ulps of 0.99 + 0.02 u, so each value is within
// 6 * 2^-24 of the reference's magnitude; the factors are the published
// draws (0.99f + 0.02f * dsk_moe_uniform(first + i)) bit for bit, in
// [0.99, 1.01], from the key's offset on; bad arguments are named; the CPU
// table's entry is this kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend.h"
#include "nn_moe.h"

namespace {

std::vector<float> randv(size_t n, uint32_t seed) {
    std::mt19937 r(seed);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    std::vector<float> v(n);
    for (float& x : v) x = u(r);
    return v;
}

dsk_dropout_key some_key() {
    dsk_dropout_key k{};
    k.seed = 0x1234567890abcdefull;
    k.stream = 0x0000000500000003ull;
    k.module_id = 17;
    k.offset = 6;
    return k;
}

// n not a multiple of 4 (Philox blocks) and large enough for several threads' chunks.
constexpr int64_t kN = 10007;
constexpr uint64_t kFirst = 2 * 48 * 3;  // after a 48-token, 3-expert gating's draws

TEST(MoeJitterKernel, AgainstFloat64BothWays) {
    const dsk_dropout_key key = some_key();
    const std::vector<float> src = randv(kN, 1), acc0 = randv(kN, 2);
    const std::vector<double> src64(src.begin(), src.end());
    for (int accumulate : {0, 1}) {
        SCOPED_TRACE(accumulate ? "accumulate" : "overwrite");
        std::vector<float> got = acc0;
        ASSERT_EQ(dsk_cpu_moe_jitter(src.data(), kN, &key, kFirst, accumulate, got.data()), DSK_OK) << dsk_last_error();
        std::vector<double> ref(acc0.begin(), acc0.end());
        dsk_ref_moe_jitter(src64.data(), kN, &key, kFirst, accumulate, ref.data());
        for (int64_t i = 0; i < kN; ++i) {
            const double d = accumulate ? double(acc0[size_t(i)]) : 0.0;
            const double tol = 6.0 * std::ldexp(1.0, -24) * (std::fabs(double(src[size_t(i)])) + std::fabs(d));
            ASSERT_NEAR(got[size_t(i)], ref[size_t(i)], tol) << i;
        }
    }
}

TEST(MoeJitterKernel, FactorsAreThePublishedDraws) {
    dsk_dropout_key key = some_key();
    const std::vector<float> ones(kN, 1.0f);
    std::vector<float> f(kN);
    ASSERT_EQ(dsk_cpu_moe_jitter(ones.data(), kN, &key, kFirst, 0, f.data()), DSK_OK);
    for (int64_t i = 0; i < kN; ++i) {
        const float want = 0.99f + 0.02f * dsk_moe_uniform(&key, kFirst + uint64_t(i));
        ASSERT_EQ(f[size_t(i)], want) << i;
        ASSERT_TRUE(f[size_t(i)] >= 0.99f && f[size_t(i)] <= 1.01f) << i;
    }
    // The key's offset moves the stream: offset + 1 gives the factors one element on.
    key.offset += 1;
    std::vector<float> g(kN - 1);
    ASSERT_EQ(dsk_cpu_moe_jitter(ones.data(), kN - 1, &key, kFirst, 0, g.data()), DSK_OK);
    for (int64_t i = 0; i + 1 < kN; ++i) ASSERT_EQ(g[size_t(i)], f[size_t(i + 1)]) << i;
    // Through the CPU table: the same kernel.
    const dsk_backend* b = dsk_backend_cpu();
    ASSERT_NE(b->moe_jitter, nullptr);
    std::vector<float> t(kN - 1);
    ASSERT_EQ(b->moe_jitter(b, ones.data(), kN - 1, &key, kFirst, 0, t.data()), DSK_OK);
    EXPECT_EQ(t, g);
}

TEST(MoeJitterKernel, RefusesBadArgumentsByName) {
    const dsk_dropout_key key = some_key();
    std::vector<float> v(8, 1.0f);
    auto expect_named = [](int rc, const char* what) {
        EXPECT_EQ(rc, DSK_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(dsk_last_error()).find(what), std::string::npos) << dsk_last_error();
    };
    expect_named(dsk_cpu_moe_jitter(v.data(), 8, nullptr, 0, 0, v.data()), "dsk_moe_jitter: key is NULL");
    expect_named(dsk_cpu_moe_jitter(nullptr, 8, &key, 0, 0, v.data()), "src");
    expect_named(dsk_cpu_moe_jitter(v.data(), 8, &key, 0, 1, nullptr), "dst");
    expect_named(dsk_cpu_moe_jitter(v.data(), -1, &key, 0, 0, v.data()), "n = -1");
    EXPECT_EQ(v, std::vector<float>(8, 1.0f));  // nothing written
    EXPECT_EQ(dsk_cpu_moe_jitter(nullptr, 0, &key, 0, 0, nullptr), DSK_OK);
}

}  // namespace
