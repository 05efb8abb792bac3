// dsk_backend_cpu(): the host kernel table over the dsk_cpu_* entry points.
#include "backend.h"

namespace {

// Adapts a dsk_cpu_* entry point to the table's signature (the table first;
// the CPU needs no stream).
template <auto Fn>
struct Entry;
template <class... Args, int (*Fn)(Args...) noexcept>
struct Entry<Fn> {
    static int call(const dsk_backend*, Args... args) noexcept { return Fn(args...); }
};

const dsk_backend kCpu = {
    sizeof(dsk_backend),
    DSK_BACKEND_VERSION,
    "cpu",
    nullptr,
    &Entry<&dsk_cpu_convert>::call,
    &Entry<&dsk_cpu_scale>::call,
    &Entry<&dsk_cpu_sumsq>::call,
    &Entry<&dsk_cpu_axpy>::call,
    &Entry<&dsk_cpu_axpy_sumsq>::call,
    &Entry<&dsk_cpu_adam_step>::call,
    &Entry<&dsk_cpu_lamb_step>::call,
    &Entry<&dsk_cpu_sgd_step>::call,
    &Entry<&dsk_cpu_lion_step>::call,
    &Entry<&dsk_cpu_gemm>::call,
    &Entry<&dsk_cpu_gemm_batched>::call,
    &Entry<&dsk_cpu_linear_fwd>::call,
    &Entry<&dsk_cpu_bias_grad>::call,
    &Entry<&dsk_cpu_embedding_fwd>::call,
    &Entry<&dsk_cpu_embedding_bwd>::call,
    &Entry<&dsk_cpu_layernorm_fwd>::call,
    &Entry<&dsk_cpu_layernorm_bwd>::call,
    &Entry<&dsk_cpu_layernorm_bwd_from_output>::call,
    &Entry<&dsk_cpu_gelu_fwd>::call,
    &Entry<&dsk_cpu_gelu_bwd>::call,
    &Entry<&dsk_cpu_dropout_fwd>::call,
    &Entry<&dsk_cpu_dropout_bwd>::call,
    &Entry<&dsk_cpu_dropout_apply>::call,
    &Entry<&dsk_cpu_softmax_xent_fwd>::call,
    &Entry<&dsk_cpu_softmax_xent_bwd>::call,
    &Entry<&dsk_cpu_mse_fwd>::call,
    &Entry<&dsk_cpu_mse_bwd>::call,
    &Entry<&dsk_cpu_add>::call,
    &Entry<&dsk_cpu_add_inplace>::call,
    &Entry<&dsk_cpu_attention_forward>::call,
    &Entry<&dsk_cpu_attention_backward>::call,
    &Entry<&dsk_cpu_gemm_bf16>::call,
    &Entry<&dsk_cpu_linear_fwd_bf16>::call,
    &Entry<&dsk_cpu_linear_bwd_bf16>::call,
    &Entry<&dsk_cpu_linear_fwd_bf16w>::call,
    &Entry<&dsk_cpu_linear_bwd_bf16w>::call,
    &Entry<&dsk_cpu_moe_rows_gather>::call,
    &Entry<&dsk_cpu_moe_rows_scatter_add>::call,
    &Entry<&dsk_cpu_moe_rows_dot>::call,
    &Entry<&dsk_cpu_moe_jitter>::call,
};

}  // namespace

extern "C" const dsk_backend* dsk_backend_cpu(void) noexcept { return &kCpu; }
