// Scalar float64 reference for softmax cross-entropy (nn_ops.h).
#include <cmath>

#include "nn_ops.h"

namespace {
double row_lse(const double* l, size_t V) {
    double mx = l[0];
    for (size_t j = 1; j < V; ++j) mx = std::fmax(mx, l[j]);
    double s = 0.0;
    for (size_t j = 0; j < V; ++j) s += std::exp(l[j] - mx);
    return mx + std::log(s);
}
}  // namespace

extern "C" double dsk_ref_softmax_xent_fwd(const double* logits, const int64_t* targets, size_t rows, size_t V,
                                           int64_t ignore_index, double* lse_out) {
    double sum = 0.0;
    for (size_t r = 0; r < rows; ++r) {
        if (targets[r] == ignore_index) {
            if (lse_out != nullptr) lse_out[r] = 0.0;
            continue;
        }
        const double lse = row_lse(logits + r * V, V);
        if (lse_out != nullptr) lse_out[r] = lse;
        sum += lse - logits[r * V + static_cast<size_t>(targets[r])];
    }
    return sum;
}

extern "C" void dsk_ref_softmax_xent_bwd(const double* logits, const int64_t* targets, size_t rows, size_t V,
                                         int64_t ignore_index, double scale, double* dlogits) {
    for (size_t r = 0; r < rows; ++r) {
        const bool ignored = targets[r] == ignore_index;
        const double lse = ignored ? 0.0 : row_lse(logits + r * V, V);
        for (size_t j = 0; j < V; ++j) {
            const double onehot = !ignored && static_cast<int64_t>(j) == targets[r] ? 1.0 : 0.0;
            dlogits[r * V + j] = ignored ? 0.0 : scale * (std::exp(logits[r * V + j] - lse) - onehot);
        }
    }
}
