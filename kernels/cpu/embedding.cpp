// dsk_cpu_embedding_fwd/bwd (kernels/nn_embedding.h): row gather and its
// deterministic scatter-add gradient.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "arg_check.h"
#include "nn_embedding.h"

namespace {

using ds::kernels::set_last_error;

inline int64_t id_at(const void* ids, int dtype, int64_t i) {
    return dtype == DSK_I32 ? static_cast<const int32_t*>(ids)[i] : static_cast<const int64_t*>(ids)[i];
}

// Common checks plus the first out-of-range id; DSK_OK when all is well.
int check(const char* kernel, const void* table, const char* table_name, const void* rows, const char* rows_name,
          const void* ids, int id_dtype, int64_t n, int64_t num, int64_t dim, int64_t* bad_index) {
    if (bad_index) *bad_index = -1;
    if (id_dtype != DSK_I32 && id_dtype != DSK_I64)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: id_dtype = %d is not DSK_I32 or DSK_I64", kernel,
                              id_dtype);
    if (n < 0 || num < 0 || dim < 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: negative size (n %lld, num %lld, dim %lld)", kernel,
                              static_cast<long long>(n), static_cast<long long>(num), static_cast<long long>(dim));
    if (n > 0 && ids == nullptr)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: ids is NULL (n = %lld)", kernel, static_cast<long long>(n));
    if (n > 0 && dim > 0 && rows == nullptr)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: %s is NULL (%lld x %lld)", kernel, rows_name,
                              static_cast<long long>(n), static_cast<long long>(dim));
    if (n > 0 && dim > 0 && table == nullptr)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: %s is NULL (%lld x %lld)", kernel, table_name,
                              static_cast<long long>(num), static_cast<long long>(dim));
    for (int64_t i = 0; i < n; ++i) {
        const int64_t id = id_at(ids, id_dtype, i);
        if (id < 0 || id >= num) {
            if (bad_index) *bad_index = i;
            return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: ids[%lld] = %lld is outside [0, %lld)", kernel,
                                  static_cast<long long>(i), static_cast<long long>(id), static_cast<long long>(num));
        }
    }
    return DSK_OK;
}

}  // namespace

extern "C" int dsk_cpu_embedding_fwd(const float* weight, int64_t num, int64_t dim, const void* ids, int id_dtype,
                                     int64_t n, float* out, int64_t* bad_index) noexcept {
    if (int s = check("dsk_embedding_fwd", weight, "weight", out, "out", ids, id_dtype, n, num, dim, bad_index);
        s != DSK_OK)
        return s;
    if (dim == 0) return DSK_OK;
#pragma omp parallel for schedule(static) if (n * dim >= 65536)
    for (int64_t i = 0; i < n; ++i)
        std::memcpy(out + i * dim, weight + id_at(ids, id_dtype, i) * dim, static_cast<size_t>(dim) * sizeof(float));
    return DSK_OK;
}

extern "C" int dsk_cpu_embedding_bwd(const float* dy, const void* ids, int id_dtype, int64_t n, int64_t num,
                                     int64_t dim, float* dweight, int64_t* bad_index) noexcept {
    if (int s = check("dsk_embedding_bwd", dweight, "dweight", dy, "dy", ids, id_dtype, n, num, dim, bad_index);
        s != DSK_OK)
        return s;
    if (dim == 0 || n == 0) return DSK_OK;
    // Column slices of at least 16 floats (one cache line), one per thread:
    // every element of dweight is summed by one thread in the order of i.
    const int threads = n * dim >= 65536 && !omp_in_parallel() ? omp_get_max_threads() : 1;
    const int64_t slices = std::max<int64_t>(1, std::min<int64_t>(threads, (dim + 15) / 16));
#pragma omp parallel for schedule(static) num_threads(static_cast<int>(slices)) if (slices > 1)
    for (int64_t s = 0; s < slices; ++s) {
        const int64_t per = (dim + slices - 1) / slices;
        const int64_t c0 = s * per, c1 = std::min(dim, c0 + per);
        for (int64_t i = 0; i < n; ++i) {
            float* dst = dweight + id_at(ids, id_dtype, i) * dim;
            const float* src = dy + i * dim;
#pragma omp simd
            for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
        }
    }
    return DSK_OK;
}
