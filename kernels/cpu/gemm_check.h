// Argument checks of the matrix products (kernels/nn_gemm.h), shared by the
// CPU entry points and their CUDA twins (kernels/cuda/gemm.cpp) so that both
// refuse the same arguments with the same messages (each names its kernel).
// Each returns DSK_OK or records the failure (dsk_last_error()) and returns
// DSK_ERR_INVALID_ARGUMENT. Host code only; no CUDA call.
#pragma once

#include <cstdint>

#include "gemm_engines.h"

namespace ds::kernels::gemm {

// trans flags 0 or 1; m, n, k, batch and the strides not negative; each
// operand's leading dimension at least max(1, its row length); A, B (unless
// alpha == 0: not read) and C non-NULL when they hold elements; every span
// within int64; with batch > 1, C's matrices disjoint (stride_c).
int check_gemm(const char* kernel, const Problem& p, int trans_a, int trans_b);

// Linear forward y[rows, out] = x[rows, in] w^T: sizes not negative, y
// non-NULL when it has elements, x and w (named w_name: "w", "w16") non-NULL
// when they are read (rows, in, out > 0).
int check_linear_fwd(const char* kernel, const void* x, const void* w, const char* w_name, const void* y,
                     int64_t rows, int64_t in, int64_t out);

// Linear backward: sizes not negative, rows*out, rows*in and out*in within
// int64, and dy, x, w, dx, dw non-NULL when they hold elements.
int check_linear_bwd(const char* kernel, const void* dy, const void* x, const void* w, const void* dx,
                     const void* dw, int64_t rows, int64_t in, int64_t out);

}  // namespace ds::kernels::gemm
