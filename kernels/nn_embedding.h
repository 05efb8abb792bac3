/*
 * nn_embedding.h — the Embedding layer's kernels: a row gather and its
 * scatter-add gradient. ids are DSK_I32 or DSK_I64 (dtype_codes.h), n of
 * them; weight/dweight are [num, dim] fp32, out/dy [n, dim]. Conventions of
 * kernels.h (status + dsk_last_error(), no exceptions).
 */
#ifndef DS_KERNELS_NN_EMBEDDING_H
#define DS_KERNELS_NN_EMBEDDING_H

#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/** out[i, :] = weight[ids[i], :]. An id outside [0, num) is
 *  DSK_ERR_INVALID_ARGUMENT naming the id and its index i, which is also
 *  stored in *bad_index (nullable; -1 when every id is valid). out is not
 *  written when an id is bad. OpenMP over rows. */
int dsk_cpu_embedding_fwd(const float* weight, int64_t num, int64_t dim, const void* ids, int id_dtype, int64_t n,
                          float* out, int64_t* bad_index) DSK_NOEXCEPT;

/** dweight[ids[i], :] += dy[i, :] for every i, in order of i for each
 *  element: threads own column slices, so the result does not depend on the
 *  thread count and needs no atomics. Ids are checked first (as above);
 *  dweight is untouched when one is bad. */
int dsk_cpu_embedding_bwd(const float* dy, const void* ids, int id_dtype, int64_t n, int64_t num, int64_t dim,
                          float* dweight, int64_t* bad_index) DSK_NOEXCEPT;

/* scalar references (tests) */
void dsk_ref_embedding_fwd(const float* weight, int64_t dim, const void* ids, int id_dtype, int64_t n, float* out);
void dsk_ref_embedding_bwd(const float* dy, const void* ids, int id_dtype, int64_t n, int64_t dim, float* dweight);

#ifdef __cplusplus
}
#endif

#endif /* DS_KERNELS_NN_EMBEDDING_H */
