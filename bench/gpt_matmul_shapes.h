// The matrix products one GPT-2 training step runs (forward + backward), as
// row-major C[M,N] (+)= op(A)[M,K] * op(B)[K,N] with op = transpose when the
// flag is set, `batch` independent products per call, `count` calls per step.
// Linear layers use PyTorch's weight layout W[out, in]:
//   forward y = x W^T (M = rows, N = out, K = in), input gradient dx = dy W,
//   weight gradient dW += dy^T x (accumulated: beta 1).
// Attention per (batch, head): S = Q K^T, Y = P V; backward dP = dY V^T,
// dV = P^T dY, dQ = dS K, dK = dS^T Q (full T x T: a causal kernel may skip
// the masked half, so this over-counts the flops it needs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bench {

struct GemmShape {
    std::string what;
    int count;       // calls per training step
    bool trans_a, trans_b;
    int64_t m, n, k;
    int64_t batch;   // products per call (attention: batch * heads)
    float beta;      // 0: overwrite, 1: accumulate
    double flops() const { return 2.0 * double(m) * double(n) * double(k) * double(batch); }
};

struct GptDims {
    int64_t layers, heads, embd, vocab, batch, seq;
};

inline std::vector<GemmShape> gpt_step_gemms(const GptDims& d) {
    const int64_t rows = d.batch * d.seq, C = d.embd, hs = d.embd / d.heads, T = d.seq;
    const int L = int(d.layers);
    struct Lin { const char* name; int64_t in, out; int count; };
    const Lin lins[] = {{"attn.qkv", C, 3 * C, L}, {"attn.proj", C, C, L}, {"mlp.fc", C, 4 * C, L},
                        {"mlp.proj", 4 * C, C, L}, {"lm_head", C, d.vocab, 1}};
    std::vector<GemmShape> v;
    for (const Lin& l : lins) {
        v.push_back({std::string(l.name) + " fwd", l.count, false, true, rows, l.out, l.in, 1, 0.f});
        v.push_back({std::string(l.name) + " dX", l.count, false, false, rows, l.in, l.out, 1, 0.f});
        v.push_back({std::string(l.name) + " dW", l.count, true, false, l.out, l.in, rows, 1, 1.f});
    }
    const int64_t bh = d.batch * d.heads;
    v.push_back({"attn QK^T", L, false, true, T, T, hs, bh, 0.f});
    v.push_back({"attn PV", L, false, false, T, hs, T, bh, 0.f});
    v.push_back({"attn dP=dY V^T", L, false, true, T, T, hs, bh, 0.f});
    v.push_back({"attn dV=P^T dY", L, true, false, T, hs, T, bh, 0.f});
    v.push_back({"attn dQ=dS K", L, false, false, T, hs, T, bh, 0.f});
    v.push_back({"attn dK=dS^T Q", L, true, false, T, hs, T, bh, 0.f});
    return v;
}

}  // namespace bench
