// dsk_scale against its scalar reference and exact expectations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "test_kernels_common.h"

TEST(KernelScale, Fp32IsExactProductAndMatchesReference) {
    for (size_t n : {1u, 7u, 17u, 1000u, 70001u}) {
        std::mt19937 rng(static_cast<unsigned>(n));
        std::normal_distribution<float> nd;
        std::vector<float> a(n), b;
        for (auto& v : a) v = nd(rng);
        b = a;
        std::vector<float> want(n);
        // a float product rounded once == the exact (double) product rounded to float
        for (size_t i = 0; i < n; ++i)
            want[i] = static_cast<float>(static_cast<double>(a[i]) * static_cast<double>(0.37f));
        dskt::kern().scale(a.data(), DSK_F32, 0.37f, n);
        dsk_ref_scale(b.data(), DSK_F32, 0.37f, n);
        ASSERT_EQ(0, std::memcmp(a.data(), b.data(), n * 4)) << n;
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(a[i], want[i]) << i;
    }
}

TEST(KernelScale, SixteenBitMatchesReferenceBitwise) {
    for (int dtype : {DSK_F16, DSK_BF16}) {
        for (size_t n : {1u, 5u, 4097u, 100003u}) {
            std::mt19937 rng(static_cast<unsigned>(n) + dtype);
            std::normal_distribution<float> nd;
            std::vector<float> f(n);
            for (auto& v : f) v = nd(rng);
            std::vector<uint16_t> a(n), b(n);
            dskt::kern().convert(f.data(), DSK_F32, a.data(), dtype, n);
            b = a;
            std::vector<float> orig(n);
            dskt::kern().convert(a.data(), dtype, orig.data(), DSK_F32, n);
            dskt::kern().scale(a.data(), dtype, 0.5f, n);
            dsk_ref_scale(b.data(), dtype, 0.5f, n);
            ASSERT_EQ(0, std::memcmp(a.data(), b.data(), n * 2)) << dtype << " " << n;
            // halving is exact in both formats away from the subnormal range
            std::vector<float> back(n);
            dskt::kern().convert(a.data(), dtype, back.data(), DSK_F32, n);
            for (size_t i = 0; i < n; ++i)
                if (std::fabs(orig[i]) > 1e-3f) ASSERT_EQ(back[i], orig[i] * 0.5f) << i;
        }
    }
}
