// Shared pieces of the two CPU attention kernels (attention.cpp picks one):
// the checked dimensions of a call, the dropout multipliers of a row of
// probabilities, and the two implementations' entry points. Internal to
// kernels/cpu.
#pragma once

#include <omp.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "arg_check.h"

#include "nn_attention.h"
#include "philox.h"

namespace ds::kernels::attention {

// Element counts of one call, checked for overflow once (attention.cpp).
struct Dims {
    int64_t B, T, C, H, hd;
    float scale() const { return 1.0f / std::sqrt(static_cast<float>(hd)); }  // of the scores
};

// The dropout multipliers of row elements [0, jn) whose stream indices start
// at `base` (nn_ops.h's mask: keep when the Philox word >= threshold).
struct RowDropout {
    uint32_t thr, c2, c3, key[2];
    float scale;
    explicit RowDropout(const dsk_attention_args& a)
        : thr(static_cast<uint32_t>(dsk_dropout_threshold(a.dropout_p))),
          c2(a.dropout_key.module_id),
          c3(static_cast<uint32_t>(a.dropout_key.stream)),
          key{static_cast<uint32_t>(a.dropout_key.seed) ^ static_cast<uint32_t>(a.dropout_key.stream >> 32),
              static_cast<uint32_t>(a.dropout_key.seed >> 32)},
          scale(1.0f / (1.0f - a.dropout_p)) {}
    void fill(uint64_t base, int64_t jn, float* f) const {
        uint32_t w[4];
        uint64_t block = ~uint64_t{0};
        for (int64_t j = 0; j < jn; ++j) {
            const uint64_t e = base + static_cast<uint64_t>(j);
            if ((e >> 2) != block) {
                block = e >> 2;
                philox_block(block, c2, c3, key, w);
            }
            f[j] = w[e & 3u] >= thr ? scale : 0.0f;
        }
    }
};

// The per-thread scratch of an implementation's parallel loop: `threads`
// (1 inside an enclosing parallel region, else OpenMP's maximum) blocks of
// `per_thread` floats, zeroed; mine() is the calling thread's block.
struct Scratch {
    int threads = 1;
    size_t per_thread = 0;
    std::vector<float> data;
    float* mine() { return data.data() + static_cast<size_t>(omp_get_thread_num()) * per_thread; }
};

// DSK_ERR_OUT_OF_MEMORY naming `kn` and the sequence length when it cannot be had.
inline int make_scratch(const char* kn, size_t per_thread, int64_t T, Scratch* s) {
    s->threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    s->per_thread = per_thread;
    try {
        s->data.assign(per_thread * static_cast<size_t>(s->threads), 0.0f);
        return DSK_OK;
    } catch (const std::bad_alloc&) {
        return set_last_error(DSK_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu floats of scratch per thread (seq=%lld)",
                              kn, per_thread, static_cast<long long>(T));
    }
}

// The implementations, called with checked arguments (kn: the kernel's name
// for messages). They return DSK_OK or a status with dsk_last_error() set.
int rows_forward(const char* kn, const Dims& d, const float* qkv, float* out, float* probs,
                 const dsk_attention_args& a);
int rows_backward(const char* kn, const Dims& d, const float* qkv, const float* probs, const float* dout,
                  float* dqkv, const dsk_attention_args& a);
int gemm_forward(const char* kn, const Dims& d, const float* qkv, float* out, float* probs,
                 const dsk_attention_args& a);
int gemm_backward(const char* kn, const Dims& d, const float* qkv, const float* probs, const float* dout,
                  float* dqkv, const dsk_attention_args& a);

}  // namespace ds::kernels::attention
