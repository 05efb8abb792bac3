// dsk_cpu_add / _add_inplace (residuals) and the MSE loss kernels (nn_ops.h).
#include "arg_check.h"
#include "elementwise_chunks.h"
#include "nn_ops_isa.h"

extern "C" int dsk_cpu_add(const float* a, const float* b, float* y, size_t n) noexcept {
    ds::kernels::ArgCheck k("dsk_add");
    if (k.ptr("a", a, n).ptr("b", b, n).ptr("y", y, n).failed()) return k.status();
    const auto& ops = ds::kernels::nn_isa_ops();
    run_flat_chunks(n, [&](size_t lo, size_t hi, int) { ops.add(a + lo, b + lo, y + lo, hi - lo); });
    return DSK_OK;
}

extern "C" int dsk_cpu_add_inplace(float* y, const float* a, size_t n) noexcept {
    ds::kernels::ArgCheck k("dsk_add_inplace");
    if (k.ptr("y", y, n).ptr("a", a, n).failed()) return k.status();
    const auto& ops = ds::kernels::nn_isa_ops();
    run_flat_chunks(n, [&](size_t lo, size_t hi, int) { ops.add_inplace(y + lo, a + lo, hi - lo); });
    return DSK_OK;
}

extern "C" int dsk_cpu_mse_fwd(const float* pred, const float* target, size_t n, double* sum_sq) noexcept {
    ds::kernels::ArgCheck k("dsk_mse_fwd");
    if (k.ptr("pred", pred, n).ptr("target", target, n).ptr("sum_sq", sum_sq, 1).failed()) return k.status();
    const auto& ops = ds::kernels::nn_isa_ops();
    double part[kMaxChunks];
    const int used = run_flat_chunks(
        n, [&](size_t lo, size_t hi, int c) { part[c] = ops.sq_diff_sum(pred + lo, target + lo, hi - lo); });
    double s = 0.0;
    for (int c = 0; c < used; ++c) s += part[c];  // chunk order: deterministic
    *sum_sq = s;
    return DSK_OK;
}

extern "C" int dsk_cpu_mse_bwd(const float* pred, const float* target, size_t n, float scale,
                               float* dpred) noexcept {
    ds::kernels::ArgCheck k("dsk_mse_bwd");
    if (k.ptr("pred", pred, n).ptr("target", target, n).ptr("dpred", dpred, n).failed()) return k.status();
    const auto& ops = ds::kernels::nn_isa_ops();
    run_flat_chunks(n, [&](size_t lo, size_t hi, int) {
        ops.scaled_diff(pred + lo, target + lo, scale, dpred + lo, hi - lo);
    });
    return DSK_OK;
}
