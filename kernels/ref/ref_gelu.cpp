// Scalar float64 reference for the GELU kernels (nn_ops.h), with libm's tanh.
#include <cmath>

#include "nn_ops.h"

namespace {
const double kC = std::sqrt(2.0 / M_PI);
constexpr double kA = 0.044715;
}  // namespace

extern "C" void dsk_ref_gelu_fwd(const double* x, double* y, size_t n) {
    for (size_t i = 0; i < n; ++i) y[i] = 0.5 * x[i] * (1.0 + std::tanh(kC * (x[i] + kA * x[i] * x[i] * x[i])));
}

extern "C" void dsk_ref_gelu_bwd(const double* x, const double* dy, double* dx, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        const double v = x[i];
        const double t = std::tanh(kC * (v + kA * v * v * v));
        const double dt = (1.0 - t * t) * kC * (1.0 + 3.0 * kA * v * v);
        dx[i] = dy[i] * (0.5 * (1.0 + t) + 0.5 * v * dt);
    }
}
