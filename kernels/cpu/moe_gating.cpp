// dsk_cpu_moe_gate_fwd / _bwd (nn_moe.h): DeepSpeed's top-1 / top-2 gating in
// index form. [S, E] is small next to the experts' matmuls, so this is one
// scalar pass over the tokens with per-expert counters (no dense masks).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "../elem/moe_draw.h"
#include "arg_check.h"
#include "nn_moe.h"

namespace {

using ds::kernels::set_last_error;

int64_t configured_capacity(size_t S, size_t E, double cf, int k, int64_t min_capacity) {
    // float32 as DeepSpeed's tensor arithmetic: float(S/E) * float(cf * k).
    const float per_expert = static_cast<float>(static_cast<double>(S) / static_cast<double>(E));
    const float factor = static_cast<float>(cf * k);
    const int64_t c = static_cast<int64_t>(std::ceil(per_expert * factor));
    return std::max(c, min_capacity);
}

int check_gate_args(const char* kernel, const dsk_moe_gate_args* a, size_t S, size_t E) {
    if (a == nullptr) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: args is NULL", kernel);
    if (a->k != 1 && a->k != 2)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: k = %d is not 1 or 2", kernel, a->k);
    if (S == 0 || E == 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: S = %zu tokens and E = %zu experts must be >= 1", kernel,
                              S, E);
    if (E > 0x7fffffff || S > 0x7fffffff)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: S = %zu or E = %zu exceeds int32", kernel, S, E);
    if (a->k == 2 && E < 2)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: k = 2 needs at least 2 experts (E = %zu)", kernel, E);
    if (!(a->capacity_factor > 0.0) || !std::isfinite(a->capacity_factor))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: capacity_factor = %g must be finite and > 0", kernel,
                              a->capacity_factor);
    if (a->min_capacity < 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: min_capacity = %lld must be >= 0", kernel,
                              static_cast<long long>(a->min_capacity));
    if (a->k == 1 && static_cast<int64_t>(S) < a->min_capacity)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT,
                              "%s: S = %zu tokens is less than min_capacity = %lld (top-1 gating needs S >= "
                              "min_capacity: lower min_capacity or use more tokens)",
                              kernel, S, static_cast<long long>(a->min_capacity));
    return DSK_OK;
}

// Index of the largest value (the first on ties, as torch.argmax); `skip` excluded.
size_t argmax_row(const float* v, size_t E, size_t skip) {
    size_t best = E;
    for (size_t e = 0; e < E; ++e) {
        if (e == skip) continue;
        if (best == E || v[e] > v[best]) best = e;
    }
    return best;
}

void top1(const float* logits, size_t S, size_t E, const dsk_moe_gate_args& a, const float* probs, int32_t* expert,
          int32_t* slot, float* weight, int64_t* counts, int64_t* capacity) {
    std::vector<float> noisy(E);
    for (size_t s = 0; s < S; ++s) {
        size_t c;
        if (a.rsample) {
            for (size_t e = 0; e < E; ++e) noisy[e] = logits[s * E + e] + dsk_moe_gumbel(&a.key, s * E + e);
            c = argmax_row(noisy.data(), E, E);
        } else {
            c = argmax_row(probs + s * E, E, E);
        }
        expert[s] = static_cast<int32_t>(c);
        counts[c] += 1;
    }
    int64_t cap;
    if (a.drop_tokens) {
        cap = configured_capacity(S, E, a.capacity_factor, 1, a.min_capacity);
    } else {
        cap = std::min<int64_t>(*std::max_element(counts, counts + E), static_cast<int64_t>(S));
    }
    *capacity = cap;
    const int64_t keep = std::min<int64_t>(cap, static_cast<int64_t>(S));
    // Which tokens each over-full expert keeps: the `keep` largest priorities
    // (RTS) or the first `keep` in token order.
    std::vector<char> kept(S, 1);
    std::vector<std::vector<uint32_t>> members(E);
    for (size_t s = 0; s < S; ++s) members[static_cast<size_t>(expert[s])].push_back(static_cast<uint32_t>(s));
    for (size_t e = 0; e < E; ++e) {
        auto& m = members[e];
        if (static_cast<int64_t>(m.size()) <= keep) continue;
        if (a.use_rts) {
            std::vector<float> pr(S);
            for (uint32_t s : m) pr[s] = dsk_moe_uniform(&a.key, S * E + s * E + e);
            std::stable_sort(m.begin(), m.end(), [&](uint32_t x, uint32_t y) { return pr[x] > pr[y]; });
        }
        for (size_t i = static_cast<size_t>(keep); i < m.size(); ++i) kept[m[i]] = 0;
    }
    std::vector<int32_t> next(E, 0);
    for (size_t s = 0; s < S; ++s) {
        const size_t c = static_cast<size_t>(expert[s]);
        if (kept[s]) {
            slot[s] = next[c]++;
            weight[s] = probs[s * E + c];
        } else {
            slot[s] = -1;
            weight[s] = 0.0f;
        }
    }
}

void top2(const float* logits, size_t S, size_t E, const dsk_moe_gate_args& a, const float* probs, int32_t* expert,
          int32_t* slot, float* weight, int64_t* counts, int64_t* capacity) {
    std::vector<float> noisy(E);
    std::vector<int64_t> first_count(E, 0);
    for (size_t s = 0; s < S; ++s) {
        const size_t e1 = argmax_row(probs + s * E, E, E);
        for (size_t e = 0; e < E; ++e)
            noisy[e] = logits[s * E + e] + (a.second_sampling ? dsk_moe_gumbel(&a.key, s * E + e) : 0.0f);
        const size_t e2 = argmax_row(noisy.data(), E, e1);
        expert[2 * s] = static_cast<int32_t>(e1);
        expert[2 * s + 1] = static_cast<int32_t>(e2);
        first_count[e1] += 1;
        counts[e1] += 1;
        counts[e2] += 1;
    }
    const int64_t cap = a.drop_tokens ? configured_capacity(S, E, a.capacity_factor, 2, a.min_capacity)
                                      : *std::max_element(counts, counts + E);
    *capacity = cap;
    std::vector<int64_t> n1(E, 0), n2(E, 0);
    for (size_t s = 0; s < S; ++s) {
        const size_t e1 = static_cast<size_t>(expert[2 * s]), e2 = static_cast<size_t>(expert[2 * s + 1]);
        const int64_t loc1 = n1[e1]++;
        const int64_t loc2 = first_count[e2] + n2[e2]++;
        const bool k1 = loc1 < cap, k2 = loc2 < cap;
        slot[2 * s] = k1 ? static_cast<int32_t>(loc1) : -1;
        slot[2 * s + 1] = k2 ? static_cast<int32_t>(loc2) : -1;
        const float g1 = k1 ? probs[s * E + e1] : 0.0f, g2 = k2 ? probs[s * E + e2] : 0.0f;
        const float denom = std::max(g1 + g2, FLT_EPSILON);
        weight[2 * s] = g1 / denom;
        weight[2 * s + 1] = g2 / denom;
    }
}

}  // namespace

// The draws' arithmetic is ../elem/moe_draw.h's (the device's jitter draws with it too).
extern "C" float dsk_moe_uniform(const dsk_dropout_key* key, uint64_t j) noexcept {
    return moe_uniform_f(dropout_stream(*key), key->offset, j);
}

extern "C" float dsk_moe_gumbel(const dsk_dropout_key* key, uint64_t j) noexcept {
    const double u = moe_uniform_exact(dropout_stream(*key), key->offset, j);
    return static_cast<float>(-std::log(-std::log(u)));
}

extern "C" int dsk_cpu_moe_gate_fwd(const float* logits, size_t S, size_t E, const dsk_moe_gate_args* args,
                                    float* probs, int32_t* expert, int32_t* slot, float* weight,
                                    int64_t* exp_counts, int64_t* capacity, float* l_aux) noexcept {
    const char* kernel = "dsk_moe_gate_fwd";
    if (int st = check_gate_args(kernel, args, S, E)) return st;
    const size_t routes = S * static_cast<size_t>(args->k);
    ds::kernels::ArgCheck k(kernel);
    if (k.ptr("logits", logits, S * E)
            .ptr("probs", probs, S * E)
            .ptr("expert", expert, routes)
            .ptr("slot", slot, routes)
            .ptr("weight", weight, routes)
            .ptr("exp_counts", exp_counts, E)
            .ptr("capacity", capacity, 1)
            .ptr("l_aux", l_aux, 1)
            .failed())
        return k.status();
    for (size_t i = 0; i < S * E; ++i)
        if (!std::isfinite(logits[i]))
            return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: logits[%zu, %zu] = %g is not finite", kernel, i / E,
                                  i % E, static_cast<double>(logits[i]));
    std::vector<double> me(E, 0.0);
    for (size_t s = 0; s < S; ++s) {
        const float* l = logits + s * E;
        float* p = probs + s * E;
        const float mx = *std::max_element(l, l + E);
        float sum = 0.0f;
        for (size_t e = 0; e < E; ++e) sum += (p[e] = std::exp(l[e] - mx));
        const float inv = 1.0f / sum;
        for (size_t e = 0; e < E; ++e) {
            p[e] *= inv;
            me[e] += p[e];
        }
    }
    std::fill(exp_counts, exp_counts + E, int64_t{0});
    if (args->k == 1)
        top1(logits, S, E, *args, probs, expert, slot, weight, exp_counts, capacity);
    else
        top2(logits, S, E, *args, probs, expert, slot, weight, exp_counts, capacity);
    // l_aux from the first choices before dropping.
    std::vector<double> ce(E, 0.0);
    for (size_t s = 0; s < S; ++s) ce[static_cast<size_t>(expert[s * static_cast<size_t>(args->k)])] += 1.0;
    double acc = 0.0;
    for (size_t e = 0; e < E; ++e) acc += (me[e] / static_cast<double>(S)) * (ce[e] / static_cast<double>(S));
    *l_aux = static_cast<float>(acc * static_cast<double>(E));
    return DSK_OK;
}

extern "C" int dsk_cpu_moe_gate_bwd(const float* probs, size_t S, size_t E, int32_t k, const int32_t* expert,
                                    const int32_t* slot, const float* dweight, float dl_aux,
                                    float* dlogits) noexcept {
    const char* kernel = "dsk_moe_gate_bwd";
    if (k != 1 && k != 2) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: k = %d is not 1 or 2", kernel, k);
    const size_t routes = S * static_cast<size_t>(k);
    ds::kernels::ArgCheck c(kernel);
    if (c.ptr("probs", probs, S * E)
            .ptr("expert", expert, routes)
            .ptr("slot", slot, routes)
            .ptr("dweight", dweight, routes)
            .ptr("dlogits", dlogits, S * E)
            .failed())
        return c.status();
    for (size_t r = 0; r < routes; ++r)
        if (expert[r] < 0 || static_cast<size_t>(expert[r]) >= E)
            return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: expert[%zu] = %d is outside [0, %zu)", kernel, r,
                                  expert[r], E);
    if (S == 0) return DSK_OK;
    // d l_aux / d probs[s, e] = E * ce_e / S with ce_e = first choices of e / S.
    std::vector<double> aux(E, 0.0);
    for (size_t s = 0; s < S; ++s) aux[static_cast<size_t>(expert[s * static_cast<size_t>(k)])] += 1.0;
    for (size_t e = 0; e < E; ++e)
        aux[e] = static_cast<double>(dl_aux) * static_cast<double>(E) * aux[e] / (static_cast<double>(S) * S);
    std::vector<float> dp(E);
    for (size_t s = 0; s < S; ++s) {
        const float* p = probs + s * E;
        for (size_t e = 0; e < E; ++e) dp[e] = static_cast<float>(aux[e]);
        if (k == 1) {
            if (slot[s] >= 0) dp[static_cast<size_t>(expert[s])] += dweight[s];
        } else {
            // w_i = a_i / D with a_i = kept_i * p_i, D = max(a_1 + a_2, eps).
            const size_t e1 = static_cast<size_t>(expert[2 * s]), e2 = static_cast<size_t>(expert[2 * s + 1]);
            const bool k1 = slot[2 * s] >= 0, k2 = slot[2 * s + 1] >= 0;
            const float a1 = k1 ? p[e1] : 0.0f, a2 = k2 ? p[e2] : 0.0f;
            const float sum = a1 + a2;
            const float dw1 = dweight[2 * s], dw2 = dweight[2 * s + 1];
            float da1, da2;
            if (sum >= FLT_EPSILON) {  // the clamp passes its gradient
                const float w1 = a1 / sum, w2 = a2 / sum;
                const float mean = dw1 * w1 + dw2 * w2;
                da1 = (dw1 - mean) / sum;
                da2 = (dw2 - mean) / sum;
            } else {
                da1 = dw1 / FLT_EPSILON;
                da2 = dw2 / FLT_EPSILON;
            }
            if (k1) dp[e1] += da1;
            if (k2) dp[e2] += da2;
        }
        float dot = 0.0f;
        for (size_t e = 0; e < E; ++e) dot += p[e] * dp[e];
        for (size_t e = 0; e < E; ++e) dlogits[s * E + e] = p[e] * (dp[e] - dot);
    }
    return DSK_OK;
}
