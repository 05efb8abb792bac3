// dsk_backend_cuda(stream): a kernel table per stream carrying that stream,
// with the CUDA kernels in the entries that have one and NULL elsewhere
// (ds::Kernels then refuses with DS_ERR_UNSUPPORTED naming backend and
// entry); an entry forwards to its dsk_cuda_* kernel (its argument errors
// show through the table and ds::Kernels). No device needed: nothing here
// launches. CUDA builds only.
#include <gtest/gtest.h>

#include <string>

#include "catch_error.h"
#include "core/kernel_backend.h"

#ifdef DS_WITH_CUDA
#include "cuda_kernels.h"

namespace {

TEST(CudaBackend, OneTablePerStreamCarryingIt) {
    void* s1 = reinterpret_cast<void*>(0x1000);
    const dsk_backend* a = dsk_backend_cuda(nullptr);
    const dsk_backend* b = dsk_backend_cuda(s1);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_NE(a, b);
    EXPECT_EQ(dsk_backend_cuda(s1), b);  // the same table again
    EXPECT_EQ(b->stream, s1);
    EXPECT_EQ(a->stream, nullptr);
    EXPECT_STREQ(b->name, "cuda");
    EXPECT_EQ(b->struct_size, sizeof(dsk_backend));
    EXPECT_EQ(b->version, static_cast<uint32_t>(DSK_BACKEND_VERSION));
    for (auto e : {(void*)b->convert, (void*)b->scale, (void*)b->sumsq, (void*)b->axpy, (void*)b->axpy_sumsq, (void*)b->adam_step,
                   (void*)b->lamb_step, (void*)b->sgd_step, (void*)b->lion_step, (void*)b->bias_grad, (void*)b->layernorm_fwd,
                   (void*)b->layernorm_bwd, (void*)b->gelu_fwd, (void*)b->gelu_bwd, (void*)b->dropout_fwd,
                   (void*)b->dropout_bwd, (void*)b->dropout_apply, (void*)b->softmax_xent_fwd,
                   (void*)b->softmax_xent_bwd, (void*)b->add, (void*)b->add_inplace, (void*)b->gemm,
                   (void*)b->gemm_batched, (void*)b->linear_fwd, (void*)b->gemm_bf16, (void*)b->linear_fwd_bf16,
                   (void*)b->linear_bwd_bf16, (void*)b->linear_fwd_bf16w, (void*)b->linear_bwd_bf16w})
        EXPECT_NE(e, nullptr);
    // embedding, LayerNorm backward from the output, MSE
    for (auto e : {(void*)b->embedding_fwd, (void*)b->embedding_bwd, (void*)b->layernorm_bwd_from_output,
                   (void*)b->mse_fwd, (void*)b->mse_bwd})
        EXPECT_NE(e, nullptr);
    EXPECT_NE(b->attention_forward, nullptr);  // attention.cu
    EXPECT_NE(b->attention_backward, nullptr);
    // the MoE layer's row kernels and Jitter (moe_rows.cu, moe_jitter.cu)
    for (auto e : {(void*)b->moe_rows_gather, (void*)b->moe_rows_scatter_add, (void*)b->moe_rows_dot,
                   (void*)b->moe_jitter})
        EXPECT_NE(e, nullptr);
}

TEST(CudaBackend, MissingEntryIsUnsupportedAndErrorsComeThrough) {
    // A copy of the table with one entry removed: independent of which entries have kernels today.
    dsk_backend partial = *dsk_backend_cuda(nullptr);
    partial.gemm = nullptr;
    float c[4] = {};
    ds::Error e = catch_error([&] { ds::Kernels(partial).gemm(false, false, 1, 1, 1, 1.0f, c, 1, c, 1, 0.0f, c, 1); });
    EXPECT_EQ(e.status(), DS_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(e.what()).find("gemm"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
    const ds::Kernels k(*dsk_backend_cuda(nullptr));
    // An argument error of the CUDA kernel, through the table: status and message kept.
    e = catch_error([&] { k.gemm(false, false, 2, 2, 2, 1.0f, c, 1, c, 2, 0.0f, c, 2); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("dsk_cuda_gemm: lda = 1"), std::string::npos) << e.what();
    e = catch_error([&] { k.scale(c, 42, 2.0f, 4); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("dsk_cuda_scale: dtype = 42"), std::string::npos) << e.what();
    e = catch_error([&] { k.adam_step(c, nullptr, DSK_F32, c, c, DSK_F32, nullptr, DSK_F16, 4, nullptr); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("dsk_cuda_adam_multi"), std::string::npos) << e.what();
}

// A failed CUDA call comes out of ds::Kernels as DS_ERR_DEVICE with CUDA's text
// (shown where no device exists; with one, tests/gpu run the kernels).
TEST(CudaBackend, CudaFailureIsDeviceError) {
    if (dsk_cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device exists";
    const ds::Kernels k(*dsk_backend_cuda(nullptr));
    float p[4] = {}, m[4] = {}, v[4] = {};
    const dsk_adam_hparams h{1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1.0f, 1.0f, 1.0f, 1};
    ds::Error e = catch_error([&] { k.adam_step(p, p, DSK_F32, m, v, DSK_F32, nullptr, DSK_F16, 4, &h); });
    EXPECT_EQ(e.status(), DS_ERR_DEVICE);
    EXPECT_NE(std::string(e.what()).find("dsk_cuda_adam_multi: kernel launch failed"), std::string::npos) << e.what();
}

}  // namespace

#else

TEST(CudaBackend, NotBuilt) { GTEST_SKIP() << "built without CUDA (DS_WITH_CUDA off): no dsk_backend_cuda"; }

#endif
