// The CUDA entry points' contract that holds without a GPU: every bad
// argument gets DSK_ERR_INVALID_ARGUMENT and a message naming the kernel
// and the argument (checked before any CUDA call), and where no device
// exists a valid call fails with DSK_ERR_CUDA and the CUDA error's text
// (never a crash). Built with CUDA only; a CPU-only build skips.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "kernels.h"
#include "nn_gemm.h"

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
    EXPECT_NE(std::string(dsk_last_error()).find("(reduction scratch) failed"), std::string::npos)
        << dsk_last_error();
}

// The GEMMs (cuBLAS) refuse what the CPU kernels refuse, with the CPU's
// message under their own name (the shared checks, kernels/cpu/gemm_check.h),
// before any CUDA call; empty products succeed without touching the device.
TEST(CudaArgs, GemmArgumentsAsTheCpuKernels) {
    float a[16] = {}, b[16] = {}, c[16] = {};
    uint16_t w16[16] = {};
    // Same status and message text as the CPU twin after "<kernel>: ".
    auto same_as_cpu = [](int rc, int cpu_rc, const std::string& cpu_msg, const std::string& needle) {
        const std::string msg = dsk_last_error();
        expect_invalid(rc, needle);
        EXPECT_EQ(cpu_rc, DSK_ERR_INVALID_ARGUMENT);
        EXPECT_EQ(msg.substr(msg.find(": ")), cpu_msg.substr(cpu_msg.find(": "))) << msg << " vs " << cpu_msg;
    };
    int cpu = dsk_cpu_gemm(2, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
    std::string cpu_msg = dsk_last_error();
    same_as_cpu(dsk_cuda_gemm(2, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2, nullptr), cpu, cpu_msg,
                "dsk_cuda_gemm: trans_a = 2 is not 0 or 1");
    cpu = dsk_cpu_gemm(0, 0, -1, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
    cpu_msg = dsk_last_error();
    same_as_cpu(dsk_cuda_gemm(0, 0, -1, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2, nullptr), cpu, cpu_msg,
                "dsk_cuda_gemm: m = -1 is negative");
    cpu = dsk_cpu_gemm(1, 0, 2, 2, 3, 1.0f, a, 1, b, 2, 0.0f, c, 2);
    cpu_msg = dsk_last_error();
    same_as_cpu(dsk_cuda_gemm(1, 0, 2, 2, 3, 1.0f, a, 1, b, 2, 0.0f, c, 2, nullptr), cpu, cpu_msg,
                "dsk_cuda_gemm: lda = 1 is less than max(1, 2), the row length of a");
    cpu = dsk_cpu_gemm(0, 1, 2, 3, 2, 1.0f, a, 2, b, 1, 0.0f, c, 3);
    cpu_msg = dsk_last_error();
    same_as_cpu(dsk_cuda_gemm(0, 1, 2, 3, 2, 1.0f, a, 2, b, 1, 0.0f, c, 3, nullptr), cpu, cpu_msg,
                "dsk_cuda_gemm: ldb = 1 is less than max(1, 2)");
    cpu = dsk_cpu_gemm(0, 0, 2, 2, 2, 1.0f, a, 2, nullptr, 2, 0.0f, c, 2);
    cpu_msg = dsk_last_error();
    same_as_cpu(dsk_cuda_gemm(0, 0, 2, 2, 2, 1.0f, a, 2, nullptr, 2, 0.0f, c, 2, nullptr), cpu, cpu_msg,
                "dsk_cuda_gemm: b is NULL (2 x 2)");
    cpu = dsk_cpu_gemm_batched(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2, 2, 4, 4, 3);
    cpu_msg = dsk_last_error();
    same_as_cpu(dsk_cuda_gemm_batched(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2, 2, 4, 4, 3, nullptr), cpu, cpu_msg,
                "dsk_cuda_gemm_batched: stride_c = 3 makes the 2 C matrices overlap (each spans 4 elements)");
    expect_invalid(dsk_cuda_gemm_batched(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2, 2, -4, 4, 4, nullptr),
                   "dsk_cuda_gemm_batched: stride_a = -4 is negative");
    expect_invalid(dsk_cuda_gemm_batched(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2, INT64_MAX / 2, 4, 4, 4, nullptr),
                   "dsk_cuda_gemm_batched: a spans more than 2^63 elements");
    cpu = dsk_cpu_linear_fwd(a, nullptr, nullptr, c, 2, 2, 2);
    cpu_msg = dsk_last_error();
    same_as_cpu(dsk_cuda_linear_fwd(a, nullptr, nullptr, c, 2, 2, 2, nullptr), cpu, cpu_msg,
                "dsk_cuda_linear_fwd: w is NULL (rows 2, in 2, out 2)");
    expect_invalid(dsk_cuda_linear_fwd(a, b, nullptr, c, 2, -1, 2, nullptr), "dsk_cuda_linear_fwd: negative size");
    cpu = dsk_cpu_gemm_bf16(0, 0, 2, 3, 2, 1.0f, a, 2, b, 3, 0.0f, c, 1);
    cpu_msg = dsk_last_error();
    same_as_cpu(dsk_cuda_gemm_bf16(0, 0, 2, 3, 2, 1.0f, a, 2, b, 3, 0.0f, c, 1, nullptr), cpu, cpu_msg,
                "dsk_cuda_gemm_bf16: ldc = 1 is less than max(1, 3), the row length of c");
    expect_invalid(dsk_cuda_gemm_bf16(0, 3, 2, 3, 2, 1.0f, a, 2, b, 3, 0.0f, c, 3, nullptr),
                   "dsk_cuda_gemm_bf16: trans_b = 3");
    cpu = dsk_cpu_linear_fwd_bf16w(a, nullptr, nullptr, c, 2, 2, 2);
    cpu_msg = dsk_last_error();
    same_as_cpu(dsk_cuda_linear_fwd_bf16w(a, nullptr, nullptr, c, 2, 2, 2, nullptr), cpu, cpu_msg,
                "dsk_cuda_linear_fwd_bf16w: w16 is NULL (rows 2, in 2, out 2)");
    expect_invalid(dsk_cuda_linear_fwd_bf16(nullptr, b, nullptr, c, 2, 2, 2, nullptr),
                   "dsk_cuda_linear_fwd_bf16: x is NULL");
    cpu = dsk_cpu_linear_bwd_bf16(a, b, a, c, nullptr, nullptr, 2, 2, 2);
    cpu_msg = dsk_last_error();
    same_as_cpu(dsk_cuda_linear_bwd_bf16(a, b, a, c, nullptr, nullptr, 2, 2, 2, nullptr), cpu, cpu_msg,
                "dsk_cuda_linear_bwd_bf16: dw is NULL (rows 2, in 2, out 2)");
    expect_invalid(dsk_cuda_linear_bwd_bf16(a, b, a, c, c, nullptr, 2, 2, -2, nullptr),
                   "dsk_cuda_linear_bwd_bf16: negative size (rows 2, in 2, out -2)");
    expect_invalid(dsk_cuda_linear_bwd_bf16w(a, b, w16, nullptr, c, nullptr, 2, 2, 2, nullptr),
                   "dsk_cuda_linear_bwd_bf16w: dx is NULL");
    expect_invalid(dsk_cuda_linear_bwd_bf16w(a, b, w16, c, c, nullptr, INT64_MAX / 2, 4, 2, nullptr),
                   "dsk_cuda_linear_bwd_bf16w: rows 4611686018427387903 x in 4 x out 2 is too large");

    // Empty products: nothing to do, no CUDA call (so DSK_OK even without a device).
    EXPECT_EQ(dsk_cuda_gemm(0, 0, 0, 4, 4, 1.0f, nullptr, 4, b, 4, 0.0f, nullptr, 4, nullptr), DSK_OK);
    EXPECT_EQ(dsk_cuda_gemm_batched(1, 1, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2, 0, 0, 0, 0, nullptr), DSK_OK);
    EXPECT_EQ(dsk_cuda_gemm_bf16(0, 0, 3, 0, 2, 1.0f, a, 2, nullptr, 1, 0.0f, nullptr, 1, nullptr), DSK_OK);
    // (As on the CPU, the weights must be there even with rows == 0: the GEMM's check wants B.)
    EXPECT_EQ(dsk_cuda_linear_fwd(nullptr, b, nullptr, nullptr, 0, 3, 3, nullptr), DSK_OK);
    EXPECT_EQ(dsk_cuda_linear_fwd_bf16w(a, nullptr, nullptr, nullptr, 4, 3, 0, nullptr), DSK_OK);
    EXPECT_EQ(dsk_cuda_linear_bwd_bf16(nullptr, nullptr, a, nullptr, c, nullptr, 0, 3, 3, nullptr), DSK_OK);
    EXPECT_EQ(dsk_cpu_linear_fwd(nullptr, b, nullptr, nullptr, 0, 3, 3), DSK_OK);
    EXPECT_EQ(dsk_cpu_linear_bwd_bf16(nullptr, nullptr, a, nullptr, c, nullptr, 0, 3, 3), DSK_OK);
}

// Without a device, a valid product reports the CUDA failure by kernel name.
TEST(CudaArgs, GemmWithoutDeviceGivesCudaError) {
    if (dsk_cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device exists: tests/gpu cover the products";
    float a[4] = {}, b[4] = {}, c[4] = {};
    const uint16_t w16[4] = {};
    auto expect_cuda = [](int rc, const char* kernel) {
        EXPECT_EQ(rc, DSK_ERR_CUDA) << kernel;
        EXPECT_EQ(std::string(dsk_last_error()).rfind(std::string(kernel) + ": ", 0), 0u) << dsk_last_error();
    };
    expect_cuda(dsk_cuda_gemm(0, 1, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2, nullptr), "dsk_cuda_gemm");
    expect_cuda(dsk_cuda_gemm(0, 1, 2, 2, 0, 1.0f, a, 2, b, 2, 0.0f, c, 2, nullptr), "dsk_cuda_gemm");  // C = 0
    expect_cuda(dsk_cuda_gemm_batched(0, 0, 1, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2, 2, 0, 0, 2, nullptr),
                "dsk_cuda_gemm_batched");
    expect_cuda(dsk_cuda_linear_fwd(a, b, c, c, 2, 2, 1, nullptr), "dsk_cuda_linear_fwd");
    expect_cuda(dsk_cuda_gemm_bf16(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2, nullptr), "dsk_cuda_gemm_bf16");
    expect_cuda(dsk_cuda_linear_fwd_bf16w(a, w16, nullptr, c, 2, 2, 2, nullptr), "dsk_cuda_linear_fwd_bf16w");
    expect_cuda(dsk_cuda_linear_bwd_bf16(a, b, a, c, b, nullptr, 2, 2, 2, nullptr), "dsk_cuda_linear_bwd_bf16");
}

// Embedding, LayerNorm backward from the output, MSE: the CPU kernels' checks, this kernel's name.
TEST(CudaArgs, NnMoreBadArgumentsNameTheKernelAndArgument) {
    float w[8] = {}, out[8] = {};
    const int32_t ids[2] = {0, 1};
    int64_t bad = 7;
    expect_invalid(dsk_cuda_embedding_fwd(w, 4, 2, ids, DSK_F32, 2, out, &bad, nullptr),
                   "dsk_cuda_embedding_fwd: id_dtype = 0 is not DSK_I32 or DSK_I64");
    EXPECT_EQ(bad, -1);
    expect_invalid(dsk_cuda_embedding_fwd(w, 4, 2, nullptr, DSK_I32, 2, out, &bad, nullptr),
                   "dsk_cuda_embedding_fwd: ids is NULL (n = 2)");
    expect_invalid(dsk_cuda_embedding_fwd(w, 4, 2, ids, DSK_I32, 2, nullptr, &bad, nullptr),
                   "dsk_cuda_embedding_fwd: out is NULL (2 x 2)");
    expect_invalid(dsk_cuda_embedding_fwd(nullptr, 4, 2, ids, DSK_I32, 2, out, &bad, nullptr),
                   "dsk_cuda_embedding_fwd: weight is NULL (4 x 2)");
    expect_invalid(dsk_cuda_embedding_bwd(out, ids, DSK_I64, -1, 4, 2, w, &bad, nullptr),
                   "dsk_cuda_embedding_bwd: negative size (n -1, num 4, dim 2)");
    expect_invalid(dsk_cuda_embedding_bwd(nullptr, ids, DSK_I32, 2, 4, 2, w, &bad, nullptr),
                   "dsk_cuda_embedding_bwd: dy is NULL (2 x 2)");
    expect_invalid(dsk_cuda_embedding_bwd(out, ids, DSK_I32, 2, 4, 2, nullptr, &bad, nullptr),
                   "dsk_cuda_embedding_bwd: dweight is NULL (4 x 2)");
    EXPECT_EQ(dsk_cuda_embedding_bwd(out, ids, DSK_I32, int64_t{1} << 31, 4, 2, w, &bad, nullptr),
              DSK_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(dsk_last_error()).find("dsk_cuda_embedding_bwd: n = 2147483648"), std::string::npos)
        << dsk_last_error();

    float g[4] = {1, 1, 1, 1}, y[8] = {}, dy[8] = {}, dx[8] = {}, rstd[2] = {1, 1}, dg[4] = {}, db[4] = {};
    expect_invalid(dsk_cuda_layernorm_bwd_from_output(dy, nullptr, rstd, g, g, dx, dg, db, 2, 4, nullptr),
                   "dsk_cuda_layernorm_bwd_from_output: y is NULL");
    expect_invalid(dsk_cuda_layernorm_bwd_from_output(dy, y, nullptr, g, g, dx, dg, db, 2, 4, nullptr),
                   "dsk_cuda_layernorm_bwd_from_output: rstd is NULL");
    expect_invalid(dsk_cuda_layernorm_bwd_from_output(dy, y, rstd, g, nullptr, dx, dg, db, 2, 4, nullptr),
                   "gamma and beta must be both set or both NULL");
    expect_invalid(dsk_cuda_layernorm_bwd_from_output(dy, y, rstd, g, g, dx, dg, nullptr, 2, 4, nullptr),
                   "dgamma and dbeta must be both set or both NULL");
    expect_invalid(dsk_cuda_layernorm_bwd_from_output(dy, y, rstd, g, g, dx, nullptr, nullptr, 2, 4, nullptr),
                   "dgamma/dbeta are NULL but gamma is set (affine)");
    expect_invalid(dsk_cuda_layernorm_bwd_from_output(dy, y, rstd, g, g, dx, dg, db, 2, 0, nullptr),
                   "dim = 0 with rows = 2");

    double s = 0.0;
    expect_invalid(dsk_cuda_mse_fwd(y, dy, 8, nullptr, nullptr), "dsk_cuda_mse_fwd: sum_sq is NULL");
    expect_invalid(dsk_cuda_mse_fwd(nullptr, dy, 8, &s, nullptr), "dsk_cuda_mse_fwd: pred is NULL");
    expect_invalid(dsk_cuda_mse_bwd(y, nullptr, 8, 1.0f, dx, nullptr), "dsk_cuda_mse_bwd: target is NULL");
    expect_invalid(dsk_cuda_mse_bwd(y, dy, 8, 1.0f, nullptr, nullptr), "dsk_cuda_mse_bwd: dpred is NULL");
}

TEST(CudaArgs, NnMoreEmptyCallsSucceedWithoutTouchingTheDevice) {
    int64_t bad = 7;
    EXPECT_EQ(dsk_cuda_embedding_fwd(nullptr, 0, 4, nullptr, DSK_I64, 0, nullptr, &bad, nullptr), DSK_OK);
    EXPECT_EQ(bad, -1);
    bad = 7;
    EXPECT_EQ(dsk_cuda_embedding_bwd(nullptr, nullptr, DSK_I32, 0, 10, 4, nullptr, &bad, nullptr), DSK_OK);
    EXPECT_EQ(bad, -1);
    EXPECT_EQ(dsk_cuda_layernorm_bwd_from_output(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                 nullptr, 0, 8, nullptr),
              DSK_OK);
    double s = -1.0;
    EXPECT_EQ(dsk_cuda_mse_fwd(nullptr, nullptr, 0, &s, nullptr), DSK_OK);
    EXPECT_EQ(s, 0.0);
    EXPECT_EQ(dsk_cuda_mse_bwd(nullptr, nullptr, 0, 1.0f, nullptr, nullptr), DSK_OK);
}

TEST(CudaArgs, NnMoreNoDeviceGivesCudaError) {
    if (dsk_cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device exists: tests/gpu cover the launches";
    float w[8] = {}, out[8] = {};
    const int32_t ids[2] = {0, 1};
    int64_t bad = 7;
    EXPECT_EQ(dsk_cuda_embedding_fwd(w, 4, 2, ids, DSK_I32, 2, out, &bad, nullptr), DSK_ERR_CUDA);
    EXPECT_NE(std::string(dsk_last_error()).find("dsk_cuda_embedding_fwd: "), std::string::npos) << dsk_last_error();
    EXPECT_EQ(bad, -1);
    EXPECT_EQ(dsk_cuda_embedding_bwd(out, ids, DSK_I32, 2, 4, 2, w, &bad, nullptr), DSK_ERR_CUDA);
    EXPECT_NE(std::string(dsk_last_error()).find("dsk_cuda_embedding_bwd: "), std::string::npos) << dsk_last_error();
    float g[4] = {1, 1, 1, 1}, rstd[2] = {1, 1}, dg[4] = {}, db[4] = {};
    EXPECT_EQ(dsk_cuda_layernorm_bwd_from_output(out, out, rstd, g, g, out, dg, db, 2, 4, nullptr), DSK_ERR_CUDA);
    double s = 0.0;
    EXPECT_EQ(dsk_cuda_mse_fwd(w, out, 8, &s, nullptr), DSK_ERR_CUDA);
    EXPECT_EQ(dsk_cuda_mse_bwd(w, out, 8, 1.0f, out, nullptr), DSK_ERR_CUDA);
    EXPECT_NE(std::string(dsk_last_error()).find("dsk_cuda_mse_bwd: kernel launch failed"), std::string::npos)
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
    // probs given, no dropout: no scratch, the first product fails: the
    // tiled kernel's launch, or cuBLAS's call finding no device.
    const int products = dsk_cuda_attention_products();
    EXPECT_EQ(DSK_OK, dsk_cuda_attention_set_products(DSK_CUDA_ATTENTION_TILED));
    EXPECT_EQ(dsk_cuda_attention_forward(qkv, out, probs, &a, nullptr), DSK_ERR_CUDA);
    EXPECT_NE(std::string(dsk_last_error()).find("dsk_cuda_attention_forward: kernel launch failed"), std::string::npos)
        << dsk_last_error();
    EXPECT_EQ(DSK_OK, dsk_cuda_attention_set_products(DSK_CUDA_ATTENTION_CUBLAS));
    EXPECT_EQ(dsk_cuda_attention_forward(qkv, out, probs, &a, nullptr), DSK_ERR_CUDA);
    EXPECT_NE(std::string(dsk_last_error()).find("dsk_cuda_attention_forward: cudaGetDevice failed"), std::string::npos)
        << dsk_last_error();
    EXPECT_EQ(DSK_ERR_INVALID_ARGUMENT, dsk_cuda_attention_set_products(2));
    EXPECT_NE(std::string(dsk_last_error()).find("products=2"), std::string::npos) << dsk_last_error();
    EXPECT_EQ(DSK_OK, dsk_cuda_attention_set_products(products));
    // backward always needs scratch (dD): its allocation fails first.
    EXPECT_EQ(dsk_cuda_attention_backward(qkv, nullptr, out, d, &a, nullptr), DSK_ERR_CUDA);
    EXPECT_NE(std::string(dsk_last_error()).find("dsk_cuda_attention_backward: "), std::string::npos)
        << dsk_last_error();
    EXPECT_NE(std::string(dsk_last_error()).find("(attention scratch) failed"), std::string::npos)
        << dsk_last_error();
}

}  // namespace

#else

TEST(CudaArgs, NotBuilt) { GTEST_SKIP() << "built without CUDA (DS_WITH_CUDA off): no dsk_cuda_* entry points"; }

#endif
