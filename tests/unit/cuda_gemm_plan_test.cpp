// The row-major -> cuBLAS (column-major) mapping of the CUDA GEMMs
// (kernels/cuda/gemm_plan.h), checked on the host in every build: each plan
// is executed by a column-major GEMM written from cuBLAS's contract (op(X)
// m x k, op(Y) k x n, C m x n, column-major with the plan's leading
// dimensions and batch strides), reading the operands through bounds-checked
// accessors sized to exactly the spans the CPU argument check validated, and
// compared with the float64 row-major reference dsk_ref_gemm_f64 (same
// summation order, so equal bit for bit). Every trans combination, tight and
// padded leading dimensions, batches with and without shared operands
// (stride 0), sizes of 1, beta 0 over NaN. Also: the plan satisfies cuBLAS's
// own argument rules (ld >= rows of the stored column-major matrix) whenever
// the row-major arguments pass the CPU's check (kernels/cpu/gemm_check.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu/gemm_check.h"
#include "cuda/gemm_plan.h"
#include "nn_gemm.h"

namespace {

using ds::kernels::cu::GemmPlan;
using ds::kernels::cu::plan_first;
using ds::kernels::cu::plan_gemm;
using ds::kernels::cu::plan_second;

// cuBLAS's column-major C = alpha op(X) op(Y) + beta C (beta 0: C not read),
// per batch item; .at() throws on any read outside the operand's span.
void colmajor_gemm(const GemmPlan& p, double alpha, const std::vector<double>& x, const std::vector<double>& y,
                   double beta, std::vector<double>& c) {
    for (int64_t bi = 0; bi < p.batch; ++bi) {
        const int64_t ox = bi * p.stride_first, oy = bi * p.stride_second, oc = bi * p.stride_c;
        for (int64_t j = 0; j < p.n; ++j)
            for (int64_t i = 0; i < p.m; ++i) {
                double s = 0;
                for (int64_t l = 0; l < p.k; ++l) {
                    const double xv = p.trans_first ? x.at(ox + l + i * p.ld_first) : x.at(ox + i + l * p.ld_first);
                    const double yv = p.trans_second ? y.at(oy + j + l * p.ld_second) : y.at(oy + l + j * p.ld_second);
                    s += yv * xv;  // the reference multiplies op(A) * op(B): the same product
                }
                double& e = c.at(oc + i + j * p.ldc);
                e = alpha * s + (beta == 0 ? 0.0 : beta * e);
            }
    }
}

// Elements of a row-major rows x cols operand with leading dimension ld, batch copies stride apart.
int64_t extent(int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
    if (rows == 0 || cols == 0 || batch == 0) return 0;
    return (batch - 1) * stride + (rows - 1) * ld + cols;
}

struct Case {
    int ta, tb;
    int64_t m, n, k, pad_a, pad_b, pad_c, batch;
    bool share_a, share_b;  // stride 0: one A (B) for every product
};

void run_case(const Case& t, double alpha, double beta) {
    SCOPED_TRACE(::testing::Message() << "ta " << t.ta << " tb " << t.tb << " m " << t.m << " n " << t.n << " k "
                                      << t.k << " pads " << t.pad_a << "," << t.pad_b << "," << t.pad_c << " batch "
                                      << t.batch << " share " << t.share_a << t.share_b << " alpha " << alpha
                                      << " beta " << beta);
    const int64_t ra = t.ta ? t.k : t.m, ca = t.ta ? t.m : t.k;  // A as stored (row-major)
    const int64_t rb = t.tb ? t.n : t.k, cb = t.tb ? t.k : t.n;
    const int64_t lda = ca + t.pad_a, ldb = cb + t.pad_b, ldc = t.n + t.pad_c;
    const int64_t one_a = (ra - 1) * lda + ca, one_b = (rb - 1) * ldb + cb, one_c = (t.m - 1) * ldc + t.n;
    const int64_t sa = t.share_a ? 0 : one_a + 2, sb = t.share_b ? 0 : one_b + 1, sc = one_c + 3;
    const int64_t na = extent(ra, ca, lda, t.batch, sa), nb = extent(rb, cb, ldb, t.batch, sb);
    const int64_t nc = extent(t.m, t.n, ldc, t.batch, sc);

    // The row-major arguments pass the CPU's check (the same check the CUDA entries make).
    std::vector<float> fa(na), fb(nb), fc(nc);
    ds::kernels::gemm::Problem pr;
    pr.trans_a = t.ta, pr.trans_b = t.tb, pr.m = t.m, pr.n = t.n, pr.k = t.k;
    pr.alpha = static_cast<float>(alpha), pr.beta = static_cast<float>(beta);
    pr.a = fa.data(), pr.lda = lda, pr.b = fb.data(), pr.ldb = ldb, pr.c = fc.data(), pr.ldc = ldc;
    pr.batch = t.batch, pr.stride_a = sa, pr.stride_b = sb, pr.stride_c = sc;
    ASSERT_EQ(ds::kernels::gemm::check_gemm("plan_test", pr, t.ta, t.tb), DSK_OK) << dsk_last_error();

    const GemmPlan p = plan_gemm(t.ta, t.tb, t.m, t.n, t.k, lda, ldb, ldc, t.batch, sa, sb, sc);
    // cuBLAS's argument rules for this plan.
    EXPECT_EQ(p.m, t.n);
    EXPECT_EQ(p.n, t.m);
    EXPECT_EQ(p.k, t.k);
    EXPECT_GE(p.ld_first, std::max<int64_t>(1, p.trans_first ? p.k : p.m));
    EXPECT_GE(p.ld_second, std::max<int64_t>(1, p.trans_second ? p.n : p.k));
    EXPECT_GE(p.ldc, std::max<int64_t>(1, p.m));
    EXPECT_EQ(p.batch, t.batch);

    std::mt19937 rng(static_cast<uint32_t>(t.m * 131 + t.n * 17 + t.k * 7 + t.ta * 2 + t.tb));
    std::uniform_real_distribution<double> u(-2, 2);
    std::vector<double> a(na), b(nb), c0(nc);
    for (auto& v : a) v = u(rng);
    for (auto& v : b) v = u(rng);
    for (auto& v : c0) v = beta == 0 ? std::numeric_limits<double>::quiet_NaN() : u(rng);

    // The plan, executed column-major on the caller's buffers.
    std::vector<double> got = c0;
    colmajor_gemm(p, alpha, *plan_first(p, &a, &b), *plan_second(p, &a, &b), beta, got);

    // The row-major reference, product by product.
    std::vector<double> want = c0;
    for (int64_t bi = 0; bi < t.batch; ++bi)
        dsk_ref_gemm_f64(t.ta, t.tb, t.m, t.n, t.k, alpha, a.data() + bi * sa, lda, b.data() + bi * sb, ldb, beta,
                         want.data() + bi * sc, ldc);
    for (int64_t i = 0; i < nc; ++i) {
        if (std::isnan(c0[static_cast<size_t>(i)]) && std::isnan(want[static_cast<size_t>(i)])) {
            EXPECT_TRUE(std::isnan(got[static_cast<size_t>(i)])) << "gap element " << i << " was written";
            continue;
        }
        ASSERT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << "element " << i;
    }
}

TEST(CudaGemmPlan, EveryTransposeLayoutAndBatchMatchesTheReference) {
    int cases = 0;
    for (int ta : {0, 1})
        for (int tb : {0, 1})
            for (int64_t m : {1, 3, 7})
                for (int64_t n : {1, 4, 6})
                    for (int64_t k : {1, 5})
                        for (int64_t pad : {0, 3}) {
                            run_case({ta, tb, m, n, k, pad, pad ? 2 : 0, pad ? 1 : 0, 1, false, false}, 1.0, 0.0);
                            run_case({ta, tb, m, n, k, pad, 0, pad, 3, false, false}, 0.5, 1.5);
                            run_case({ta, tb, m, n, k, 0, pad, 0, 4, true, false}, -1.0, 0.0);
                            run_case({ta, tb, m, n, k, pad, pad, pad, 2, false, true}, 2.0, -0.25);
                            cases += 4;
                        }
    EXPECT_EQ(cases, 4 * 4 * 3 * 3 * 2 * 2);
}

// Degenerate sizes: the entry points run no cuBLAS call for m, n, k or batch
// 0 (cublas_gemm.h), but the plan stays well formed (sizes swapped, leading
// dimensions kept), and a 1 x 1 x 1 product with ld far above the minimum maps too.
TEST(CudaGemmPlan, DegenerateSizesKeepTheMapping) {
    const GemmPlan p = plan_gemm(true, false, 0, 5, 0, 1, 5, 5);
    EXPECT_EQ(p.m, 5);
    EXPECT_EQ(p.n, 0);
    EXPECT_EQ(p.k, 0);
    EXPECT_TRUE(p.trans_second);
    EXPECT_FALSE(p.trans_first);
    EXPECT_EQ(p.ld_first, 5);
    EXPECT_EQ(p.ld_second, 1);
    run_case({0, 1, 1, 1, 1, 9, 4, 11, 1, false, false}, 3.0, 0.0);
    run_case({1, 0, 1, 1, 1, 0, 0, 0, 5, true, true}, 1.0, 1.0);
}

}  // namespace
