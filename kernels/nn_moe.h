/*
 * nn_moe.h — Mixture-of-Experts gating (issue 15 item 3): DeepSpeed's
 * top1gating / top2gating (deepspeed/moe/sharded_moe.py) on gate logits
 * [S tokens, E experts], forward and backward. Conventions as nn_ops.h:
 * dsk_cpu_* are noexcept and return DSK_OK or DSK_ERR_INVALID_ARGUMENT with
 * a message naming the kernel and the argument; dsk_ref_* are the scalar
 * float64 twins the tests use as the oracle (no checks).
 *
 * Output is in INDEX form: for token s and its i-th choice (i < k),
 * route r = s*k + i has expert[r] (the chosen expert, always set),
 * slot[r] (its position in that expert's buffer, or -1 when the route was
 * dropped for capacity) and weight[r] (the combine weight, 0 when dropped).
 * DeepSpeed's dense combine_weights[s, e, c] is only a layout of this:
 * combine[s, expert[r], slot[r]] = weight[r] for the kept routes.
 *
 * Semantics (docs/MODELS.md, "Mixture of Experts"):
 *  probs = softmax(logits) per token (fp32, max-subtracted).
 *  capacity = max(ceil(float32(S/E) * float32(capacity_factor * k)), min_capacity)
 *    (float32 arithmetic as DeepSpeed's tensors); drop_tokens = 0: the
 *    largest number of routes any expert got (top-1: at most S), nothing
 *    is dropped.
 *  k = 1: choice = argmax(probs), or with rsample argmax(logits + Gumbel).
 *    Per expert, at most min(capacity, S) of its tokens are kept: with
 *    use_rts the ones with the largest uniform priority, else the first ones
 *    in token order (DeepSpeed leaves this tie order to torch.topk, which is
 *    unspecified). slot = rank of the token among the kept tokens of its
 *    expert, in token order. weight = probs[s, choice] (not renormalised).
 *    S < min_capacity is an error (DeepSpeed asserts it).
 *  k = 2 (E >= 2): first = argmax(probs); second = argmax of the logits
 *    (plus Gumbel noise with second_sampling) with the first masked out.
 *    loc1 = number of earlier tokens with the same first choice;
 *    loc2 = (first-choice count of that expert over all tokens) + number of
 *    earlier tokens with the same second choice. A route is kept iff
 *    loc < capacity. weight_i = kept_i*probs_i / max(sum of kept probs,
 *    FLT_EPSILON).
 *  exp_counts[e] = routes chosen for e before dropping (both choices).
 *  l_aux = E * sum_e mean_s(probs[s,e]) * (first choices of e)/S.
 *
 * Random draws come from the dropout RNG (Philox4x32-10, nn_ops.h) with
 * `key`: word(j) is the stream word at key.offset + j, u(j) =
 * float((word + 0.5) * 2^-32), Gumbel(j) = float(-log(-log(u))) in double.
 * Gumbel noise for [s, e] (rsample, second_sampling) uses j = s*E + e; the
 * RTS priority of [s, e] uses j = S*E + s*E + e. The caller gives each
 * forward its own key (RunContext seed, forward index, module id).
 */
#ifndef DS_KERNELS_NN_MOE_H
#define DS_KERNELS_NN_MOE_H

#include "nn_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dsk_moe_gate_args {
    int32_t k;               /* 1 or 2 */
    int32_t drop_tokens;     /* 0: capacity from the routes, nothing dropped */
    int32_t use_rts;         /* k = 1: random token selection */
    int32_t rsample;         /* k = 1: Gumbel noise on the selection logits */
    int32_t second_sampling; /* k = 2: Gumbel noise on the logits choosing the second expert */
    int32_t reserved;        /* 0 */
    double capacity_factor;  /* the one in effect (training or eval), > 0 */
    int64_t min_capacity;    /* >= 0 */
    dsk_dropout_key key;     /* the random draws' stream */
} dsk_moe_gate_args;

/** logits [S, E] (S, E >= 1). Outputs: probs [S, E], expert/slot/weight
 *  [S*k], exp_counts [E], *capacity, *l_aux. */
int dsk_cpu_moe_gate_fwd(const float* logits, size_t S, size_t E, const dsk_moe_gate_args* args, float* probs,
                         int32_t* expert, int32_t* slot, float* weight, int64_t* exp_counts, int64_t* capacity,
                         float* l_aux) DSK_NOEXCEPT;

/** d logits [S, E] (overwritten) from the forward's probs, expert, slot and
 *  the upstream gradients of the combine weights dweight [S*k] and of l_aux. */
int dsk_cpu_moe_gate_bwd(const float* probs, size_t S, size_t E, int32_t k, const int32_t* expert,
                         const int32_t* slot, const float* dweight, float dl_aux, float* dlogits) DSK_NOEXCEPT;

/** The uniform u(j) and Gumbel(j) draws above (tests, the layer's jitter). */
float dsk_moe_uniform(const dsk_dropout_key* key, uint64_t j) DSK_NOEXCEPT;
float dsk_moe_gumbel(const dsk_dropout_key* key, uint64_t j) DSK_NOEXCEPT;

/** The layer's dispatch and combine on tokens' rows [S, C] (the MoE layer's
 *  device path; its CPU path runs the same arithmetic in its own loops):
 *    rows_gather:      dst[j, :] = scale[j] * src[idx[j], :]    (scale NULL: a copy)
 *    rows_scatter_add: dst[idx[j], :] += scale[j] * src[j, :]   (scale NULL: 1)
 *    rows_dot:         out[j] = sum over c in order of a[idx[j], c] * b[j, c] (fp32)
 *  for j < n; idx int32 in [0, S) — checked on the host (DSK_ERR_INVALID_ARGUMENT
 *  naming the position); the device kernels trust it (the layer makes the
 *  indices). rows_scatter_add needs distinct indices within one call (the
 *  layer calls it per expert, where a token has at most one route). idx and
 *  scale are in the memory the rows are in. */
int dsk_cpu_moe_rows_gather(const float* src, int64_t S, int64_t C, const int32_t* idx, const float* scale,
                            int64_t n, float* dst) DSK_NOEXCEPT;
int dsk_cpu_moe_rows_scatter_add(const float* src, int64_t n, int64_t C, const int32_t* idx, const float* scale,
                                 int64_t S, float* dst) DSK_NOEXCEPT;
int dsk_cpu_moe_rows_dot(const float* a, int64_t S, int64_t C, const int32_t* idx, const float* b, int64_t n,
                         float* out) DSK_NOEXCEPT;

/** The gate's multiplicative jitter (noisy_gate_policy "Jitter", training):
 *  factor(j) = (1 - eps) + 2 eps u(j) in float, eps = 0.01 (DeepSpeed's
 *  multiplicative_jitter: U(1 - eps, 1 + eps)), u(j) the uniform above, and
 *    dst[i] = src[i] * factor(first + i)                (accumulate = 0)
 *    dst[i] = dst[i] + src[i] * factor(first + i)       (accumulate = 1)
 *  for i < n: the forward's gate input gin = x * f and the backward's
 *  dx += dg * f. The layer's factors follow the gating's draws (first =
 *  2 S E). dst may alias src; src and dst are in the memory of the backend
 *  that runs it, key is host memory. */
int dsk_cpu_moe_jitter(const float* src, int64_t n, const dsk_dropout_key* key, uint64_t first, int accumulate,
                       float* dst) DSK_NOEXCEPT;

/** Float64 reference, written on DeepSpeed's dense masks ([S, E] one-hots and
 *  cumulative sums); the same outputs (probs, weights, l_aux in double). */
void dsk_ref_moe_gate_fwd(const double* logits, size_t S, size_t E, const dsk_moe_gate_args* args, double* probs,
                          int32_t* expert, int32_t* slot, double* weight, int64_t* exp_counts, int64_t* capacity,
                          double* l_aux);
void dsk_ref_moe_gate_bwd(const double* probs, size_t S, size_t E, int32_t k, const int32_t* expert,
                          const int32_t* slot, const double* dweight, double dl_aux, double* dlogits);
/** The jitter in float64: the factor 0.99 + 0.02 u(j) with u(j) exact (not
 *  rounded to float), one product (and one add) per element. */
void dsk_ref_moe_jitter(const double* src, int64_t n, const dsk_dropout_key* key, uint64_t first, int accumulate,
                        double* dst);

#ifdef __cplusplus
}
#endif

#endif /* DS_KERNELS_NN_MOE_H */
