// dsk_cpu_attention_forward/backward (nn_attention.h): the argument checks
// and the choice between the two CPU implementations, the per-head GEMM
// kernel (attention_gemm.cpp) and the row-loop kernel (attention_rows.cpp).
// By default (DSK_ATTENTION_KERNEL_AUTO) sequences of kGemmFromSeq tokens
// and more take the GEMMs, shorter ones the row loops: on heads of 11 x 16
// (the main job) oneDNN's per-call and small-matrix overhead cost more than
// the loops' arithmetic; from T = 32 on the GEMMs are faster
// (docs/PERFORMANCE.md, GPT section). DS_ATTENTION_KERNEL=gemm|rows|auto at
// first use, or dsk_cpu_attention_set_kernel(), picks explicitly.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "arg_check.h"
#include "attention_check.h"
#include "attention_impl.h"

namespace {

using ds::kernels::set_last_error;
namespace attn = ds::kernels::attention;

std::once_flag g_once;
constexpr int64_t kGemmFromSeq = 32;
std::atomic<int> g_kernel{DSK_ATTENTION_KERNEL_AUTO};

int kernel() {
    std::call_once(g_once, [] {
        const char* want = std::getenv("DS_ATTENTION_KERNEL");
        if (want != nullptr && std::strcmp(want, "rows") == 0) g_kernel.store(DSK_ATTENTION_KERNEL_ROWS);
        if (want != nullptr && std::strcmp(want, "gemm") == 0) g_kernel.store(DSK_ATTENTION_KERNEL_GEMM);
        if (want != nullptr && std::strcmp(want, "auto") == 0) g_kernel.store(DSK_ATTENTION_KERNEL_AUTO);
    });
    return g_kernel.load(std::memory_order_relaxed);
}

// Whether this call takes the GEMM kernel. bf16 products exist only there:
// the row loops compute in fp32 (on short sequences one bf16 GEMM call per
// batch element and head costs far more than the loops).
bool use_gemm(const ds::kernels::attention::Dims& d) {
    const int k = kernel();
    return k == DSK_ATTENTION_KERNEL_GEMM || (k == DSK_ATTENTION_KERNEL_AUTO && d.T >= kGemmFromSeq);
}

// The shared checks (attention_check.h), then the dimensions.
int check_args(const char* kn, const dsk_attention_args* a, attn::Dims* d) {
    if (int st = attn::check_args(kn, a)) return st;
    *d = attn::Dims{a->batch, a->seq, a->channels, a->heads, a->channels / a->heads};
    return DSK_OK;
}

int null_arg(const char* kn, const char* arg) {
    return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: %s is NULL", kn, arg);
}

}  // namespace

extern "C" int dsk_cpu_attention_forward(const float* qkv, float* out, float* probs,
                                         const dsk_attention_args* a) noexcept {
    const char* kn = "dsk_attention_forward";
    attn::Dims d{};
    if (int st = check_args(kn, a, &d)) return st;
    if (qkv == nullptr) return null_arg(kn, "qkv");
    if (out == nullptr) return null_arg(kn, "out");
    return use_gemm(d) ? attn::gemm_forward(kn, d, qkv, out, probs, *a) : attn::rows_forward(kn, d, qkv, out, probs, *a);
}

extern "C" int dsk_cpu_attention_backward(const float* qkv, const float* probs, const float* dout, float* dqkv,
                                          const dsk_attention_args* a) noexcept {
    const char* kn = "dsk_attention_backward";
    attn::Dims d{};
    if (int st = check_args(kn, a, &d)) return st;
    if (qkv == nullptr) return null_arg(kn, "qkv");
    if (dout == nullptr) return null_arg(kn, "dout");
    if (dqkv == nullptr) return null_arg(kn, "dqkv");
    return use_gemm(d) ? attn::gemm_backward(kn, d, qkv, probs, dout, dqkv, *a)
                       : attn::rows_backward(kn, d, qkv, probs, dout, dqkv, *a);
}

extern "C" int dsk_cpu_attention_kernel(void) noexcept { return kernel(); }

extern "C" int dsk_cpu_attention_set_kernel(int k) noexcept {
    if (k != DSK_ATTENTION_KERNEL_GEMM && k != DSK_ATTENTION_KERNEL_ROWS && k != DSK_ATTENTION_KERNEL_AUTO)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT,
                              "dsk_cpu_attention_set_kernel: kernel=%d is not DSK_ATTENTION_KERNEL_GEMM (%d), "
                              "DSK_ATTENTION_KERNEL_ROWS (%d) or DSK_ATTENTION_KERNEL_AUTO (%d)",
                              k, DSK_ATTENTION_KERNEL_GEMM, DSK_ATTENTION_KERNEL_ROWS, DSK_ATTENTION_KERNEL_AUTO);
    kernel();  // the environment's choice is read first, so it cannot override this one later
    g_kernel.store(k);
    return DSK_OK;
}
