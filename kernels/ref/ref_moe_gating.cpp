// Scalar float64 reference for MoE gating (nn_moe.h), written the way
// DeepSpeed states it: dense [S, E] one-hot masks, cumulative sums down the
// token axis, masks multiplied by "location < capacity", then the index form
// read off the masks. The gradient is the chain rule through softmax, the
// top-2 renormalisation and l_aux, term by term.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "nn_moe.h"

namespace {

using Mask = std::vector<int64_t>;  // [S, E] 0/1

double draw_uniform(const dsk_dropout_key& key, uint64_t j) {
    const uint64_t e = key.offset + j;
    uint32_t ctr[4] = {static_cast<uint32_t>((e / 4) & 0xffffffffu), static_cast<uint32_t>((e / 4) >> 32),
                       key.module_id, static_cast<uint32_t>(key.stream & 0xffffffffu)};
    uint32_t k[2] = {static_cast<uint32_t>(key.seed & 0xffffffffu) ^ static_cast<uint32_t>(key.stream >> 32),
                     static_cast<uint32_t>(key.seed >> 32)};
    uint32_t out[4];
    dsk_philox4x32_10(ctr, k, out);
    return (static_cast<double>(out[e % 4]) + 0.5) / 4294967296.0;
}

// Priority and noise as the kernel defines them: rounded to float.
double uniform_f(const dsk_dropout_key& key, uint64_t j) { return static_cast<float>(draw_uniform(key, j)); }
double gumbel_f(const dsk_dropout_key& key, uint64_t j) {
    return static_cast<float>(-std::log(-std::log(draw_uniform(key, j))));
}

size_t first_argmax(const std::vector<double>& v) {
    size_t b = 0;
    for (size_t e = 1; e < v.size(); ++e)
        if (v[e] > v[b]) b = e;
    return b;
}

Mask cumsum_minus_one(const Mask& m, size_t S, size_t E) {
    Mask loc(S * E);
    for (size_t e = 0; e < E; ++e) {
        int64_t run = 0;
        for (size_t s = 0; s < S; ++s) {
            run += m[s * E + e];
            loc[s * E + e] = run - 1;
        }
    }
    return loc;
}

int64_t capacity_of(size_t S, size_t E, double cf, int k, int64_t min_cap) {
    const float v = static_cast<float>(static_cast<double>(S) / E) * static_cast<float>(cf * k);
    return std::max(static_cast<int64_t>(std::ceil(v)), min_cap);
}

}  // namespace

extern "C" void dsk_ref_moe_gate_fwd(const double* logits, size_t S, size_t E, const dsk_moe_gate_args* a,
                                     double* probs, int32_t* expert, int32_t* slot, double* weight,
                                     int64_t* exp_counts, int64_t* capacity, double* l_aux) {
    for (size_t s = 0; s < S; ++s) {
        double mx = logits[s * E], sum = 0.0;
        for (size_t e = 1; e < E; ++e) mx = std::max(mx, logits[s * E + e]);
        for (size_t e = 0; e < E; ++e) sum += std::exp(logits[s * E + e] - mx);
        for (size_t e = 0; e < E; ++e) probs[s * E + e] = std::exp(logits[s * E + e] - mx) / sum;
    }
    Mask mask1(S * E, 0), mask2(S * E, 0);
    std::vector<size_t> choice1(S);  // the first choice, kept or not
    std::vector<double> row(E);
    for (size_t s = 0; s < S; ++s) {
        for (size_t e = 0; e < E; ++e)
            row[e] = (a->k == 1 && a->rsample) ? logits[s * E + e] + gumbel_f(a->key, s * E + e) : probs[s * E + e];
        const size_t c1 = first_argmax(row);
        mask1[s * E + c1] = 1;
        choice1[s] = c1;
        if (a->k == 2) {
            for (size_t e = 0; e < E; ++e)
                row[e] = e == c1 ? -INFINITY
                                 : logits[s * E + e] + (a->second_sampling ? gumbel_f(a->key, s * E + e) : 0.0);
            mask2[s * E + first_argmax(row)] = 1;
        }
    }
    for (size_t e = 0; e < E; ++e) {
        exp_counts[e] = 0;
        for (size_t s = 0; s < S; ++s) exp_counts[e] += mask1[s * E + e] + mask2[s * E + e];
    }
    // l_aux = E * sum_e mean_s(probs) * mean_s(mask1), before any dropping.
    double aux = 0.0;
    for (size_t e = 0; e < E; ++e) {
        double me = 0.0, ce = 0.0;
        for (size_t s = 0; s < S; ++s) {
            me += probs[s * E + e];
            ce += static_cast<double>(mask1[s * E + e]);
        }
        aux += (me / S) * (ce / S);
    }
    *l_aux = aux * static_cast<double>(E);
    const int64_t max_count = *std::max_element(exp_counts, exp_counts + E);

    if (a->k == 1) {
        const int64_t cap = a->drop_tokens ? capacity_of(S, E, a->capacity_factor, 1, a->min_capacity)
                                           : std::min<int64_t>(max_count, static_cast<int64_t>(S));
        *capacity = cap;
        const int64_t sel = std::min<int64_t>(cap, static_cast<int64_t>(S));
        // Per expert column keep the `sel` best scores (score = mask * priority,
        // or the mask itself; earlier token first among equals).
        Mask keep(S * E, 0);
        for (size_t e = 0; e < E; ++e) {
            std::vector<std::pair<double, size_t>> col;
            for (size_t s = 0; s < S; ++s) {
                const double pr = a->use_rts ? uniform_f(a->key, S * E + s * E + e) : 1.0;
                col.push_back({static_cast<double>(mask1[s * E + e]) * pr, s});
            }
            std::stable_sort(col.begin(), col.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
            for (int64_t i = 0; i < sel; ++i) keep[col[static_cast<size_t>(i)].second * E + e] = 1;
        }
        for (size_t i = 0; i < S * E; ++i) mask1[i] *= keep[i];
        const Mask loc = cumsum_minus_one(mask1, S, E);
        for (size_t s = 0; s < S; ++s) {
            const size_t c = choice1[s];
            const bool kept = mask1[s * E + c] != 0;
            expert[s] = static_cast<int32_t>(c);
            slot[s] = kept ? static_cast<int32_t>(loc[s * E + c]) : -1;
            weight[s] = kept ? probs[s * E + c] : 0.0;
        }
        return;
    }

    const int64_t cap = a->drop_tokens ? capacity_of(S, E, a->capacity_factor, 2, a->min_capacity) : max_count;
    *capacity = cap;
    Mask loc1 = cumsum_minus_one(mask1, S, E), loc2 = cumsum_minus_one(mask2, S, E);
    for (size_t e = 0; e < E; ++e) {
        int64_t n1 = 0;
        for (size_t s = 0; s < S; ++s) n1 += mask1[s * E + e];
        for (size_t s = 0; s < S; ++s) loc2[s * E + e] += n1;
    }
    for (size_t s = 0; s < S; ++s) {
        size_t e1 = 0, e2 = 0;
        for (size_t e = 0; e < E; ++e) {
            if (mask1[s * E + e]) e1 = e;
            if (mask2[s * E + e]) e2 = e;
        }
        const bool k1 = loc1[s * E + e1] < cap, k2 = loc2[s * E + e2] < cap;
        const double g1 = k1 ? probs[s * E + e1] : 0.0, g2 = k2 ? probs[s * E + e2] : 0.0;
        const double denom = std::max(g1 + g2, static_cast<double>(FLT_EPSILON));
        expert[2 * s] = static_cast<int32_t>(e1);
        expert[2 * s + 1] = static_cast<int32_t>(e2);
        slot[2 * s] = k1 ? static_cast<int32_t>(loc1[s * E + e1]) : -1;
        slot[2 * s + 1] = k2 ? static_cast<int32_t>(loc2[s * E + e2]) : -1;
        weight[2 * s] = g1 / denom;
        weight[2 * s + 1] = g2 / denom;
    }
}

extern "C" void dsk_ref_moe_gate_bwd(const double* probs, size_t S, size_t E, int32_t k, const int32_t* expert,
                                     const int32_t* slot, const double* dweight, double dl_aux, double* dlogits) {
    // d probs, then the softmax Jacobian J[e, f] = p_e (delta_ef - p_f).
    std::vector<double> ce(E, 0.0);
    for (size_t s = 0; s < S; ++s) ce[static_cast<size_t>(expert[s * k])] += 1.0 / S;
    std::vector<double> dp(S * E, 0.0);
    for (size_t s = 0; s < S; ++s) {
        for (size_t e = 0; e < E; ++e) dp[s * E + e] = dl_aux * E * ce[e] / S;
        if (k == 1) {
            if (slot[s] >= 0) dp[s * E + expert[s]] += dweight[s];
            continue;
        }
        const size_t e1 = expert[2 * s], e2 = expert[2 * s + 1];
        const double m1 = slot[2 * s] >= 0 ? 1.0 : 0.0, m2 = slot[2 * s + 1] >= 0 ? 1.0 : 0.0;
        const double a1 = m1 * probs[s * E + e1], a2 = m2 * probs[s * E + e2];
        const double sum = a1 + a2;
        if (sum >= FLT_EPSILON) {
            // w1 = a1/(a1+a2): dw1/da1 = a2/sum^2, dw1/da2 = -a1/sum^2 (and symmetric).
            const double sq = sum * sum;
            dp[s * E + e1] += m1 * (dweight[2 * s] * a2 / sq - dweight[2 * s + 1] * a2 / sq);
            dp[s * E + e2] += m2 * (dweight[2 * s + 1] * a1 / sq - dweight[2 * s] * a1 / sq);
        } else {
            dp[s * E + e1] += m1 * dweight[2 * s] / FLT_EPSILON;
            dp[s * E + e2] += m2 * dweight[2 * s + 1] / FLT_EPSILON;
        }
    }
    for (size_t s = 0; s < S; ++s)
        for (size_t e = 0; e < E; ++e) {
            double acc = 0.0;
            for (size_t f = 0; f < E; ++f) {
                const double jac = probs[s * E + f] * ((e == f ? 1.0 : 0.0) - probs[s * E + e]);
                acc += dp[s * E + f] * jac;
            }
            dlogits[s * E + e] = acc;
        }
}
