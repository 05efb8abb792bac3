// Scalar float64 references for add and MSE (nn_ops.h).
#include "nn_ops.h"

extern "C" void dsk_ref_add(const double* a, const double* b, double* y, size_t n) {
    for (size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

extern "C" double dsk_ref_mse_fwd(const double* pred, const double* target, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; ++i) s += (pred[i] - target[i]) * (pred[i] - target[i]);
    return s;
}
