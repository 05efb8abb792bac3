// The nn per-element code the CUDA kernels run, on the host:
//  * dropout_block (kernels/elem/dropout.h), run for every Philox block of a
//    buffer as the CUDA threads run it, draws the CPU kernel's mask bit for
//    bit at stream offsets that are and are not multiples of 4 and at
//    lengths 0..9 around the block size, and equals the float64 reference;
//  * gelu_fwd_elem / gelu_bwd_elem (kernels/elem/exp_gelu.h) against the
//    float64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "elem/dropout.h"
#include "elem/exp_gelu.h"
#include "nn_ops.h"

namespace {

TEST(CudaNnElemDropout, BlocksDrawTheCpuMaskAtAnyOffset) {
    std::mt19937 r(3);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{4}, uint64_t{5}, (uint64_t{1} << 34) + 2})
        for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{5}, size_t{9}, size_t{1001}})
            for (float p : {0.1f, 0.5f}) {
                dsk_dropout_key key{0x123456789ABCDEFull, 7 + (uint64_t{3} << 32), 42, 0, offset};
                std::vector<float> x(n), y(n, -99.0f), cpu(n, -98.0f);
                for (auto& v : x) v = u(r);
                if (n > 2) x[1] = INFINITY;
                const uint32_t thr = static_cast<uint32_t>(dsk_dropout_threshold(p));
                const float scale = 1.0f / (1.0f - p);
                const DropoutStream st = dropout_stream(key);
                const uint64_t blocks = dropout_blocks_for(offset, n);
                for (uint64_t b = 0; b < blocks; ++b) dropout_block(x.data(), y.data(), n, offset, b, st, thr, scale);
                ASSERT_EQ(dsk_cpu_dropout_fwd(x.data(), cpu.data(), n, p, &key), DSK_OK);
                // n == 0: empty vectors' data() may be null, which memcmp must not get.
                if (n > 0)
                    EXPECT_EQ(std::memcmp(y.data(), cpu.data(), n * sizeof(float)), 0)
                        << "offset " << offset << " n " << n << " p " << p;
                std::vector<double> xd(x.begin(), x.end()), yd(n);
                dsk_ref_dropout_fwd(xd.data(), yd.data(), n, p, &key);
                for (size_t i = 0; i < n; ++i) {
                    if (std::isnan(yd[i]))
                        EXPECT_TRUE(std::isnan(y[i]));
                    else if (std::isinf(yd[i]))
                        EXPECT_EQ(y[i], yd[i]) << i;
                    else
                        EXPECT_NEAR(y[i], yd[i], 1e-6 * std::fabs(yd[i])) << i;
                }
            }
}

TEST(CudaNnElemGelu, ElementFunctionsMatchReference) {
    std::vector<double> xs;
    for (double v = -12.0; v <= 12.0; v += 0.01) xs.push_back(v);
    for (double v : {0.0, -0.0, 1e-30, -1e-30, 40.0, -40.0, 1e4, -1e4}) xs.push_back(v);
    for (size_t i = 0; i < xs.size(); ++i) {
        const float x = static_cast<float>(xs[i]);
        const double xr = x;  // the reference at the float input
        double yr, dxr, one = 1.0;
        dsk_ref_gelu_fwd(&xr, &yr, 1);
        dsk_ref_gelu_bwd(&xr, &one, &dxr, 1);
        EXPECT_NEAR(gelu_fwd_elem(x), yr, 1e-6 + 4e-6 * std::fabs(yr)) << x;
        EXPECT_NEAR(gelu_bwd_elem(x, 1.0f), dxr, 2e-6 + 4e-6 * std::fabs(dxr)) << x;
    }
}

}  // namespace
