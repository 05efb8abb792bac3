// The kernel table (kernels/backend.h) and its seams: the flat dsk_cpu_*
// entry points report bad arguments as a status plus dsk_last_error() and
// never throw; ds::Kernels turns that into ds::Error with the same status and
// text; a table entry a backend lacks and a device without kernels are
// DS_ERR_UNSUPPORTED; ds::DType and the kernel codes are the same numbers;
// the optimizers reach the kernels through the table.
#include <gtest/gtest.h>

#include "catch_error.h"

#include <cmath>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "cpu/arg_check.h"
#include "backend.h"
#include "config/config.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/device_memory.h"
#include "core/kernel_backend.h"
#include "optim/optimizer.h"

namespace {

dsk_adam_hparams adam_h() {
    dsk_adam_hparams h{};
    h.lr = 1e-3f;
    h.beta1 = 0.9f;
    h.beta2 = 0.999f;
    h.eps = 1e-8f;
    h.bias_correction1 = 1.0f;
    h.bias_correction2_rsqrt = 1.0f;
    h.grad_scale = 1.0f;
    h.adamw_mode = 1;
    return h;
}

}  // namespace

TEST(KernelBackend, CpuTableIsComplete) {
    const dsk_backend* b = dsk_backend_cpu();
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b, dsk_backend_cpu());  // one table, chosen once
    EXPECT_EQ(b->struct_size, sizeof(dsk_backend));
    EXPECT_EQ(b->version, static_cast<uint32_t>(DSK_BACKEND_VERSION));
    EXPECT_STREQ(b->name, "cpu");
    EXPECT_EQ(b->stream, nullptr);
    EXPECT_NE(b->convert, nullptr);
    EXPECT_NE(b->scale, nullptr);
    EXPECT_NE(b->sumsq, nullptr);
    EXPECT_NE(b->axpy, nullptr);
    EXPECT_NE(b->axpy_sumsq, nullptr);
    EXPECT_NE(b->adam_step, nullptr);
    EXPECT_NE(b->lamb_step, nullptr);
    EXPECT_NE(b->sgd_step, nullptr);
    EXPECT_NE(b->lion_step, nullptr);
    EXPECT_NE(b->moe_jitter, nullptr);  // the last entry
}

TEST(KernelBackend, TableEntriesCompute) {
    // sum of squares of 1..1000 = n(n+1)(2n+1)/6, exact in double.
    const size_t n = 1000;
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i + 1);
    const dsk_backend* b = dsk_backend_cpu();
    double s = -1.0;
    int nonfinite = -1;
    ASSERT_EQ(b->sumsq(b, x.data(), DSK_F32, n, &s, &nonfinite), DSK_OK);
    EXPECT_EQ(s, 1000.0 * 1001.0 * 2001.0 / 6.0);
    EXPECT_EQ(nonfinite, 0);
    // Both out-parameters are optional.
    EXPECT_EQ(b->sumsq(b, x.data(), DSK_F32, n, nullptr, nullptr), DSK_OK);

    std::vector<float> y(n, 1.0f);
    ASSERT_EQ(b->axpy_sumsq(b, y.data(), DSK_F32, x.data(), DSK_F32, 2.0f, 1, n, &s, nullptr), DSK_OK);
    EXPECT_EQ(y[9], 20.0f);
    EXPECT_EQ(s, 4.0 * 1000.0 * 1001.0 * 2001.0 / 6.0);

    float p = 1.0f, g = 0.0f, m = 0.0f, v = 0.0f;
    dsk_lamb_hparams lh{};
    lh.lr = 0.1f;
    lh.beta1 = 0.9f;
    lh.beta2 = 0.999f;
    lh.eps = 1e-6f;
    lh.bias_correction1 = lh.bias_correction2 = 1.0f;
    lh.grad_scale = 1.0f;
    lh.max_coeff = 10.0f;
    lh.min_coeff = 0.01f;
    float trust = -1.0f;
    ASSERT_EQ(b->lamb_step(b, &p, &g, DSK_F32, &m, &v, nullptr, DSK_F16, 1, &lh, &trust), DSK_OK);
    EXPECT_EQ(trust, 1.0f);  // |u| = 0 -> trust 1
}

TEST(KernelBackend, FlatEntryPointsReturnStatusWithoutThrowing) {
    float p = 0, g = 0, m = 0, v = 0;
    uint16_t w = 0;
    const dsk_adam_hparams h = adam_h();
    int st = DSK_OK;
    EXPECT_NO_THROW(st = dsk_cpu_adam_step(&p, &g, DSK_F32, &m, &v, 9, nullptr, DSK_F16, 1, &h));
    EXPECT_EQ(st, DSK_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(dsk_last_error(), "dsk_adam_step: state_dtype = 9 is not DSK_F32, DSK_F16 or DSK_BF16");

    EXPECT_EQ(dsk_cpu_adam_step(&p, &g, DSK_F32, &m, &v, DSK_F32, &w, DSK_F32, 1, &h), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(dsk_last_error(), "dsk_adam_step: w_dtype = 0 is not DSK_F16 or DSK_BF16 (w16 is not NULL)");

    EXPECT_EQ(dsk_cpu_adam_step(&p, &g, DSK_F32, &m, &v, DSK_F32, nullptr, DSK_F16, 1, nullptr),
              DSK_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(dsk_last_error(), "dsk_adam_step: h (hyper-parameters) is NULL");

    EXPECT_EQ(dsk_cpu_convert(&p, DSK_F32, nullptr, DSK_F16, 3), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(dsk_last_error(), "dsk_convert: dst is NULL (n = 3)");

    double s = 0.0;
    EXPECT_EQ(dsk_cpu_sumsq(&p, -1, 1, &s, nullptr), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(dsk_last_error(), "dsk_sumsq: dtype = -1 is not DSK_F32, DSK_F16 or DSK_BF16");

    dsk_sgd_hparams sh{};
    sh.momentum = 0.9f;
    EXPECT_EQ(dsk_cpu_sgd_step(&p, &g, DSK_F32, nullptr, nullptr, DSK_F16, 1, &sh), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(dsk_last_error(), "dsk_sgd_step: buf (momentum != 0) is NULL (n = 1)");

    // The first failing check is the one reported.
    EXPECT_EQ(dsk_cpu_axpy(nullptr, 5, nullptr, 6, 1.0f, 1), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(dsk_last_error(), "dsk_axpy: dst_dtype = 5 is not DSK_F32, DSK_F16 or DSK_BF16");

    // n == 0 with NULL pointers is fine.
    const dsk_lion_hparams lh{};
    EXPECT_EQ(dsk_cpu_lion_step(nullptr, nullptr, DSK_F32, nullptr, nullptr, DSK_F16, 0, &lh), DSK_OK);
}

// dsk_scale took no dtype check before: a bad code ran the 16-bit path and
// failed inside an OpenMP region (std::terminate). Now it is a status.
TEST(KernelBackend, ScaleRejectsBadDtype) {
    std::vector<float> x(70000, 1.0f);
    EXPECT_EQ(dsk_cpu_scale(x.data(), 7, 2.0f, x.size()), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(dsk_last_error(), "dsk_scale: dtype = 7 is not DSK_F32, DSK_F16 or DSK_BF16");
    EXPECT_EQ(x[0], 1.0f);
    EXPECT_EQ(dsk_cpu_scale(nullptr, DSK_F16, 2.0f, 4), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(dsk_last_error(), "dsk_scale: x is NULL (n = 4)");
    const ds::Error e = catch_error([&] { ds::cpu_kernels().scale(x.data(), 7, 2.0f, x.size()); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
}

TEST(KernelBackend, KernelsThrowTheKernelsStatusAndMessage) {
    float p = 0, g = 0, m = 0, v = 0;
    const dsk_adam_hparams h = adam_h();
    const ds::Kernels k = ds::cpu_kernels();
    const ds::Error e = catch_error([&] { k.adam_step(&p, &g, 4, &m, &v, DSK_F32, nullptr, DSK_F16, 1, &h); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(e.what(), "dsk_adam_step: g_dtype = 4 is not DSK_F32, DSK_F16 or DSK_BF16");
    const ds::Error e2 = catch_error([&] { k.sumsq(nullptr, DSK_BF16, 2, nullptr); });
    EXPECT_EQ(e2.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(e2.what(), "dsk_sumsq: x is NULL (n = 2)");
}

// Every kernel status has its own code and its own library status: a GEMM
// engine failure or a kernel out of host memory on a CPU engine is not a
// device error (DSK_ERR_ENGINE once shared DSK_ERR_CUDA's value).
TEST(KernelBackend, KernelStatusesMapToTheirOwnLibraryStatus) {
    const int codes[] = {DSK_ERR_INVALID_ARGUMENT, DSK_ERR_UNSUPPORTED, DSK_ERR_CUDA, DSK_ERR_OUT_OF_MEMORY,
                         DSK_ERR_ENGINE};
    for (size_t i = 0; i < std::size(codes); ++i)
        for (size_t j = i + 1; j < std::size(codes); ++j) EXPECT_NE(codes[i], codes[j]) << i << " " << j;
    const struct { int kernel; ds_status_t lib; } map[] = {
        {DSK_ERR_INVALID_ARGUMENT, DS_ERR_INVALID_ARGUMENT}, {DSK_ERR_UNSUPPORTED, DS_ERR_UNSUPPORTED},
        {DSK_ERR_CUDA, DS_ERR_DEVICE}, {DSK_ERR_OUT_OF_MEMORY, DS_ERR_OUT_OF_MEMORY},
        {DSK_ERR_ENGINE, DS_ERR_INTERNAL}};
    for (const auto& m : map) {
        ds::kernels::set_last_error(m.kernel, "kernel message %d", m.kernel);
        const ds::Error e = catch_error([&] { ds::throw_kernel_error(m.kernel); });
        EXPECT_EQ(e.status(), m.lib) << "kernel status " << m.kernel;
        EXPECT_EQ(std::string(e.what()), "kernel message " + std::to_string(m.kernel));
    }
    const ds::Error unknown = catch_error([] { ds::throw_kernel_error(99); });
    EXPECT_EQ(unknown.status(), DS_ERR_INTERNAL);
    EXPECT_NE(std::string(unknown.what()).find("unknown status 99"), std::string::npos) << unknown.what();
}

TEST(KernelBackend, MissingEntryAndDeviceAreUnsupported) {
    dsk_backend partial = *dsk_backend_cpu();
    partial.name = "test";
    partial.adam_step = nullptr;
    const ds::Kernels k(partial);
    float p = 0, g = 0, m = 0, v = 0;
    const dsk_adam_hparams h = adam_h();
    const ds::Error e = catch_error([&] { k.adam_step(&p, &g, DSK_F32, &m, &v, DSK_F32, nullptr, DSK_F16, 1, &h); });
    EXPECT_EQ(e.status(), DS_ERR_UNSUPPORTED);
    EXPECT_STREQ(e.what(), "the test kernel backend has no adam_step kernel");
    float x = 3.0f;
    EXPECT_EQ(k.sumsq(&x, DSK_F32, 1, nullptr), 9.0);  // the entries it has still work

    EXPECT_EQ(&ds::kernels_for(ds::Device::cpu()).table(), dsk_backend_cpu());
    if (ds::device_memory::available()) {  // a CUDA build: the CUDA table on the legacy default stream
        const dsk_backend& t = ds::kernels_for(ds::Device::cuda(0)).table();
        EXPECT_STREQ(t.name, "cuda");
        EXPECT_EQ(t.stream, nullptr);
        EXPECT_EQ(&t, ds::cuda_kernel_table());
    } else {
        EXPECT_EQ(ds::cuda_kernel_table(), nullptr);
        const ds::Error e2 = catch_error([] { ds::kernels_for(ds::Device::cuda(0)); });
        EXPECT_EQ(e2.status(), DS_ERR_UNSUPPORTED);
        EXPECT_NE(std::string(e2.what()).find("cuda:0"), std::string::npos) << e2.what();
        EXPECT_NE(std::string(e2.what()).find("DS_WITH_CUDA=ON"), std::string::npos) << e2.what();
    }
}

TEST(KernelBackend, DTypeValuesAreTheKernelCodes) {
    const std::pair<ds::DType, int> rows[] = {
        {ds::DType::F32, DSK_F32}, {ds::DType::F16, DSK_F16}, {ds::DType::BF16, DSK_BF16},
        {ds::DType::I8, DSK_I8},   {ds::DType::U8, DSK_U8},   {ds::DType::I32, DSK_I32},
        {ds::DType::I64, DSK_I64},
    };
    for (const auto& [d, code] : rows) EXPECT_EQ(static_cast<int>(d), code) << ds::dtype_name(d);
    for (int code : {int{DSK_F32}, int{DSK_F16}, int{DSK_BF16}})
        EXPECT_EQ(ds::dtype_to_kernel(ds::dtype_from_kernel(code)), code);
    EXPECT_EQ(catch_error([] { ds::dtype_from_kernel(DSK_I8); }).status(), DS_ERR_INVALID_ARGUMENT);
}

TEST(OptimizerBase, HyperParametersComeFromTheConfig) {
    ds::config::OptimizerConfig c;
    c.type = "adamw";
    c.lr = 0.25;
    c.beta1 = 0.8;
    c.beta2 = 0.95;
    auto adam = ds::optim::Optimizer::create(c, ds::DType::F32);
    EXPECT_EQ(adam->lr(), 0.25);
    EXPECT_EQ(adam->beta1(), 0.8);
    EXPECT_EQ(adam->beta2(), 0.95);
    // SGD has no betas: the engine reads the defaults, whatever the config says.
    c.type = "SGD";
    auto sgd = ds::optim::Optimizer::create(c, ds::DType::F32);
    EXPECT_EQ(sgd->lr(), 0.25);
    EXPECT_EQ(sgd->beta1(), 0.9);
    EXPECT_EQ(sgd->beta2(), 0.999);
    // Adam keeps its moments in the working dtype without fp32 optimizer states.
    c.type = "adam";
    c.fp32_optimizer_states = false;
    EXPECT_EQ(ds::optim::Optimizer::create(c, ds::DType::BF16)->state_dtype(), DSK_BF16);
}

TEST(OptimizerBase, UpdateReportsKernelErrorsAsDsError) {
    ds::config::OptimizerConfig c;
    c.type = "lion";
    auto lion = ds::optim::Optimizer::create(c, ds::DType::F32);
    std::vector<float> p(4, 1.0f), g(4, 0.5f), m(4, 0.0f);
    void* states[] = {m.data()};
    ds::optim::ParamBuffers b;
    b.master = p.data();
    b.grad = g.data();
    b.grad_dtype = 11;
    b.numel = 4;
    b.states = states;
    ds::optim::StepContext ctx;
    ctx.lr = 0.1;
    const ds::Error e = catch_error([&] { lion->update(b, ctx); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(e.what(), "dsk_lion_step: g_dtype = 11 is not DSK_F32, DSK_F16 or DSK_BF16");
    // A valid call goes through: Lion moves p by -lr * sign(c) = -0.1 per element.
    b.grad_dtype = DSK_F32;
    lion->update(b, ctx);
    for (float x : p) EXPECT_NEAR(x, 0.9, 1e-7);
}
