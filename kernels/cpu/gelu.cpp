// dsk_cpu_gelu_fwd / _bwd (nn_ops.h): the tanh-approximation GELU, split over
// threads in contiguous chunks.
#include "arg_check.h"
#include "elementwise_chunks.h"
#include "nn_ops_isa.h"

extern "C" int dsk_cpu_gelu_fwd(const float* x, float* y, size_t n) noexcept {
    ds::kernels::ArgCheck k("dsk_gelu_fwd");
    if (k.ptr("x", x, n).ptr("y", y, n).failed()) return k.status();
    const auto& ops = ds::kernels::nn_isa_ops();
    run_flat_chunks(n, [&](size_t lo, size_t hi, int) { ops.gelu_fwd(x + lo, y + lo, hi - lo); });
    return DSK_OK;
}

extern "C" int dsk_cpu_gelu_bwd(const float* x, const float* dy, float* dx, size_t n) noexcept {
    ds::kernels::ArgCheck k("dsk_gelu_bwd");
    if (k.ptr("x", x, n).ptr("dy", dy, n).ptr("dx", dx, n).failed()) return k.status();
    const auto& ops = ds::kernels::nn_isa_ops();
    run_flat_chunks(n, [&](size_t lo, size_t hi, int) { ops.gelu_bwd(x + lo, dy + lo, dx + lo, hi - lo); });
    return DSK_OK;
}
