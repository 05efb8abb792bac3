// The MoE layer's row kernels on the CPU (kernels/cpu/moe_rows.cpp) against
// float64: gather and scatter-add are one product (and one add) per element,
// so they equal the float64 values rounded once (gather) or the fp32
// operations in float64 exactly rounded (scatter-add: fl(d + fl(w s)));
// the row dot within fp32 summation error; bad indices and NULL buffers are
// named and nothing is written; empty calls are no-ops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "nn_moe.h"

namespace {

std::vector<float> randv(size_t n, uint32_t seed) {
    std::mt19937 r(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = u(r);
    return v;
}

constexpr int64_t kS = 23, kC = 19, kN = 9;
const std::vector<int32_t> kIdx = {4, 0, 22, 7, 13, 1, 19, 8, 11};  // distinct, in [0, kS)

TEST(MoeRowsKernels, GatherScatterAddAndDotAgainstFloat64) {
    const std::vector<float> table = randv(kS * kC, 1), rows = randv(kN * kC, 2), scale = randv(kN, 3);
    for (const float* sc : {static_cast<const float*>(nullptr), scale.data()}) {
        SCOPED_TRACE(sc ? "scaled" : "unscaled");
        std::vector<float> out(kN * kC, -7.0f);
        ASSERT_EQ(dsk_cpu_moe_rows_gather(table.data(), kS, kC, kIdx.data(), sc, kN, out.data()), DSK_OK)
            << dsk_last_error();
        for (int64_t j = 0; j < kN; ++j)
            for (int64_t c = 0; c < kC; ++c) {
                const double w = sc ? double(sc[j]) : 1.0;
                ASSERT_EQ(out[size_t(j * kC + c)], float(w * double(table[size_t(kIdx[size_t(j)] * kC + c)])));
            }
        std::vector<float> acc = table;
        ASSERT_EQ(dsk_cpu_moe_rows_scatter_add(rows.data(), kN, kC, kIdx.data(), sc, kS, acc.data()), DSK_OK)
            << dsk_last_error();
        std::vector<char> hit(kS, 0);
        for (int64_t j = 0; j < kN; ++j) {
            hit[size_t(kIdx[size_t(j)])] = 1;
            for (int64_t c = 0; c < kC; ++c) {
                const float p = float((sc ? double(sc[j]) : 1.0) * double(rows[size_t(j * kC + c)]));
                const size_t at = size_t(kIdx[size_t(j)] * kC + c);
                ASSERT_EQ(acc[at], float(double(table[at]) + double(p))) << j << "," << c;
            }
        }
        for (int64_t s = 0; s < kS; ++s)
            if (!hit[size_t(s)])
                for (int64_t c = 0; c < kC; ++c) ASSERT_EQ(acc[size_t(s * kC + c)], table[size_t(s * kC + c)]);
    }
    std::vector<float> dot(kN);
    ASSERT_EQ(dsk_cpu_moe_rows_dot(table.data(), kS, kC, kIdx.data(), rows.data(), kN, dot.data()), DSK_OK);
    for (int64_t j = 0; j < kN; ++j) {
        double ref = 0.0, mag = 0.0;
        for (int64_t c = 0; c < kC; ++c) {
            const double p = double(table[size_t(kIdx[size_t(j)] * kC + c)]) * double(rows[size_t(j * kC + c)]);
            ref += p;
            mag += std::fabs(p);
        }
        EXPECT_NEAR(dot[size_t(j)], ref, double(kC) * std::ldexp(1.0, -23) * mag + 1e-30) << j;
    }
}

TEST(MoeRowsKernels, BadArgumentsAreNamedAndNothingIsWritten) {
    const std::vector<float> table = randv(kS * kC, 1);
    std::vector<float> out(kN * kC, 5.0f);
    std::vector<int32_t> idx = kIdx;
    idx[6] = int32_t(kS);
    EXPECT_EQ(dsk_cpu_moe_rows_gather(table.data(), kS, kC, idx.data(), nullptr, kN, out.data()),
              DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("idx[6] = 23 is outside [0, 23)"), std::string::npos)
        << dsk_last_error();
    for (float v : out) ASSERT_EQ(v, 5.0f);
    idx[6] = -1;
    std::vector<float> acc = table;
    EXPECT_EQ(dsk_cpu_moe_rows_scatter_add(out.data(), kN, kC, idx.data(), nullptr, kS, acc.data()),
              DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("dsk_moe_rows_scatter_add: idx[6] = -1"), std::string::npos)
        << dsk_last_error();
    EXPECT_EQ(acc, table);
    EXPECT_EQ(dsk_cpu_moe_rows_dot(table.data(), kS, kC, kIdx.data(), out.data(), kN, nullptr),
              DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("out is NULL"), std::string::npos) << dsk_last_error();
    EXPECT_EQ(dsk_cpu_moe_rows_gather(nullptr, kS, kC, kIdx.data(), nullptr, kN, out.data()), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("src is NULL"), std::string::npos) << dsk_last_error();
    EXPECT_EQ(dsk_cpu_moe_rows_gather(table.data(), kS, -1, kIdx.data(), nullptr, kN, out.data()),
              DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("negative size"), std::string::npos) << dsk_last_error();
    // Nothing to do: no pointer is read.
    EXPECT_EQ(dsk_cpu_moe_rows_gather(nullptr, 0, kC, nullptr, nullptr, 0, nullptr), DSK_OK);
    EXPECT_EQ(dsk_cpu_moe_rows_dot(nullptr, 0, kC, nullptr, nullptr, 0, nullptr), DSK_OK);
}

}  // namespace
