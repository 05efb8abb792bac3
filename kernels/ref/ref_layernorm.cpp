// Scalar float64 reference for the LayerNorm kernels (nn_ops.h): the
// textbook formulas, one row at a time.
#include <cmath>
#include <vector>

#include "nn_ops.h"

extern "C" void dsk_ref_layernorm_fwd(const double* x, const double* gamma, const double* beta, double* y,
                                      double* mean, double* rstd, size_t rows, size_t dim, double eps) {
    for (size_t r = 0; r < rows; ++r) {
        const double* xr = x + r * dim;
        double mu = 0.0;
        for (size_t j = 0; j < dim; ++j) mu += xr[j];
        mu /= static_cast<double>(dim);
        double var = 0.0;
        for (size_t j = 0; j < dim; ++j) var += (xr[j] - mu) * (xr[j] - mu);
        var /= static_cast<double>(dim);
        const double rs = 1.0 / std::sqrt(var + eps);
        for (size_t j = 0; j < dim; ++j) {
            const double h = (xr[j] - mu) * rs;
            y[r * dim + j] = gamma != nullptr ? h * gamma[j] + beta[j] : h;
        }
        if (mean != nullptr) mean[r] = mu;
        if (rstd != nullptr) rstd[r] = rs;
    }
}

extern "C" void dsk_ref_layernorm_bwd(const double* dy, const double* x, const double* mean, const double* rstd,
                                      const double* gamma, double* dx, double* dgamma, double* dbeta, size_t rows,
                                      size_t dim) {
    std::vector<double> h(dim), g(dim);
    for (size_t r = 0; r < rows; ++r) {
        double sg = 0.0, sgh = 0.0;
        for (size_t j = 0; j < dim; ++j) {
            const size_t i = r * dim + j;
            h[j] = (x[i] - mean[r]) * rstd[r];
            g[j] = gamma != nullptr ? dy[i] * gamma[j] : dy[i];
            sg += g[j];
            sgh += g[j] * h[j];
            if (dgamma != nullptr) {
                dgamma[j] += dy[i] * h[j];
                dbeta[j] += dy[i];
            }
        }
        const double n = static_cast<double>(dim);
        for (size_t j = 0; j < dim; ++j) dx[r * dim + j] = rstd[r] * (g[j] - sg / n - h[j] * sgh / n);
    }
}
