// Scalar references for the embedding kernels (no checks).
#include "nn_embedding.h"

namespace {
int64_t id_at(const void* ids, int dtype, int64_t i) {
    return dtype == DSK_I32 ? static_cast<const int32_t*>(ids)[i] : static_cast<const int64_t*>(ids)[i];
}
}  // namespace

extern "C" void dsk_ref_embedding_fwd(const float* weight, int64_t dim, const void* ids, int id_dtype, int64_t n,
                                      float* out) {
    for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < dim; ++c) out[i * dim + c] = weight[id_at(ids, id_dtype, i) * dim + c];
}

extern "C" void dsk_ref_embedding_bwd(const float* dy, const void* ids, int id_dtype, int64_t n, int64_t dim,
                                      float* dweight) {
    for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < dim; ++c) dweight[id_at(ids, id_dtype, i) * dim + c] += dy[i * dim + c];
}
