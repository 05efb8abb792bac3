// dsk_cpu_dropout_fwd / _bwd / _apply (nn_ops.h): the mask is regenerated from
// the key by Philox4x32-10 (philox.h) on every call, never stored; chunks of
// the buffer run on separate threads, each starting at its own stream offset,
// so the mask does not depend on the thread count.
#include <cmath>
#include <cstring>

#include "arg_check.h"
#include "elementwise_chunks.h"
#include "nn_ops_isa.h"
#include "philox.h"

namespace {

using ds::kernels::set_last_error;

int dropout(const char* kernel, const char* in_name, const char* out_name, const float* x, float* y, size_t n,
            float p, const dsk_dropout_key* key) {
    ds::kernels::ArgCheck k(kernel);
    if (k.ptr(in_name, x, n).ptr(out_name, y, n).failed()) return k.status();
    if (key == nullptr) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: key is NULL", kernel);
    if (!(p >= 0.0f && p <= 1.0f))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: p = %g is not in [0, 1]", kernel,
                              static_cast<double>(p));
    if (n == 0) return DSK_OK;
    if (p == 1.0f) {  // everything dropped (the scale 1/(1-p) would be infinite)
        std::memset(static_cast<void*>(y), 0, n * sizeof(float));
        return DSK_OK;
    }
    const uint32_t thr = static_cast<uint32_t>(dsk_dropout_threshold(p));
    const float scale = 1.0f / (1.0f - p);
    const auto& ops = ds::kernels::nn_isa_ops();
    run_flat_chunks(n, [&](size_t lo, size_t hi, int) {
        dsk_dropout_key kc = *key;
        kc.offset = key->offset + lo;
        ops.dropout(x + lo, y + lo, hi - lo, thr, scale, kc);
    });
    return DSK_OK;
}

}  // namespace

extern "C" uint64_t dsk_dropout_threshold(float p) noexcept {
    if (!(p > 0.0f)) return 0;
    if (p >= 1.0f) return uint64_t{1} << 32;
    const double t = std::nearbyint(static_cast<double>(p) * 4294967296.0);
    return static_cast<uint64_t>(t);
}

extern "C" void dsk_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) noexcept {
    ds::kernels::philox4x32_10(ctr[0], ctr[1], ctr[2], ctr[3], key[0], key[1], out);
}

extern "C" int dsk_cpu_dropout_fwd(const float* x, float* y, size_t n, float p,
                                   const dsk_dropout_key* key) noexcept {
    return dropout("dsk_dropout_fwd", "x", "y", x, y, n, p, key);
}

extern "C" int dsk_cpu_dropout_bwd(const float* dy, float* dx, size_t n, float p,
                                   const dsk_dropout_key* key) noexcept {
    return dropout("dsk_dropout_bwd", "dy", "dx", dy, dx, n, p, key);
}

extern "C" int dsk_cpu_dropout_apply(float* x, size_t n, float p, const dsk_dropout_key* key) noexcept {
    return dropout("dsk_dropout_apply", "x", "x", x, x, n, p, key);
}
