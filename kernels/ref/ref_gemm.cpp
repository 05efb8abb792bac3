// Scalar references for dsk_cpu_gemm: the textbook triple loop, in double
// (the float64 oracle of the gradient checks) and on float data with double
// sums. beta 0 does not read C.
#include "nn_gemm.h"

namespace {

template <class T, class Acc>
void ref(int ta, int tb, int64_t m, int64_t n, int64_t k, Acc alpha, const T* a, int64_t lda, const T* b,
         int64_t ldb, Acc beta, T* c, int64_t ldc) {
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            Acc s = 0;
            for (int64_t p = 0; p < k; ++p) {
                const Acc x = ta ? a[p * lda + i] : a[i * lda + p];
                const Acc y = tb ? b[j * ldb + p] : b[p * ldb + j];
                s += x * y;
            }
            const Acc old = beta == 0 ? Acc(0) : beta * static_cast<Acc>(c[i * ldc + j]);
            c[i * ldc + j] = static_cast<T>(alpha * s + old);
        }
}

}  // namespace

extern "C" void dsk_ref_gemm_f64(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                                 const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
                                 int64_t ldc) {
    ref<double, double>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

extern "C" void dsk_ref_gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                             int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    ref<float, double>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
