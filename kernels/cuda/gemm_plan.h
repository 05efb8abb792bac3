// The row-major products of nn_gemm.h as one cuBLAS (column-major) call: a
// pure host function, no CUDA, so the mapping is tested on every CI machine
// (tests/unit/cuda_gemm_plan_test.cpp interprets plans with a column-major
// loop and compares with the float64 reference).
//
// A row-major matrix [r, c] with leading dimension ld is, byte for byte, the
// column-major matrix [c, r] with the same ld: its transpose. So row-major
// C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, i.e. one
// column-major GEMM with B's memory first and A's second, each keeping its
// own trans flag, the sizes m and n exchanged, and every leading dimension
// and batch stride unchanged. No data moves.
#pragma once

#include <cstdint>

namespace ds::kernels::cu {

struct GemmPlan {
    // Which caller operand is cuBLAS's first (its "A"): always B (1) for a
    // row-major product; kept explicit so that the test reads the mapping
    // rather than assuming it.
    int first_is_b = 1;
    bool trans_first = false, trans_second = false;  // cuBLAS transa, transb (true: CUBLAS_OP_T)
    int64_t m = 0, n = 0, k = 0;                     // cuBLAS's m, n, k (column-major C is m x n)
    int64_t ld_first = 0, ld_second = 0, ldc = 0;
    int64_t stride_first = 0, stride_second = 0, stride_c = 0;  // elements between batch items
    int64_t batch = 1;
};

// The plan of C = alpha op(A) op(B) + beta C (row-major, nn_gemm.h's
// arguments, already checked by gemm::check_gemm).
inline GemmPlan plan_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                          int64_t ldc, int64_t batch = 1, int64_t stride_a = 0, int64_t stride_b = 0,
                          int64_t stride_c = 0) {
    GemmPlan p;
    p.first_is_b = 1;
    p.trans_first = trans_b;
    p.trans_second = trans_a;
    p.m = n;
    p.n = m;
    p.k = k;
    p.ld_first = ldb;
    p.ld_second = lda;
    p.ldc = ldc;
    p.stride_first = stride_b;
    p.stride_second = stride_a;
    p.stride_c = stride_c;
    p.batch = batch;
    return p;
}

// The operand cuBLAS reads first / second under plan p.
template <class T>
const T* plan_first(const GemmPlan& p, const T* a, const T* b) {
    return p.first_is_b ? b : a;
}
template <class T>
const T* plan_second(const GemmPlan& p, const T* a, const T* b) {
    return p.first_is_b ? a : b;
}

}  // namespace ds::kernels::cu
