// dsk_cuda_embedding_fwd / _bwd (nn_embedding.h semantics). Every id is
// checked on the device first (the smallest bad position by an integer
// atomicMin) and the call waits for that check, so a bad id is reported
// (position and value, *bad_index) before anything is written, as on the CPU.
// The backward sorts (id, token) pairs with CUB's stable radix sort and sums
// each id's tokens in token order (../elem/embedding.h): the CPU kernel's
// result bit for bit, with no float atomics.
#include <cub/device/device_radix_sort.cuh>

#include <cinttypes>

#include "../elem/embedding.h"
#include "reduce2.cuh"

using namespace ds::kernels;
using namespace ds::kernels::cu;

namespace ds::kernels::cu {

// keys/vals NULL: check only. *first_bad = the smallest bad position.
__global__ void emb_keys(const void* ids, int dtype, size_t n, int64_t num, uint32_t* keys, uint32_t* vals,
                         unsigned long long* first_bad) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        if (!emb_key_elem(ids, dtype, num, i, keys, vals)) atomicMin(first_bad, static_cast<unsigned long long>(i));
}

__global__ void emb_fwd(EmbFwdArgs a) { emb_fwd_thread(a, blockIdx.x, threadIdx.x, gridDim.x, blockDim.x); }

__global__ void emb_bwd(EmbBwdArgs a) { emb_bwd_thread(a, blockIdx.x, blockIdx.y, threadIdx.x, gridDim.y, blockDim.x); }

}  // namespace ds::kernels::cu

namespace {

// The CPU kernel's argument checks (nn_embedding.h), with this kernel's name.
int check_args(const char* kernel, const void* table, const char* table_name, const void* rows,
               const char* rows_name, const void* ids, int id_dtype, int64_t n, int64_t num, int64_t dim,
               int64_t* bad_index) {
    if (bad_index) *bad_index = -1;
    if (id_dtype != DSK_I32 && id_dtype != DSK_I64)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: id_dtype = %d is not DSK_I32 or DSK_I64", kernel,
                              id_dtype);
    if (n < 0 || num < 0 || dim < 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: negative size (n %" PRId64 ", num %" PRId64
                              ", dim %" PRId64 ")", kernel, n, num, dim);
    if (n > 0 && ids == nullptr)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: ids is NULL (n = %" PRId64 ")", kernel, n);
    if (n > 0 && dim > 0 && rows == nullptr)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: %s is NULL (%" PRId64 " x %" PRId64 ")", kernel,
                              rows_name, n, dim);
    if (n > 0 && dim > 0 && table == nullptr)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: %s is NULL (%" PRId64 " x %" PRId64 ")", kernel,
                              table_name, num, dim);
    return DSK_OK;
}

// Launches the id check (keys/vals as emb_keys) into flag (device scratch),
// waits, and reports the first bad id as the CPU does.
int check_ids(const char* kernel, const void* ids, int id_dtype, int64_t n, int64_t num, uint32_t* keys,
              uint32_t* vals, unsigned long long* flag, int64_t* bad_index, cudaStream_t st) {
    if (const int rc = cuda_status(kernel, "cudaMemsetAsync", cudaMemsetAsync(flag, 0xFF, sizeof *flag, st)))
        return rc;
    const size_t want = (static_cast<size_t>(n) + 255) / 256;
    emb_keys<<<static_cast<unsigned>(want < 4096 ? want : 4096), 256, 0, st>>>(ids, id_dtype, static_cast<size_t>(n),
                                                                             num, keys, vals, flag);
    if (const int rc = cuda_launch_status(kernel)) return rc;
    unsigned long long first = 0;
    if (const int rc = cuda_status(kernel, "cudaMemcpyAsync (id check)",
                                   cudaMemcpyAsync(&first, flag, sizeof first, cudaMemcpyDeviceToHost, st)))
        return rc;
    if (const int rc = cuda_status(kernel, "cudaStreamSynchronize", cudaStreamSynchronize(st))) return rc;
    if (first == ~0ull) return DSK_OK;
    int64_t id = 0;
    const size_t es = id_dtype == DSK_I32 ? 4 : 8;
    if (const int rc = cuda_status(kernel, "cudaMemcpy (bad id)",
                                   cudaMemcpy(&id, static_cast<const char*>(ids) + first * es, es,
                                              cudaMemcpyDeviceToHost)))
        return rc;
    if (es == 4) id = static_cast<int32_t>(id & 0xFFFFFFFF);
    if (bad_index) *bad_index = static_cast<int64_t>(first);
    return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: ids[%llu] = %" PRId64 " is outside [0, %" PRId64 ")", kernel,
                          first, id, num);
}

constexpr size_t align256(size_t b) { return (b + 255) / 256 * 256; }

}  // namespace

extern "C" int dsk_cuda_embedding_fwd(const float* weight, int64_t num, int64_t dim, const void* ids, int id_dtype,
                                      int64_t n, float* out, int64_t* bad_index, void* stream) noexcept {
    const char* kernel = "dsk_cuda_embedding_fwd";
    if (const int rc = check_args(kernel, weight, "weight", out, "out", ids, id_dtype, n, num, dim, bad_index))
        return rc;
    if (n == 0) return DSK_OK;
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    StreamScratch scratch{st};
    if (const int rc = scratch.alloc(kernel, sizeof(unsigned long long))) return rc;
    if (const int rc = check_ids(kernel, ids, id_dtype, n, num, nullptr, nullptr,
                                 static_cast<unsigned long long*>(scratch.p), bad_index, st))
        return rc;
    if (dim == 0) return DSK_OK;
    const EmbFwdArgs a{weight, ids, id_dtype, static_cast<size_t>(n), static_cast<size_t>(dim), out};
    emb_fwd<<<emb_rows_grid(a.n), emb_threads(a.dim), 0, st>>>(a);
    return cuda_launch_status(kernel);
}

extern "C" int dsk_cuda_embedding_bwd(const float* dy, const void* ids, int id_dtype, int64_t n, int64_t num,
                                      int64_t dim, float* dweight, int64_t* bad_index, void* stream) noexcept {
    const char* kernel = "dsk_cuda_embedding_bwd";
    if (const int rc = check_args(kernel, dweight, "dweight", dy, "dy", ids, id_dtype, n, num, dim, bad_index))
        return rc;
    if (n == 0) return DSK_OK;
    // The sort's pairs are 32-bit (ids and token positions) and CUB counts in int.
    if (n > INT32_MAX || num > (int64_t{1} << 32))
        return set_last_error(DSK_ERR_UNSUPPORTED, "%s: n = %" PRId64 " (at most %d) or num = %" PRId64
                              " (at most 2^32) is too large for the device sort", kernel, n, INT32_MAX, num);
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    const size_t cnt = static_cast<size_t>(n);
    const int items = static_cast<int>(n);
    int end_bit = 1;  // the bits of the largest possible id
    while (end_bit < 32 && (uint64_t{1} << end_bit) < static_cast<uint64_t>(num)) ++end_bit;
    size_t sort_bytes = 0;
    if (const int rc = cuda_status(kernel, "cub::DeviceRadixSort::SortPairs (size)",
                                   cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<uint32_t*>(nullptr),
                                                                   static_cast<uint32_t*>(nullptr),
                                                                   static_cast<uint32_t*>(nullptr),
                                                                   static_cast<uint32_t*>(nullptr), items, 0, end_bit,
                                                                   st)))
        return rc;
    const size_t arr = align256(cnt * sizeof(uint32_t));
    StreamScratch scratch{st};
    if (const int rc = scratch.alloc(kernel, 256 + 4 * arr + align256(sort_bytes))) return rc;
    char* base = static_cast<char*>(scratch.p);
    auto* flag = reinterpret_cast<unsigned long long*>(base);
    auto* keys = reinterpret_cast<uint32_t*>(base + 256);
    auto* vals = reinterpret_cast<uint32_t*>(base + 256 + arr);
    auto* skeys = reinterpret_cast<uint32_t*>(base + 256 + 2 * arr);
    auto* stok = reinterpret_cast<uint32_t*>(base + 256 + 3 * arr);
    void* sort_tmp = base + 256 + 4 * arr;
    if (const int rc = check_ids(kernel, ids, id_dtype, n, num, keys, vals, flag, bad_index, st)) return rc;
    if (dim == 0) return DSK_OK;
    if (const int rc = cuda_status(kernel, "cub::DeviceRadixSort::SortPairs",
                                   cub::DeviceRadixSort::SortPairs(sort_tmp, sort_bytes, keys, skeys, vals, stok, items,
                                                                   0, end_bit, st)))
        return rc;
    const EmbBwdArgs a{dy, skeys, stok, cnt, static_cast<size_t>(dim), dweight};
    const unsigned threads = emb_threads(a.dim);
    const dim3 grid(static_cast<unsigned>((a.dim + threads - 1) / threads), emb_rows_grid(cnt));
    emb_bwd<<<grid, threads, 0, st>>>(a);
    return cuda_launch_status(kernel);
}
