// The last-resort GEMM engine: C = alpha op(A) op(B) + beta C with op(B)
// packed block by block into a contiguous [kc, nc] panel, so the inner loop
// is a unit-stride axpy the compiler vectorizes whatever the transposes.
// OpenMP over rows of C; each element is summed in the same order for any
// thread count.
#include <algorithm>
#include <vector>

#include "gemm_engines.h"

namespace ds::kernels::gemm {

namespace {

constexpr int64_t kKc = 256;   // panel depth
constexpr int64_t kNc = 1024;  // panel width

void one(const Problem& p) {
    for (int64_t i = 0; i < p.m; ++i) {  // C = beta C first (beta 0: not read)
        float* row = p.c + i * p.ldc;
        if (p.beta == 0.0f)
            std::fill(row, row + p.n, 0.0f);
        else if (p.beta != 1.0f)
            for (int64_t j = 0; j < p.n; ++j) row[j] *= p.beta;
    }
    std::vector<float> panel(static_cast<size_t>(std::min(p.k, kKc) * std::min(p.n, kNc)));
    for (int64_t j0 = 0; j0 < p.n; j0 += kNc) {
        const int64_t nc = std::min(kNc, p.n - j0);
        for (int64_t p0 = 0; p0 < p.k; p0 += kKc) {
            const int64_t kc = std::min(kKc, p.k - p0);
            // panel[q][j] = op(B)[p0 + q][j0 + j]
            for (int64_t q = 0; q < kc; ++q)
                for (int64_t j = 0; j < nc; ++j)
                    panel[q * nc + j] = p.trans_b ? p.b[(j0 + j) * p.ldb + p0 + q] : p.b[(p0 + q) * p.ldb + j0 + j];
            const float* pb = panel.data();
#pragma omp parallel for schedule(static) if (p.m * nc * kc >= (1 << 18))
            for (int64_t i = 0; i < p.m; ++i) {
                float* crow = p.c + i * p.ldc + j0;
                for (int64_t q = 0; q < kc; ++q) {
                    const float aiq = p.alpha * (p.trans_a ? p.a[(p0 + q) * p.lda + i] : p.a[i * p.lda + p0 + q]);
                    const float* brow = pb + q * nc;
#pragma omp simd
                    for (int64_t j = 0; j < nc; ++j) crow[j] += aiq * brow[j];
                }
            }
        }
    }
}

}  // namespace

void blocked_gemm(const Problem& p) {
    for (int64_t i = 0; i < p.batch; ++i) one(batch_item(p, i));
}

}  // namespace ds::kernels::gemm
