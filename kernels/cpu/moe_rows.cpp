// dsk_cpu_moe_rows_gather / _scatter_add / _dot (nn_moe.h): the MoE layer's
// dispatch and combine on token rows, gather and scatter-add with the
// per-element code of ../elem/moe_rows.h (the CUDA kernels' too), the dot in
// the layer's own order (c ascending), so the layer's device path on host
// memory computes what its CPU path computes, bit for bit.
#include <cinttypes>

#include "../elem/moe_rows.h"
#include "arg_check.h"
#include "nn_moe.h"

using ds::kernels::ArgCheck;
using ds::kernels::set_last_error;

namespace {

// Sizes non-negative, the table [S, C] and the rows [n, C] set where they
// have elements, every index in [0, S).
int check(const char* kernel, const float* table, const char* table_name, int64_t S, int64_t C,
          const int32_t* idx, const float* rows, const char* rows_name, int64_t n) {
    if (S < 0 || C < 0 || n < 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: negative size (S %" PRId64 ", C %" PRId64 ", n %" PRId64
                              ")", kernel, S, C, n);
    ArgCheck k(kernel);
    const size_t nc = static_cast<size_t>(n) * static_cast<size_t>(C);
    if (k.ptr("idx", idx, static_cast<size_t>(n)).ptr(table_name, table, nc).ptr(rows_name, rows, nc).failed())
        return k.status();
    for (int64_t j = 0; j < n; ++j)
        if (idx[j] < 0 || idx[j] >= S)
            return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: idx[%" PRId64 "] = %d is outside [0, %" PRId64 ")",
                                  kernel, j, idx[j], S);
    return DSK_OK;
}

}  // namespace

extern "C" int dsk_cpu_moe_rows_gather(const float* src, int64_t S, int64_t C, const int32_t* idx,
                                       const float* scale, int64_t n, float* dst) noexcept {
    if (const int rc = check("dsk_moe_rows_gather", src, "src", S, C, idx, dst, "dst", n)) return rc;
    const size_t total = static_cast<size_t>(n) * static_cast<size_t>(C);
    for (size_t i = 0; i < total; ++i) ds::kernels::moe_gather_elem(src, static_cast<size_t>(C), idx, scale, i, dst);
    return DSK_OK;
}

extern "C" int dsk_cpu_moe_rows_scatter_add(const float* src, int64_t n, int64_t C, const int32_t* idx,
                                            const float* scale, int64_t S, float* dst) noexcept {
    if (const int rc = check("dsk_moe_rows_scatter_add", dst, "dst", S, C, idx, src, "src", n)) return rc;
    const size_t total = static_cast<size_t>(n) * static_cast<size_t>(C);
    for (size_t i = 0; i < total; ++i)
        ds::kernels::moe_scatter_add_elem(src, static_cast<size_t>(C), idx, scale, i, dst);
    return DSK_OK;
}

extern "C" int dsk_cpu_moe_rows_dot(const float* a, int64_t S, int64_t C, const int32_t* idx, const float* b,
                                    int64_t n, float* out) noexcept {
    if (const int rc = check("dsk_moe_rows_dot", a, "a", S, C, idx, b, "b", n)) return rc;
    if (n > 0 && out == nullptr)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "dsk_moe_rows_dot: out is NULL (n = %" PRId64 ")", n);
    for (int64_t j = 0; j < n; ++j) {
        const float* x = a + static_cast<int64_t>(idx[j]) * C;
        const float* y = b + j * C;
        float acc = 0.0f;
        for (int64_t c = 0; c < C; ++c) acc += x[c] * y[c];
        out[j] = acc;
    }
    return DSK_OK;
}
