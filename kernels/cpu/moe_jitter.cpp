// dsk_cpu_moe_jitter (nn_moe.h): the MoE gate's jitter with the per-element
// code of ../elem/moe_jitter.h (the CUDA kernel's too), so the layer's CPU
// and device paths draw and multiply the same. Elements are independent, so
// chunks run on separate threads without changing a bit.
#include <cinttypes>

#include "../elem/moe_jitter.h"
#include "arg_check.h"
#include "elementwise_chunks.h"
#include "nn_moe.h"

using ds::kernels::set_last_error;

extern "C" int dsk_cpu_moe_jitter(const float* src, int64_t n, const dsk_dropout_key* key, uint64_t first,
                                  int accumulate, float* dst) noexcept {
    const char* kernel = "dsk_moe_jitter";
    if (n < 0) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: n = %" PRId64 " is negative", kernel, n);
    ds::kernels::ArgCheck k(kernel);
    if (k.ptr("src", src, static_cast<size_t>(n)).ptr("dst", dst, static_cast<size_t>(n)).failed()) return k.status();
    if (key == nullptr) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: key is NULL", kernel);
    const ds::kernels::DropoutStream st = dropout_stream(*key);
    const uint64_t offset = key->offset;
    run_flat_chunks(static_cast<size_t>(n), [&](size_t lo, size_t hi, int) {
        for (size_t i = lo; i < hi; ++i) moe_jitter_elem(src, st, offset, first, accumulate, i, dst);
    });
    return DSK_OK;
}
