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
#include <limits>
#include <mutex>

#include "arg_check.h"
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

int check_args(const char* kn, const dsk_attention_args* a, attn::Dims* d) {
    if (a == nullptr) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: args is NULL", kn);
    if (a->batch < 1 || a->seq < 1 || a->channels < 1 || a->heads < 1)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT,
                              "%s: batch=%lld, seq=%lld, channels=%lld, heads=%lld must all be >= 1", kn,
                              static_cast<long long>(a->batch), static_cast<long long>(a->seq),
                              static_cast<long long>(a->channels), static_cast<long long>(a->heads));
    if (a->channels % a->heads != 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: channels=%lld is not a multiple of heads=%lld", kn,
                              static_cast<long long>(a->channels), static_cast<long long>(a->heads));
    if (!(a->dropout_p >= 0.0f && a->dropout_p < 1.0f))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: dropout_p=%g is outside [0, 1)", kn,
                              static_cast<double>(a->dropout_p));
    if (a->causal != 0 && a->causal != 1)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: causal=%d is not 0 or 1", kn, a->causal);
    if (a->bf16_products != 0 && a->bf16_products != 1)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: bf16_products=%d is not 0 or 1", kn, a->bf16_products);
    // B*T*3C and B*H*T*T must fit (and be addressable).
    const unsigned __int128 lim = static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max()) / 4;
    const unsigned __int128 B = static_cast<unsigned __int128>(a->batch), T = static_cast<unsigned __int128>(a->seq);
    const unsigned __int128 C = static_cast<unsigned __int128>(a->channels),
                            H = static_cast<unsigned __int128>(a->heads);
    // Each factor is < 2^63, so no product of two overflows 128 bits; check stepwise.
    if (B * T > lim || B * T * 3 * C > lim || B * H > lim || B * H * T > lim || B * H * T * T > lim)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT,
                              "%s: batch=%lld x seq=%lld x channels=%lld (heads=%lld) is too large", kn,
                              static_cast<long long>(a->batch), static_cast<long long>(a->seq),
                              static_cast<long long>(a->channels), static_cast<long long>(a->heads));
    d->B = a->batch;
    d->T = a->seq;
    d->C = a->channels;
    d->H = a->heads;
    d->hd = a->channels / a->heads;
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
