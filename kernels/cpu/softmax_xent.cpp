// dsk_cpu_softmax_xent_fwd / _bwd (nn_ops.h): rows split over threads. The
// forward keeps only each row's log-sum-exp; the backward recomputes the
// softmax from it, so no [rows, V] probability buffer is ever stored.
#include <cinttypes>

#include "arg_check.h"
#include "nn_ops_isa.h"
#include "row_chunks.h"

namespace {

using ds::kernels::set_last_error;

inline int64_t target_at(const void* targets, int dtype, size_t r) {
    return dtype == DSK_I32 ? static_cast<const int32_t*>(targets)[r] : static_cast<const int64_t*>(targets)[r];
}

// Shared checks; every target is validated before anything is written.
int check_xent(const char* kernel, const float* logits, const void* targets, int target_dtype, size_t rows,
               size_t V, int64_t ignore_index) {
    ds::kernels::ArgCheck k(kernel);
    if (k.ptr("logits", logits, rows * V).ptr("targets", targets, rows).failed()) return k.status();
    if (target_dtype != DSK_I32 && target_dtype != DSK_I64)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: target_dtype = %d is not DSK_I32 or DSK_I64", kernel,
                              target_dtype);
    if (rows != 0 && V == 0) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: V = 0 with rows = %zu", kernel, rows);
    for (size_t r = 0; r < rows; ++r) {
        const int64_t t = target_at(targets, target_dtype, r);
        if (t != ignore_index && (t < 0 || static_cast<uint64_t>(t) >= V))
            return set_last_error(DSK_ERR_INVALID_ARGUMENT,
                                  "%s: targets[%zu] = %" PRId64 " is outside [0, %zu) and is not ignore_index (%" PRId64
                                  ")",
                                  kernel, r, t, V, ignore_index);
    }
    return DSK_OK;
}

}  // namespace

extern "C" int dsk_cpu_softmax_xent_fwd(const float* logits, const void* targets, int target_dtype, size_t rows,
                                        size_t V, int64_t ignore_index, float* row_loss, float* row_lse,
                                        double* loss_sum, int64_t* count) noexcept {
    const char* kernel = "dsk_softmax_xent_fwd";
    if (int s = check_xent(kernel, logits, targets, target_dtype, rows, V, ignore_index)) return s;
    ds::kernels::ArgCheck k(kernel);
    if (k.ptr("loss_sum", loss_sum, 1).ptr("count", count, 1).failed()) return k.status();
    const auto& ops = ds::kernels::nn_isa_ops();
    const int chunks = row_chunk_count(rows, V);
    double part[kMaxChunks];
    int64_t cnt[kMaxChunks];
    run_row_chunks(rows, chunks, [&](size_t r0, size_t r1, int c) {
        double s = 0.0;
        int64_t m = 0;
        for (size_t r = r0; r < r1; ++r) {
            const int64_t t = target_at(targets, target_dtype, r);
            if (t == ignore_index) {
                if (row_loss != nullptr) row_loss[r] = 0.0f;
                if (row_lse != nullptr) row_lse[r] = 0.0f;
                continue;
            }
            const float* row = logits + r * V;
            const float lse = ops.logsumexp(row, V);
            const float loss = lse - row[t];
            if (row_loss != nullptr) row_loss[r] = loss;
            if (row_lse != nullptr) row_lse[r] = lse;
            s += loss;
            ++m;
        }
        part[c] = s;
        cnt[c] = m;
    });
    double s = 0.0;
    int64_t m = 0;
    for (int c = 0; c < chunks; ++c) {  // chunk order: deterministic
        s += part[c];
        m += cnt[c];
    }
    *loss_sum = s;
    *count = m;
    return DSK_OK;
}

extern "C" int dsk_cpu_softmax_xent_bwd(const float* logits, const void* targets, int target_dtype,
                                        const float* row_lse, size_t rows, size_t V, int64_t ignore_index,
                                        float scale, float* dlogits) noexcept {
    const char* kernel = "dsk_softmax_xent_bwd";
    if (int s = check_xent(kernel, logits, targets, target_dtype, rows, V, ignore_index)) return s;
    ds::kernels::ArgCheck k(kernel);
    if (k.ptr("row_lse", row_lse, rows).ptr("dlogits", dlogits, rows * V).failed()) return k.status();
    const auto& ops = ds::kernels::nn_isa_ops();
    run_row_chunks(rows, row_chunk_count(rows, V), [&](size_t r0, size_t r1, int) {
        for (size_t r = r0; r < r1; ++r) {
            const int64_t t = target_at(targets, target_dtype, r);
            float* out = dlogits + r * V;
            if (t == ignore_index) {
                for (size_t j = 0; j < V; ++j) out[j] = 0.0f;
                continue;
            }
            ops.softmax_scaled(logits + r * V, V, row_lse[r], scale, out);
            out[t] -= scale;
        }
    });
    return DSK_OK;
}
