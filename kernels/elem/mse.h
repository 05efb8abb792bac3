// The MSE loss's per-element code (nn_ops.h), shared by kernels/cuda/mse.cu
// and the host tests: the forward's term, summed in double by the two-stage
// reduction of reduce_plan.h (red_emulate reproduces the device's order), and
// the backward's element, the CPU kernel's expression (equal bit for bit).
#pragma once

#include <cstddef>

#include "hd.h"

namespace ds::kernels {

// (pred - target)^2 in double, as the CPU's sq_diff_sum.
DSK_HD inline double mse_term(const float* pred, const float* target, size_t i) {
    const double d = static_cast<double>(pred[i]) - static_cast<double>(target[i]);
    return d * d;
}

// dpred = scale * (pred - target).
DSK_HD inline float mse_grad_elem(float pred, float target, float scale) { return scale * (pred - target); }

}  // namespace ds::kernels
