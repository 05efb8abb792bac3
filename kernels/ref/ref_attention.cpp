// Scalar double-precision reference of the attention kernels: the formulas
// of nn_attention.h written out plainly (materialised S, A, D per head), the
// oracle of the kernel tests and the float64 model of the gradient checks.
// The dropout multipliers come from nn_ops.h's reference dropout (its own
// Philox) applied to a tensor of ones.
#include <cmath>
#include <vector>

#include "nn_attention.h"

namespace {
struct RefDims {
    int64_t B, T, C, H, hd;
};
RefDims dims(const dsk_attention_args* a) {
    return {a->batch, a->seq, a->channels, a->heads, a->channels / a->heads};
}
bool visible(const dsk_attention_args* a, int64_t i, int64_t j) {
    return a->causal == 0 || j <= i;
}

// A for head (b, h) into A[T*T] (0 where masked).
void ref_probs(const double* qkv, const dsk_attention_args* a, int64_t b, int64_t h, std::vector<double>& A) {
    const RefDims d = dims(a);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d.hd));
    auto at = [&](int64_t t, int part, int64_t k) { return qkv[(b * d.T + t) * 3 * d.C + part * d.C + h * d.hd + k]; };
    for (int64_t i = 0; i < d.T; ++i) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < d.T; ++j) {
            double s = 0.0;
            for (int64_t k = 0; k < d.hd; ++k) s += at(i, 0, k) * at(j, 1, k);
            A[i * d.T + j] = s * scale;
            if (visible(a, i, j) && A[i * d.T + j] > mx) mx = A[i * d.T + j];
        }
        double sum = 0.0;
        for (int64_t j = 0; j < d.T; ++j) {
            const double e = visible(a, i, j) ? std::exp(A[i * d.T + j] - mx) : 0.0;
            A[i * d.T + j] = e;
            sum += e;
        }
        for (int64_t j = 0; j < d.T; ++j) A[i * d.T + j] /= sum;
    }
}

// The dropout multipliers of head (b, h): F[i*T + j] = 0 or 1/(1-p) (1 without dropout).
void ref_factors(const dsk_attention_args* a, int64_t b, int64_t h, std::vector<double>& F) {
    const RefDims d = dims(a);
    std::vector<double> ones(F.size(), 1.0);
    if (!(a->dropout_p > 0.0f)) {
        F = ones;
        return;
    }
    dsk_dropout_key k = a->dropout_key;
    k.offset += static_cast<uint64_t>((b * d.H + h) * d.T * d.T);
    dsk_ref_dropout_fwd(ones.data(), F.data(), F.size(), static_cast<double>(a->dropout_p), &k);
}
}  // namespace

extern "C" void dsk_ref_attention_forward(const double* qkv, double* out, double* probs, const dsk_attention_args* a) {
    const RefDims d = dims(a);
    std::vector<double> A(static_cast<size_t>(d.T * d.T)), F(A.size());
    for (int64_t b = 0; b < d.B; ++b)
        for (int64_t h = 0; h < d.H; ++h) {
            ref_probs(qkv, a, b, h, A);
            ref_factors(a, b, h, F);
            if (probs != nullptr)
                for (int64_t e = 0; e < d.T * d.T; ++e) probs[(b * d.H + h) * d.T * d.T + e] = A[e];
            for (int64_t i = 0; i < d.T; ++i)
                for (int64_t k = 0; k < d.hd; ++k) {
                    double o = 0.0;
                    for (int64_t j = 0; j < d.T; ++j)
                        o += A[i * d.T + j] * F[i * d.T + j] * qkv[(b * d.T + j) * 3 * d.C + 2 * d.C + h * d.hd + k];
                    out[(b * d.T + i) * d.C + h * d.hd + k] = o;
                }
        }
}

extern "C" void dsk_ref_attention_backward(const double* qkv, const double* dout, double* dqkv,
                                           const dsk_attention_args* a) {
    const RefDims d = dims(a);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d.hd));
    const int64_t T = d.T;
    std::vector<double> A(static_cast<size_t>(T * T)), dA(A.size()), F(A.size());
    auto idx = [&](int64_t b, int64_t t, int part, int64_t h, int64_t k) {
        return (b * T + t) * 3 * d.C + part * d.C + h * d.hd + k;
    };
    for (int64_t e = 0; e < d.B * T * 3 * d.C; ++e) dqkv[e] = 0.0;
    for (int64_t b = 0; b < d.B; ++b)
        for (int64_t h = 0; h < d.H; ++h) {
            ref_probs(qkv, a, b, h, A);
            ref_factors(a, b, h, F);
            // dD[i][j] = Σ_k dO[i][k] V[j][k];  dA = dD * f;  dV[j][k] = Σ_i A f dO[i][k]
            for (int64_t i = 0; i < T; ++i)
                for (int64_t j = 0; j < T; ++j) {
                    const double f = F[i * T + j];
                    double dd = 0.0;
                    for (int64_t k = 0; k < d.hd; ++k)
                        dd += dout[(b * T + i) * d.C + h * d.hd + k] * qkv[idx(b, j, 2, h, k)];
                    dA[i * T + j] = dd * f;
                    for (int64_t k = 0; k < d.hd; ++k)
                        dqkv[idx(b, j, 2, h, k)] += A[i * T + j] * f * dout[(b * T + i) * d.C + h * d.hd + k];
                }
            // dS = A (dA - rowsum(dA A)); dQ = scale dS K; dK = scale dSᵀ Q
            for (int64_t i = 0; i < T; ++i) {
                double rs = 0.0;
                for (int64_t j = 0; j < T; ++j) rs += dA[i * T + j] * A[i * T + j];
                for (int64_t j = 0; j < T; ++j) {
                    const double ds = A[i * T + j] * (dA[i * T + j] - rs) * scale;
                    for (int64_t k = 0; k < d.hd; ++k) {
                        dqkv[idx(b, i, 0, h, k)] += ds * qkv[idx(b, j, 1, h, k)];
                        dqkv[idx(b, j, 1, h, k)] += ds * qkv[idx(b, i, 0, h, k)];
                    }
                }
            }
        }
}
