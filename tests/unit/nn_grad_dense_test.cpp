// Linear (with and without bias, tied to an Embedding's weight) and
// Embedding: the fp32 layers' analytic gradients against central finite
// differences of a float64 reference forward (the dsk_ref_* kernels), for
// the scalar L = sum(dy * y) with a random dy. Gradients must accumulate into
// what the grad buffers held. Also the refusals (bad id with its position,
// backward without forward, wrong shapes) and the activation meter.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "catch_error.h"
#include "core/tensor.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn_embedding.h"
#include "nn_gemm.h"

namespace {

using ds::DType;
using ds::Tensor;
using ds::nn::Param;

std::vector<double> random_vec(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<double> v(n);
    for (auto& x : v) x = u(rng);
    return v;
}

Tensor f32_tensor(const ds::Shape& shape, const std::vector<double>& v) {
    Tensor t = Tensor::empty(shape, DType::F32, ds::Device::cpu(), ds::Allocator::process(), ds::MemCategory::Buffers);
    for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = static_cast<float>(v[i]);
    return t;
}

void set_values(Tensor& t, const std::vector<double>& v) {
    for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = static_cast<float>(v[i]);
}

std::vector<double> rounded(const std::vector<double>& v) {  // the fp32 values the layer sees, as double
    std::vector<double> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = static_cast<float>(v[i]);
    return r;
}

// Binds a gradient buffer filled with `start` (gradients must add to it).
void bind_grad(Param& p, float start) {
    p.grad = Tensor::empty(p.shape, DType::F32, ds::Device::cpu(), ds::Allocator::process(), ds::MemCategory::Grads);
    for (int64_t i = 0; i < p.grad.numel(); ++i) p.grad.data<float>()[i] = start;
}

// Central differences of loss() in each element of `theta` (double).
std::vector<double> finite_diff(std::vector<double>& theta, const std::function<double()>& loss) {
    const double h = 1e-6;
    std::vector<double> g(theta.size());
    for (size_t i = 0; i < theta.size(); ++i) {
        const double keep = theta[i];
        theta[i] = keep + h;
        const double lp = loss();
        theta[i] = keep - h;
        const double lm = loss();
        theta[i] = keep;
        g[i] = (lp - lm) / (2 * h);
    }
    return g;
}

// float64 Linear: y[rows, out] = x w^T + b.
std::vector<double> linear_f64(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>* b,
                               int64_t rows, int64_t in, int64_t out) {
    std::vector<double> y(static_cast<size_t>(rows * out), 0.0);
    dsk_ref_gemm_f64(0, 1, rows, out, in, 1.0, x.data(), in, w.data(), in, 0.0, y.data(), out);
    if (b)
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < out; ++j) y[r * out + j] += (*b)[j];
    return y;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

// fp32 analytic (minus the starting value) vs float64 finite differences.
// fp32 products of O(1) values over <= 16 terms: ~1e-6; a wrong term is O(0.1+).
void expect_grad(const char* what, const Tensor& got, float start, const std::vector<double>& want) {
    ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
    int bad = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        const double g = static_cast<double>(got.data<float>()[i]) - start;
        if (!(std::fabs(g - want[i]) <= 2e-5 + 2e-5 * std::fabs(want[i])) && bad++ < 5)
            ADD_FAILURE() << what << "[" << i << "] = " << g << ", finite differences " << want[i];
    }
}

}  // namespace

TEST(NnGradDense, LinearMatchesFiniteDifferences) {
    const int64_t in = 5, out = 4;
    const ds::Shape xs = {2, 3, in};  // rows = 6 across two leading dims
    const int64_t rows = 6;
    for (bool with_bias : {false, true}) {
        SCOPED_TRACE(with_bias ? "with bias" : "no bias");
        ds::nn::Linear lin(in, out, with_bias);
        auto x = rounded(random_vec(rows * in, 1)), w = rounded(random_vec(out * in, 2)),
             b = rounded(random_vec(out, 3)), dy = rounded(random_vec(rows * out, 4));
        set_values(lin.weight().value, w);
        if (with_bias) set_values(lin.bias().value, b);
        bind_grad(lin.weight(), 0.25f);
        if (with_bias) bind_grad(lin.bias(), -0.5f);
        ds::nn::ActivationMeter meter;
        ds::nn::RunContext ctx;
        ctx.meter = &meter;
        Tensor y = lin.forward(f32_tensor(xs, x), ctx);
        ASSERT_EQ(y.shape(), (ds::Shape{2, 3, out}));
        EXPECT_EQ(meter.live_bytes, rows * in * 4);
        EXPECT_DOUBLE_EQ(lin.op_count().macs, static_cast<double>(rows * in * out));
        EXPECT_DOUBLE_EQ(lin.op_count().flops, 2.0 * rows * in * out);
        // forward value against the float64 reference
        const auto y64 = linear_f64(x, w, with_bias ? &b : nullptr, rows, in, out);
        for (int64_t i = 0; i < rows * out; ++i) ASSERT_NEAR(y.data<float>()[i], y64[i], 1e-5) << "y[" << i << "]";
        Tensor dx = lin.backward(f32_tensor({2, 3, out}, dy), ctx);
        EXPECT_EQ(meter.live_bytes, 0);
        auto loss = [&] { return dot(dy, linear_f64(x, w, with_bias ? &b : nullptr, rows, in, out)); };
        expect_grad("dx", dx, 0.0f, finite_diff(x, loss));
        expect_grad("dW", lin.weight().grad, 0.25f, finite_diff(w, loss));
        if (with_bias) expect_grad("db", lin.bias().grad, -0.5f, finite_diff(b, loss));
        // backward consumed what forward saved
        ds::Error e = catch_error([&] { lin.backward(f32_tensor({2, 3, out}, dy), ctx); });
        EXPECT_EQ(e.status(), DS_ERR_INVALID_STATE);
        EXPECT_NE(std::string(e.what()).find("backward without a training-mode forward"), std::string::npos) << e.what();
    }
}

TEST(NnGradDense, EmbeddingMatchesFiniteDifferences) {
    const int64_t num = 7, dim = 5;
    for (DType idt : {DType::I32, DType::I64}) {
        ds::nn::Embedding emb(num, dim);
        auto w = rounded(random_vec(num * dim, 5));
        set_values(emb.weight().value, w);
        bind_grad(emb.weight(), 1.0f);
        const std::vector<int64_t> id_values = {3, 0, 6, 3, 3, 1};  // repeats: the scatter must add
        Tensor ids = Tensor::empty({2, 3}, idt, ds::Device::cpu(), ds::Allocator::process(), ds::MemCategory::Buffers);
        for (size_t i = 0; i < id_values.size(); ++i) {
            if (idt == DType::I32) ids.data<int32_t>()[i] = static_cast<int32_t>(id_values[i]);
            else ids.data<int64_t>()[i] = id_values[i];
        }
        ds::nn::RunContext ctx;
        Tensor y = emb.forward(ids, ctx);
        ASSERT_EQ(y.shape(), (ds::Shape{2, 3, dim}));
        auto dy = rounded(random_vec(6 * dim, 6));
        Tensor none = emb.backward(f32_tensor({2, 3, dim}, dy), ctx);
        EXPECT_FALSE(none.defined());
        auto loss = [&] {
            std::vector<double> out(6 * dim);
            for (int64_t i = 0; i < 6; ++i)
                for (int64_t c = 0; c < dim; ++c) out[i * dim + c] = w[id_values[i] * dim + c];
            return dot(dy, out);
        };
        for (int64_t i = 0; i < 6 * dim; ++i) ASSERT_EQ(y.data<float>()[i], w[id_values[i / dim] * dim + i % dim]);
        expect_grad("dWte", emb.weight().grad, 1.0f, finite_diff(w, loss));
    }
}

TEST(NnGradDense, TiedLmHeadAddsBothPathsIntoTheEmbeddingGrad) {
    const int64_t vocab = 7, c = 5, rows = 6;
    ds::nn::Embedding wte(vocab, c);
    ds::nn::Linear head(&wte.weight(), /*bias=*/true);
    EXPECT_TRUE(head.weight_is_shared());
    EXPECT_EQ(head.in_features(), c);
    EXPECT_EQ(head.out_features(), vocab);
    ASSERT_EQ(head.own_params().size(), 1u);  // only the bias: the weight belongs to wte
    auto w = rounded(random_vec(vocab * c, 7)), b = rounded(random_vec(vocab, 8)),
         dy = rounded(random_vec(rows * vocab, 9));
    set_values(wte.weight().value, w);
    set_values(head.bias().value, b);
    bind_grad(wte.weight(), 0.0f);
    bind_grad(head.bias(), 0.0f);
    const std::vector<int32_t> id_values = {1, 4, 4, 0, 6, 2};
    Tensor ids = Tensor::empty({rows}, DType::I32, ds::Device::cpu(), ds::Allocator::process(), ds::MemCategory::Buffers);
    for (int64_t i = 0; i < rows; ++i) ids.data<int32_t>()[i] = id_values[i];
    ds::nn::RunContext ctx;
    Tensor h = wte.forward(ids, ctx);
    Tensor logits = head.forward(h, ctx);
    Tensor dh = head.backward(f32_tensor({rows, vocab}, dy), ctx);
    wte.backward(dh, ctx);
    auto loss = [&] {
        std::vector<double> x(rows * c);
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < c; ++j) x[i * c + j] = w[id_values[i] * c + j];
        return dot(dy, linear_f64(x, w, &b, rows, c, vocab));
    };
    expect_grad("dW (tied)", wte.weight().grad, 0.0f, finite_diff(w, loss));
    expect_grad("db", head.bias().grad, 0.0f, finite_diff(b, loss));
}

TEST(NnGradDense, RefusalsNameWhatIsWrong) {
    ds::nn::Embedding emb(10, 4);
    emb.set_name("wte");
    ds::nn::RunContext ctx;
    Tensor ids = Tensor::zeros({2, 3}, DType::I64, ds::Device::cpu(), ds::Allocator::process(), ds::MemCategory::Buffers);
    ids.data<int64_t>()[4] = 10;  // position [1, 1]
    ds::Error e = catch_error([&] { emb.forward(ids, ctx); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("token id 10 at position [1, 1]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'wte'"), std::string::npos) << e.what();
    ids.data<int64_t>()[4] = -1;
    e = catch_error([&] { emb.forward(ids, ctx); });
    EXPECT_NE(std::string(e.what()).find("token id -1"), std::string::npos) << e.what();
    Tensor fl = Tensor::zeros({3}, DType::F32, ds::Device::cpu(), ds::Allocator::process(), ds::MemCategory::Buffers);
    e = catch_error([&] { emb.forward(fl, ctx); });
    EXPECT_NE(std::string(e.what()).find("int32 or int64"), std::string::npos) << e.what();
    e = catch_error([&] { emb.backward(fl, ctx); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_STATE);

    ds::nn::Linear lin(4, 3, true);
    lin.set_name("h.0.mlp.c_fc");
    Tensor x = Tensor::zeros({2, 5}, DType::F32, ds::Device::cpu(), ds::Allocator::process(), ds::MemCategory::Buffers);
    e = catch_error([&] { lin.forward(x, ctx); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("Linear 'h.0.mlp.c_fc': input shape [2, 5]"), std::string::npos) << e.what();
    Tensor x4 = Tensor::zeros({2, 4}, DType::F32, ds::Device::cpu(), ds::Allocator::process(), ds::MemCategory::Buffers);
    lin.forward(x4, ctx);
    e = catch_error([&] { lin.backward(Tensor::zeros({2, 4}, DType::F32, ds::Device::cpu(), ds::Allocator::process(),
                                                     ds::MemCategory::Buffers), ctx); });
    EXPECT_NE(std::string(e.what()).find("output gradient has shape [2, 4], the forward produced [2, 3]"),
              std::string::npos) << e.what();
    e = catch_error([&] { lin.backward(Tensor::zeros({2, 3}, DType::F32, ds::Device::cpu(), ds::Allocator::process(),
                                                     ds::MemCategory::Buffers), ctx); });
    EXPECT_NE(std::string(e.what()).find("weight has no gradient buffer bound"), std::string::npos) << e.what();
    e = catch_error([] { ds::nn::Linear bad(nullptr, false); });
    EXPECT_NE(std::string(e.what()).find("shared_weight is NULL"), std::string::npos) << e.what();
    // Eval mode saves nothing.
    ds::nn::ActivationMeter meter;
    ctx.meter = &meter;
    ctx.training = false;
    lin.clear_saved();
    lin.forward(x4, ctx);
    EXPECT_EQ(meter.peak_bytes, 0);
}

TEST(NnGradDense, EmbeddingKernelsMatchReferenceAndAreDeterministic) {
    const int64_t num = 50, dim = 300, n = 4000;  // above the OpenMP threshold
    std::mt19937 rng(11);
    std::vector<int64_t> ids(n);
    for (auto& i : ids) i = static_cast<int64_t>(rng() % num);
    std::vector<float> dy(n * dim), w(num * dim);
    for (auto& v : dy) v = static_cast<float>(rng() % 1000) / 997.0f - 0.5f;
    for (auto& v : w) v = static_cast<float>(rng() % 1000) / 991.0f;
    std::vector<float> out(n * dim), ref_out(n * dim);
    ASSERT_EQ(dsk_cpu_embedding_fwd(w.data(), num, dim, ids.data(), DSK_I64, n, out.data(), nullptr), DSK_OK);
    dsk_ref_embedding_fwd(w.data(), dim, ids.data(), DSK_I64, n, ref_out.data());
    EXPECT_EQ(out, ref_out);
    std::vector<float> g(num * dim, 0.0f), ref_g(num * dim, 0.0f);
    ASSERT_EQ(dsk_cpu_embedding_bwd(dy.data(), ids.data(), DSK_I64, n, num, dim, g.data(), nullptr), DSK_OK);
    dsk_ref_embedding_bwd(dy.data(), ids.data(), DSK_I64, n, dim, ref_g.data());
    EXPECT_EQ(g, ref_g);  // same order of additions per element: bit-identical
    int64_t bad = 0;
    ids[77] = num;
    EXPECT_EQ(dsk_cpu_embedding_bwd(dy.data(), ids.data(), DSK_I64, n, num, dim, g.data(), &bad),
              DSK_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(bad, 77);
    EXPECT_NE(std::string(dsk_last_error()).find("ids[77] = 50 is outside [0, 50)"), std::string::npos)
        << dsk_last_error();
    EXPECT_EQ(dsk_cpu_embedding_fwd(w.data(), num, dim, ids.data(), DSK_F32, n, out.data(), nullptr),
              DSK_ERR_INVALID_ARGUMENT);
}
