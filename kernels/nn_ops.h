/*
 * nn_ops.h — the built-in layers' pointwise and row-wise kernels (issue 11):
 * LayerNorm, GELU (tanh approximation), dropout with a counter-based RNG,
 * softmax cross-entropy, MSE, and the residual adds. All fp32, rows of
 * `dim` contiguous elements, row-major. Conventions as kernels.h: every
 * dsk_cpu_* entry point is noexcept, returns DSK_OK or
 * DSK_ERR_INVALID_ARGUMENT with a message for dsk_last_error() naming the
 * kernel and the argument; the library reaches them through the backend
 * table (backend.h) and ds::Kernels. Each has a scalar float64 twin
 * dsk_ref_* (kernels/ref/ref_<name>.cpp) that the tests use as the oracle;
 * the references take double arrays and check nothing.
 *
 * Pointers may be NULL only where an argument says "nullable" or the count
 * of elements is 0. Gradient outputs for parameters (dgamma, dbeta) are
 * ADDED INTO (the layer's owner zeroes them); activation gradients are
 * overwritten.
 */
#ifndef DS_KERNELS_NN_OPS_H
#define DS_KERNELS_NN_OPS_H

#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- LayerNorm ---------------------------------------------------------
 * Per row: mean = sum(x)/dim, var = sum((x-mean)^2)/dim (biased, as torch),
 * rstd = 1/sqrt(var + eps), xhat = (x - mean)*rstd,
 * y = gamma*xhat + beta (gamma, beta nullable together: no affine).
 * mean, rstd (nullable: eval) receive the per-row statistics backward needs.
 */
int dsk_cpu_layernorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                          float* rstd, size_t rows, size_t dim, float eps) DSK_NOEXCEPT;
/** Backward from the saved input: g = dy*gamma (dy without affine),
 *  dx = rstd * (g - mean_j(g) - xhat * mean_j(g*xhat));
 *  dgamma[j] += sum_rows dy*xhat, dbeta[j] += sum_rows dy (both nullable
 *  together; required when gamma is given). dx may alias dy. */
int dsk_cpu_layernorm_bwd(const float* dy, const float* x, const float* mean, const float* rstd,
                          const float* gamma, float* dx, float* dgamma, float* dbeta, size_t rows,
                          size_t dim) DSK_NOEXCEPT;
/** As dsk_cpu_layernorm_bwd, but xhat is recovered from the forward's OUTPUT
 *  y: xhat = (y - beta)/gamma (xhat = y without affine), so the input need
 *  not be kept (DeepSpeed's normalize_invertible). A gamma element equal to
 *  0 makes xhat unrecoverable: DSK_ERR_INVALID_ARGUMENT naming the index. */
int dsk_cpu_layernorm_bwd_from_output(const float* dy, const float* y, const float* rstd, const float* gamma,
                                      const float* beta, float* dx, float* dgamma, float* dbeta, size_t rows,
                                      size_t dim) DSK_NOEXCEPT;

void dsk_ref_layernorm_fwd(const double* x, const double* gamma, const double* beta, double* y, double* mean,
                           double* rstd, size_t rows, size_t dim, double eps);
void dsk_ref_layernorm_bwd(const double* dy, const double* x, const double* mean, const double* rstd,
                           const double* gamma, double* dx, double* dgamma, double* dbeta, size_t rows,
                           size_t dim);

/* ---- GELU, tanh approximation (GPT-2, DeepSpeed's transformer kernels) --
 * y = 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))).
 * The tanh comes from a vectorisable exp (relative error ~1e-7). */
int dsk_cpu_gelu_fwd(const float* x, float* y, size_t n) DSK_NOEXCEPT;
/** dx = dy * gelu'(x), from the forward's INPUT x. dx may alias dy. */
int dsk_cpu_gelu_bwd(const float* x, const float* dy, float* dx, size_t n) DSK_NOEXCEPT;

void dsk_ref_gelu_fwd(const double* x, double* y, size_t n);
void dsk_ref_gelu_bwd(const double* x, const double* dy, double* dx, size_t n);

/* ---- dropout with a counter-based RNG ----------------------------------
 * Element e of a stream keeps its value (scaled by 1/(1-p)) when the 32-bit
 * word u(e) >= dsk_dropout_threshold(p), else becomes 0. u(e) is lane e%4 of
 * Philox4x32-10 (Salmon et al., SC'11) with
 *   key     = (seed_lo ^ stream_hi, seed_hi)
 *   counter = ((e/4) lo, (e/4) hi, module_id, stream_lo)
 * where stream is the forward index. The mask is a pure function of
 * (seed, stream, module_id, e): backward and recomputation regenerate it
 * instead of storing it. `offset` is the stream index of element 0 of this
 * buffer (0 for a whole activation; a slice passes its position). */
typedef struct dsk_dropout_key {
    uint64_t seed;       /* the engine's dropout seed (checkpointed) */
    uint64_t stream;     /* which forward (RunContext::forward_index) */
    uint32_t module_id;  /* Module::id() */
    uint32_t reserved;   /* 0 */
    uint64_t offset;     /* stream index of element 0 */
} dsk_dropout_key;

/** Keep-threshold for p in [0, 1]: round(p * 2^32), saturated; p = 1 drops all. */
uint64_t dsk_dropout_threshold(float p) DSK_NOEXCEPT;
/** One Philox4x32-10 block: out[0..3] for counter ctr[0..3] and key k[0..1]. */
void dsk_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) DSK_NOEXCEPT;

/** y = x * (keep ? 1/(1-p) : 0) (y = 0 everywhere when p = 1; a dropped Inf or
 *  NaN gives NaN, as torch's x * mask * scale). p in [0, 1], key not NULL.
 *  y may alias x. */
int dsk_cpu_dropout_fwd(const float* x, float* y, size_t n, float p, const dsk_dropout_key* key) DSK_NOEXCEPT;
/** dx = dy * mask * 1/(1-p) with the forward's key (the same mask). dx may alias dy. */
int dsk_cpu_dropout_bwd(const float* dy, float* dx, size_t n, float p, const dsk_dropout_key* key) DSK_NOEXCEPT;
/** In place on a buffer (attention dropout on probabilities). */
int dsk_cpu_dropout_apply(float* x, size_t n, float p, const dsk_dropout_key* key) DSK_NOEXCEPT;

/** Reference: computes each element's block on its own, in double. */
void dsk_ref_dropout_fwd(const double* x, double* y, size_t n, double p, const dsk_dropout_key* key);

/* ---- softmax cross-entropy --------------------------------------------
 * logits [rows, V] fp32; targets [rows] of target_dtype DSK_I32 or DSK_I64.
 * A row whose target == ignore_index contributes nothing. Per counted row:
 * lse = log(sum_j exp(l_j)) (max-subtracted), loss = lse - l[target].
 * A target outside [0, V) that is not ignore_index: DSK_ERR_INVALID_ARGUMENT
 * naming the row and the value. */
/** row_loss, row_lse (nullable; 0 for ignored rows) receive the per-row loss
 *  and log-sum-exp; *loss_sum (double) the sum over counted rows, *count
 *  their number. */
int dsk_cpu_softmax_xent_fwd(const float* logits, const void* targets, int target_dtype, size_t rows, size_t V,
                             int64_t ignore_index, float* row_loss, float* row_lse, double* loss_sum,
                             int64_t* count) DSK_NOEXCEPT;
/** dlogits = scale * (softmax(logits) - onehot(target)) per counted row, from
 *  the forward's row_lse (softmax recomputed, never stored); 0 for ignored
 *  rows. For the mean loss, scale = dloss / count. */
int dsk_cpu_softmax_xent_bwd(const float* logits, const void* targets, int target_dtype, const float* row_lse,
                             size_t rows, size_t V, int64_t ignore_index, float scale,
                             float* dlogits) DSK_NOEXCEPT;

/** Returns the loss sum; row_lse (nullable) as above. No target checks. */
double dsk_ref_softmax_xent_fwd(const double* logits, const int64_t* targets, size_t rows, size_t V,
                                int64_t ignore_index, double* row_lse);
void dsk_ref_softmax_xent_bwd(const double* logits, const int64_t* targets, size_t rows, size_t V,
                              int64_t ignore_index, double scale, double* dlogits);

/* ---- mean squared error -------------------------------------------------- */
/** *sum_sq = sum (pred - target)^2, accumulated in double. */
int dsk_cpu_mse_fwd(const float* pred, const float* target, size_t n, double* sum_sq) DSK_NOEXCEPT;
/** dpred = scale * (pred - target) (for the mean: scale = 2*dloss/n). */
int dsk_cpu_mse_bwd(const float* pred, const float* target, size_t n, float scale, float* dpred) DSK_NOEXCEPT;

double dsk_ref_mse_fwd(const double* pred, const double* target, size_t n);

/* ---- elementwise ------------------------------------------------------------ */
/** y = a + b (residuals). y may alias a or b. */
int dsk_cpu_add(const float* a, const float* b, float* y, size_t n) DSK_NOEXCEPT;
/** y += a. */
int dsk_cpu_add_inplace(float* y, const float* a, size_t n) DSK_NOEXCEPT;

void dsk_ref_add(const double* a, const double* b, double* y, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* DS_KERNELS_NN_OPS_H */
