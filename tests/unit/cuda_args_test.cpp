// The CUDA entry points' contract that holds without a GPU: every bad
// argument gets DSK_ERR_INVALID_ARGUMENT and a message naming the kernel
// and the argument (checked before any CUDA call), and where no device
// exists a valid call fails with DSK_ERR_CUDA and the CUDA error's text
// (never a crash). Built with CUDA only; a CPU-only build skips.
#include <gtest/gtest.h>

#include <string>

#include "kernels.h"

#ifdef DS_WITH_CUDA
#include "cuda_kernels.h"

namespace {

void expect_invalid(int rc, const std::string& needle) {
    EXPECT_EQ(rc, DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find(needle), std::string::npos)
        << "message: " << dsk_last_error() << " (wanted: " << needle << ")";
}

TEST(CudaArgs, BadArgumentsNameTheKernelAndArgument) {
    float p[4] = {}, m[4] = {}, v[4] = {};
    const float g[4] = {};
    uint16_t w[4] = {};
    dsk_adam_hparams h{1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1.0f, 1.0f, 1.0f, 1};
    dsk_opt_tensor t[3] = {{p, g, m, v, nullptr, 4}, {p, nullptr, m, v, nullptr, 4}, {p, g, m, v, w, 4}};
    expect_invalid(dsk_cuda_adam_multi(t, 1, DSK_F32, DSK_F32, DSK_F16, nullptr, nullptr),
                   "dsk_cuda_adam_multi: h (hyper-parameters) is NULL");
    expect_invalid(dsk_cuda_adam_multi(t, 2, DSK_F32, DSK_F32, DSK_F16, &h, nullptr), "t[1].g is NULL (n = 4)");
    expect_invalid(dsk_cuda_adam_multi(t, 1, 9, DSK_F32, DSK_F16, &h, nullptr), "g_dtype = 9");
    expect_invalid(dsk_cuda_adam_multi(t, 1, DSK_F32, DSK_I8, DSK_F16, &h, nullptr), "state_dtype = 3");
    expect_invalid(dsk_cuda_adam_multi(nullptr, 2, DSK_F32, DSK_F32, DSK_F16, &h, nullptr), "t (tensor list) is NULL");
    dsk_opt_tensor mixed[2] = {t[0], t[2]};
    expect_invalid(dsk_cuda_adam_multi(mixed, 2, DSK_F32, DSK_F32, DSK_F16, &h, nullptr),
                   "t[1].w16 is set but t[0].w16 is NULL");
    dsk_opt_tensor with_w[1] = {t[2]};
    expect_invalid(dsk_cuda_adam_multi(with_w, 1, DSK_F32, DSK_F32, DSK_F32, &h, nullptr), "w_dtype = 0");
    dsk_opt_tensor no_v[1] = {{p, g, m, nullptr, nullptr, 4}};
    expect_invalid(dsk_cuda_adam_multi(no_v, 1, DSK_F32, DSK_F32, DSK_F16, &h, nullptr), "t[0].state2 is NULL");

    dsk_sgd_hparams sh{0.1f, 0.9f, 0.0f, 0.0f, 1.0f, 0, 0};
    dsk_opt_tensor no_buf[1] = {{p, g, nullptr, nullptr, nullptr, 4}};
    expect_invalid(dsk_cuda_sgd_multi(no_buf, 1, DSK_F32, DSK_F16, &sh, nullptr), "dsk_cuda_sgd_multi: t[0].state1");
    dsk_lion_hparams lh{1e-4f, 0.9f, 0.99f, 0.0f, 1.0f};
    expect_invalid(dsk_cuda_lion_multi(no_buf, 1, DSK_F32, DSK_F16, &lh, nullptr), "dsk_cuda_lion_multi: t[0].state1");
    dsk_lamb_hparams lb{};
    expect_invalid(dsk_cuda_lamb_step(p, g, DSK_F32, nullptr, v, nullptr, DSK_F16, 4, &lb, nullptr, nullptr),
                   "dsk_cuda_lamb_step: m is NULL");
    expect_invalid(dsk_cuda_convert(g, DSK_F32, nullptr, DSK_F16, 4, nullptr), "dsk_cuda_convert: dst is NULL");
    expect_invalid(dsk_cuda_scale(p, 7, 2.0f, 4, nullptr), "dsk_cuda_scale: dtype = 7");
    expect_invalid(dsk_cuda_axpy(p, DSK_F32, nullptr, DSK_F32, 1.0f, 4, nullptr), "dsk_cuda_axpy: src is NULL");
    expect_invalid(dsk_cuda_sumsq(nullptr, DSK_F32, 4, nullptr, nullptr, nullptr), "dsk_cuda_sumsq: x is NULL");
    expect_invalid(dsk_cuda_check_overflow(g, DSK_F32, 4, nullptr, nullptr), "dsk_cuda_check_overflow: flag is NULL");
}

TEST(CudaArgs, EmptyCallsSucceedWithoutTouchingTheDevice) {
    dsk_adam_hparams h{1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1.0f, 1.0f, 1.0f, 1};
    EXPECT_EQ(dsk_cuda_adam_multi(nullptr, 0, DSK_F32, DSK_F32, DSK_F16, &h, nullptr), DSK_OK);
    dsk_opt_tensor empty[1] = {{nullptr, nullptr, nullptr, nullptr, nullptr, 0}};
    EXPECT_EQ(dsk_cuda_adam_multi(empty, 1, DSK_F32, DSK_F32, DSK_F16, &h, nullptr), DSK_OK);
    double s = -1.0;
    int nf = -1;
    EXPECT_EQ(dsk_cuda_sumsq(nullptr, DSK_F32, 0, &s, &nf, nullptr), DSK_OK);
    EXPECT_EQ(s, 0.0);
    EXPECT_EQ(nf, 0);
    dsk_lamb_hparams lb{};
    float trust = 0.0f;
    EXPECT_EQ(dsk_cuda_lamb_step(nullptr, nullptr, DSK_F32, nullptr, nullptr, nullptr, DSK_F16, 0, &lb, &trust, nullptr),
              DSK_OK);
    EXPECT_EQ(trust, 1.0f);  // both norms 0, as the CPU kernel
}

// Without a device, a valid call reports the CUDA failure (with a device
// this would launch on host pointers, so it runs only where none exists).
TEST(CudaArgs, NoDeviceGivesCudaErrorWithItsText) {
    if (dsk_cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device exists: tests/gpu cover the launches";
    EXPECT_STRNE(dsk_last_error(), "");  // the reason cudaGetDeviceCount gave
    float p[4] = {}, m[4] = {}, v[4] = {};
    const float g[4] = {};
    dsk_adam_hparams h{1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1.0f, 1.0f, 1.0f, 1};
    dsk_opt_tensor t[1] = {{p, g, m, v, nullptr, 4}};
    EXPECT_EQ(dsk_cuda_adam_multi(t, 1, DSK_F32, DSK_F32, DSK_F16, &h, nullptr), DSK_ERR_CUDA);
    EXPECT_NE(std::string(dsk_last_error()).find("dsk_cuda_adam_multi: kernel launch failed: "), std::string::npos)
        << dsk_last_error();
    double s = 0.0;
    EXPECT_EQ(dsk_cuda_sumsq(g, DSK_F32, 4, &s, nullptr, nullptr), DSK_ERR_CUDA);
    EXPECT_NE(std::string(dsk_last_error()).find("dsk_cuda_sumsq: cudaMallocAsync"), std::string::npos)
        << dsk_last_error();
}

// Attention: nn_attention.h's argument rules, checked before any CUDA call
// (host buffers: nothing may be launched on them).
TEST(CudaArgs, AttentionBadArgumentsNameTheKernelAndArgument) {
    float qkv[24] = {}, out[8] = {}, d[24] = {};
    dsk_attention_args a{};
    a.batch = 1, a.seq = 2, a.channels = 4, a.heads = 2;
    auto with = [&](auto edit) {
        dsk_attention_args b = a;
        edit(b);
        return b;
    };
    expect_invalid(dsk_cuda_attention_forward(qkv, out, nullptr, nullptr, nullptr),
                   "dsk_cuda_attention_forward: args is NULL");
    expect_invalid(dsk_cuda_attention_forward(nullptr, out, nullptr, &a, nullptr),
                   "dsk_cuda_attention_forward: qkv is NULL");
    expect_invalid(dsk_cuda_attention_forward(qkv, nullptr, nullptr, &a, nullptr),
                   "dsk_cuda_attention_forward: out is NULL");
    dsk_attention_args b = with([](dsk_attention_args& x) { x.seq = 0; });
    expect_invalid(dsk_cuda_attention_forward(qkv, out, nullptr, &b, nullptr), "seq=0");
    b = with([](dsk_attention_args& x) { x.heads = 3; });
    expect_invalid(dsk_cuda_attention_forward(qkv, out, nullptr, &b, nullptr), "channels=4 is not a multiple of heads=3");
    b = with([](dsk_attention_args& x) { x.dropout_p = 1.0f; });
    expect_invalid(dsk_cuda_attention_forward(qkv, out, nullptr, &b, nullptr), "dropout_p=1 is outside [0, 1)");
    b = with([](dsk_attention_args& x) { x.causal = 2; });
    expect_invalid(dsk_cuda_attention_forward(qkv, out, nullptr, &b, nullptr), "causal=2 is not 0 or 1");
    b = with([](dsk_attention_args& x) { x.bf16_products = -1; });
    expect_invalid(dsk_cuda_attention_backward(qkv, nullptr, out, d, &b, nullptr),
                   "dsk_cuda_attention_backward: bf16_products=-1 is not 0 or 1");
    b = with([](dsk_attention_args& x) { x.batch = int64_t{1} << 40, x.seq = int64_t{1} << 12; });
    expect_invalid(dsk_cuda_attention_forward(qkv, out, nullptr, &b, nullptr), "is too large");
    expect_invalid(dsk_cuda_attention_backward(qkv, nullptr, nullptr, d, &a, nullptr),
                   "dsk_cuda_attention_backward: dout is NULL");
    expect_invalid(dsk_cuda_attention_backward(qkv, nullptr, out, nullptr, &a, nullptr),
                   "dsk_cuda_attention_backward: dqkv is NULL");
}

TEST(CudaArgs, AttentionWithoutDeviceGivesCudaError) {
    if (dsk_cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device exists: tests/gpu cover the launches";
    float qkv[24] = {}, out[8] = {}, probs[8] = {}, d[24] = {};
    dsk_attention_args a{};
    a.batch = 1, a.seq = 2, a.channels = 4, a.heads = 2;
    // probs given, no dropout: no scratch, the first launch fails.
    EXPECT_EQ(dsk_cuda_attention_forward(qkv, out, probs, &a, nullptr), DSK_ERR_CUDA);
    EXPECT_NE(std::string(dsk_last_error()).find("dsk_cuda_attention_forward: kernel launch failed"), std::string::npos)
        << dsk_last_error();
    // backward always needs scratch (dD): its allocation fails first.
    EXPECT_EQ(dsk_cuda_attention_backward(qkv, nullptr, out, d, &a, nullptr), DSK_ERR_CUDA);
    EXPECT_NE(std::string(dsk_last_error()).find("dsk_cuda_attention_backward: cudaMallocAsync (attention scratch)"),
              std::string::npos)
        << dsk_last_error();
}

}  // namespace

#else

TEST(CudaArgs, NotBuilt) { GTEST_SKIP() << "built without CUDA (DS_WITH_CUDA off): no dsk_cuda_* entry points"; }

#endif
