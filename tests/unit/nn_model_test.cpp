// Built-in models: the spec parser's refusals, activation checkpointing
// (equal numbers, fewer bytes kept), and the engine binding (gradients
// against a float64 reference, call-order errors, the dropout stream in
// checkpoints), with a small test block of our own so that these tests do
// not depend on the library's layers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "catch_error.h"
#include "core/dlpack_interop.h"
#include "engine/engine.h"
#include "engine/engine_model.h"
#include "nn/checkpointed.h"
#include "nn/gpt.h"
#include "nn/model.h"
#include "nn/model_spec.h"
#include "nn/sequential.h"

using namespace ds;
using ds::nn::ActivationMeter;
using ds::nn::call_forward;
using ds::nn::init_normal;
using ds::nn::IoContract;
using ds::nn::LayerSpec;
using ds::nn::Loss;
using ds::nn::Model;
using ds::nn::ModelSpec;
using ds::nn::Module;
using ds::nn::parse_model_spec;
using ds::nn::RunContext;
using ds::nn::Sequential;
using ds::nn::SequentialSpec;
using NnParam = ds::nn::Param;

namespace {

// ---------------------------------------------------------------- spec parser

std::string refuse(const std::string& spec) {
    Error e = catch_error([&] { parse_model_spec(spec); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_CONFIG) << e.what();
    return e.what();
}

const char* kGpt = R"({"type":"gpt","vocab_size":50,"block_size":8,"n_layer":2,"n_head":4,"n_embd":16)";

TEST(NnModelSpec, GptDefaultsAndOverrides) {
    ModelSpec m = parse_model_spec(std::string(kGpt) + "}");
    ASSERT_EQ(m.type, ModelSpec::Type::Gpt);
    EXPECT_EQ(m.gpt.vocab_size, 50);
    EXPECT_EQ(m.gpt.n_embd, 16);
    EXPECT_TRUE(m.gpt.tied_embeddings);
    EXPECT_TRUE(m.gpt.bias);
    EXPECT_DOUBLE_EQ(m.gpt.dropout, 0.0);
    EXPECT_DOUBLE_EQ(m.gpt.initializer_range, 0.02);
    m = parse_model_spec(std::string(kGpt) + R"(,"dropout":0.2,"attn_dropout":0.1,"tied_embeddings":false,"seed":7})");
    EXPECT_DOUBLE_EQ(m.gpt.embd_dropout, 0.2);  // follows dropout
    EXPECT_DOUBLE_EQ(m.gpt.resid_dropout, 0.2);
    EXPECT_DOUBLE_EQ(m.gpt.attn_dropout, 0.1);  // its own key wins
    EXPECT_FALSE(m.gpt.tied_embeddings);
    EXPECT_EQ(m.gpt.seed, 7u);
}

TEST(NnModelSpec, GptRefusalsNameTheKey) {
    EXPECT_EQ(refuse(R"({"type":"gpt","vocab_size":50,"block_size":8,"n_layer":2,"n_head":5,"n_embd":64})"),
              "n_head: 5 does not divide n_embd = 64");
    EXPECT_NE(refuse(std::string(kGpt) + R"(,"n_embed":3})").find("n_embed: unknown key in a gpt spec; did you mean \"n_embd\"?"),
              std::string::npos);
    EXPECT_NE(refuse(std::string(kGpt) + R"(,"dropout":"0.1"})").find("dropout: expected"), std::string::npos);
    EXPECT_NE(refuse(std::string(kGpt) + R"(,"dropout":1.0})").find("dropout: 1 is outside [0, 1)"), std::string::npos);
    EXPECT_NE(refuse(std::string(kGpt) + R"(,"tied_embeddings":1})").find("tied_embeddings: expected a boolean"),
              std::string::npos);
    EXPECT_NE(refuse(R"({"type":"gpt","vocab_size":50,"n_layer":2,"n_head":4,"n_embd":16})").find("block_size: required key is missing"),
              std::string::npos);
    EXPECT_NE(refuse(R"({"type":"gpt","vocab_size":0,"block_size":8,"n_layer":2,"n_head":4,"n_embd":16})").find("vocab_size"),
              std::string::npos);
    EXPECT_NE(refuse(std::string(kGpt) + R"(,"layer_norm_eps":0})").find("layer_norm_eps"), std::string::npos);
    EXPECT_NE(refuse(R"({"type":"bert"})").find("type: unknown model type \"bert\""), std::string::npos);
    EXPECT_NE(refuse(R"({"vocab_size":3})").find("type: required key is missing"), std::string::npos);
    EXPECT_NE(refuse("[1]").find("expected a JSON object"), std::string::npos);
    EXPECT_NE(refuse(R"({"type":"gpt",)").find("model spec JSON syntax error at line 1"), std::string::npos);
    EXPECT_NE(refuse(R"({"type":"gpt","type":"gpt"})").find("duplicate key"), std::string::npos);
}

TEST(NnModelSpec, GptPipelineObject) {
    ModelSpec m = parse_model_spec(std::string(kGpt) + "}");
    EXPECT_EQ(m.gpt.pipeline.stages, 1);  // DeepSpeed's PipelineModule defaults
    EXPECT_EQ(m.gpt.pipeline.partition_method, "parameters");
    EXPECT_EQ(m.gpt.pipeline.activation_checkpoint_interval, 0);
    m = parse_model_spec(std::string(kGpt) +
                         R"(,"pipeline":{"stages":3,"partition_method":"uniform","activation_checkpoint_interval":2}})");
    EXPECT_EQ(m.gpt.pipeline.stages, 3);
    EXPECT_EQ(m.gpt.pipeline.partition_method, "uniform");
    EXPECT_EQ(m.gpt.pipeline.activation_checkpoint_interval, 2);
    m = parse_model_spec(std::string(kGpt) + R"(,"pipeline":{}})");
    EXPECT_EQ(m.gpt.pipeline.stages, 1);
    EXPECT_NE(refuse(std::string(kGpt) + R"(,"pipeline":{"stage":2}})")
                  .find("pipeline.stage: unknown key in the gpt spec's pipeline object; did you mean \"stages\"?"),
              std::string::npos);
    EXPECT_NE(refuse(std::string(kGpt) + R"(,"pipeline":2})").find("pipeline: expected an object"), std::string::npos);
    EXPECT_NE(refuse(std::string(kGpt) + R"(,"pipeline":{"stages":0}})").find("pipeline.stages"), std::string::npos);
    EXPECT_NE(refuse(std::string(kGpt) + R"(,"pipeline":{"stages":"2"}})").find("pipeline.stages: expected"),
              std::string::npos);
    EXPECT_NE(refuse(std::string(kGpt) + R"(,"pipeline":{"stages":1.5}})").find("pipeline.stages"), std::string::npos);
    EXPECT_NE(refuse(std::string(kGpt) + R"(,"pipeline":{"activation_checkpoint_interval":-1}})")
                  .find("pipeline.activation_checkpoint_interval"),
              std::string::npos);
    EXPECT_NE(refuse(std::string(kGpt) + R"(,"pipeline":{"partition_method":""}})")
                  .find("pipeline.partition_method: the empty string is not a partition method"),
              std::string::npos);
    EXPECT_NE(refuse(std::string(kGpt) + R"(,"pipeline":{"partition_method":3}})").find("pipeline.partition_method: expected"),
              std::string::npos);
    // MoE layers in one stage or across stages (docs/PIPELINE.md section 5).
    const std::string moe = R"(,"moe":{"num_experts":2})";
    EXPECT_TRUE(parse_model_spec(std::string(kGpt) + moe + R"(,"pipeline":{"stages":1}})").gpt.moe.enabled);
    const ModelSpec piped = parse_model_spec(std::string(kGpt) + moe + R"(,"pipeline":{"stages":2}})");
    EXPECT_TRUE(piped.gpt.moe.enabled);
    EXPECT_EQ(piped.gpt.pipeline.stages, 2);
}

TEST(NnModelSpec, SequentialChainsWidths) {
    ModelSpec m = parse_model_spec(R"({"type":"sequential","loss":"mse","layers":[
        {"type":"linear","in_features":4,"out_features":8},{"type":"gelu"},{"type":"dropout","p":0.1},
        {"type":"layernorm","dim":8},{"type":"linear","in_features":8,"out_features":3,"bias":false}]})");
    ASSERT_EQ(m.type, ModelSpec::Type::Sequential);
    EXPECT_EQ(m.sequential.layers.size(), 5u);
    EXPECT_EQ(m.sequential.in_width, 4);
    EXPECT_EQ(m.sequential.out_width, 3);
    EXPECT_FALSE(m.sequential.ids_input);
    EXPECT_FALSE(m.sequential.layers[4].bias);
    m = parse_model_spec(R"({"type":"sequential","loss":"cross_entropy","layers":[
        {"type":"embedding","num_embeddings":10,"embedding_dim":8},
        {"type":"transformer_layer","hidden_size":8,"heads":2},{"type":"linear","in_features":8,"out_features":10}]})");
    EXPECT_TRUE(m.sequential.ids_input);
    EXPECT_EQ(m.sequential.layers[1].intermediate_size, 32);
    EXPECT_EQ(m.sequential.loss, SequentialSpec::LossKind::CrossEntropy);
}

TEST(NnModelSpec, SequentialRefusals) {
    const std::string head = R"({"type":"sequential","layers":[{"type":"linear","in_features":4,"out_features":8},)";
    EXPECT_EQ(refuse(head + R"({"type":"linear","in_features":5,"out_features":2}]})"),
              "layers[1].in_features: 5 does not match the previous layer's output width 8");
    EXPECT_NE(refuse(head + R"({"type":"conv2d"}]})").find("layers[1].type: unknown layer type \"conv2d\""),
              std::string::npos);
    EXPECT_NE(refuse(head + R"({"type":"gelu","approximate":"tanh"}]})").find("layers[1].approximate: unknown key in a gelu layer"),
              std::string::npos);
    EXPECT_NE(refuse(head + R"({"type":"embedding","num_embeddings":3,"embedding_dim":8}]})").find("only be the first layer"),
              std::string::npos);
    EXPECT_NE(refuse(head + R"({"type":"transformer_layer","hidden_size":8,"heads":3}]})").find("layers[1].heads: 3 does not divide hidden_size = 8"),
              std::string::npos);
    EXPECT_NE(refuse(R"({"type":"sequential","layers":[{"type":"gelu"}]})").find("layers[0].type: a \"gelu\" layer cannot be first"),
              std::string::npos);
    EXPECT_NE(refuse(R"({"type":"sequential","layers":[]})").find("layers: the list is empty"), std::string::npos);
    EXPECT_NE(refuse(head + R"({"type":"gelu"}],"loss":"hinge"})").find("loss: \"hinge\" is not a loss"), std::string::npos);
    EXPECT_NE(refuse(R"({"type":"sequential","layers":[3]})").find("layers[0]: expected an object"), std::string::npos);
}

// ---------------------------------------------------------------- a test block

// Mask bit of element i for key (seed, forward_index, id): scales by 0 or 2.
float mask_at(uint64_t seed, uint64_t fi, uint32_t id, int64_t i) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ (fi + 1) * 0xBF58476D1CE4E5B9ull ^ (uint64_t{id} << 40) ^
                 static_cast<uint64_t>(i);
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    return (x & 1) ? 2.0f : 0.0f;
}

// y = x + tanh(x Wᵀ) ⊙ mask (mask = 1 in eval). Keeps x and tanh for backward.
class TestBlock final : public Module {
public:
    explicit TestBlock(int64_t c) : c_(c) {
        w_.name = "weight";
        w_.shape = {c, c};
    }
    const char* type() const override { return "TestBlock"; }
    std::vector<NnParam*> own_params() override { return {&w_}; }
    Tensor forward(const Tensor& x, RunContext& ctx) override {
        clear_saved();
        const int64_t rows = x.numel() / c_;
        Tensor y = Tensor::empty(x.shape(), DType::F32, Device::cpu(), *ctx.alloc, MemCategory::Buffers);
        Tensor h = Tensor::empty(x.shape(), DType::F32, Device::cpu(), *ctx.alloc, MemCategory::Buffers);
        const float* xv = x.data<float>();
        const float* w = w_.value.data<float>();
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < c_; ++j) {
                float a = 0.0f;
                for (int64_t k = 0; k < c_; ++k) a += xv[r * c_ + k] * w[j * c_ + k];
                const int64_t i = r * c_ + j;
                h.data<float>()[i] = std::tanh(a);
                const float m = ctx.training ? mask_at(ctx.seed, ctx.forward_index, id(), i) : 1.0f;
                y.data<float>()[i] = xv[i] + h.data<float>()[i] * m;
            }
        if (ctx.training) {
            x_ = x;
            h_ = h;
            key_[0] = ctx.seed;
            key_[1] = ctx.forward_index;
            meter_ = ctx.meter;
            bytes_ = static_cast<int64_t>(x.nbytes() + h.nbytes());
            if (meter_) meter_->add(bytes_);
        }
        return y;
    }
    Tensor backward(const Tensor& dy, RunContext& ctx) override {
        const int64_t rows = dy.numel() / c_;
        Tensor dx = Tensor::empty(dy.shape(), DType::F32, Device::cpu(), *ctx.alloc, MemCategory::Buffers);
        const float* w = w_.value.data<float>();
        float* gw = w_.grad.data<float>();
        std::vector<float> da(static_cast<size_t>(c_));
        for (int64_t r = 0; r < rows; ++r) {
            for (int64_t j = 0; j < c_; ++j) {
                const int64_t i = r * c_ + j;
                const float h = h_.data<float>()[i];
                da[static_cast<size_t>(j)] = dy.data<float>()[i] * mask_at(key_[0], key_[1], id(), i) * (1.0f - h * h);
            }
            for (int64_t k = 0; k < c_; ++k) {
                float s = dy.data<float>()[r * c_ + k];
                for (int64_t j = 0; j < c_; ++j) s += da[static_cast<size_t>(j)] * w[j * c_ + k];
                dx.data<float>()[r * c_ + k] = s;
            }
            for (int64_t j = 0; j < c_; ++j)
                for (int64_t k = 0; k < c_; ++k) gw[j * c_ + k] += da[static_cast<size_t>(j)] * x_.data<float>()[r * c_ + k];
        }
        clear_saved();
        return dx;
    }
    void clear_saved() override {
        if (meter_ && bytes_) meter_->sub(bytes_);
        bytes_ = 0;
        meter_ = nullptr;
        x_ = Tensor();
        h_ = Tensor();
    }

private:
    int64_t c_;
    NnParam w_;
    Tensor x_, h_;
    uint64_t key_[2] = {0, 0};
    ActivationMeter* meter_ = nullptr;
    int64_t bytes_ = 0;
};

// Mean squared error over every element.
class TestMse final : public Loss {
public:
    const char* name() const override { return "mse"; }
    float forward(const Tensor& out, const Tensor& t, RunContext&) override {
        out_ = out;
        t_ = t;
        double s = 0.0;
        for (int64_t i = 0; i < out.numel(); ++i) {
            const double d = out.data<float>()[i] - t.data<float>()[i];
            s += d * d;
        }
        return static_cast<float>(s / static_cast<double>(out.numel()));
    }
    Tensor backward(float dloss, RunContext& ctx) override {
        Tensor g = Tensor::empty(out_.shape(), DType::F32, Device::cpu(), *ctx.alloc, MemCategory::Buffers);
        for (int64_t i = 0; i < g.numel(); ++i)
            g.data<float>()[i] = dloss * 2.0f * (out_.data<float>()[i] - t_.data<float>()[i]) / static_cast<float>(g.numel());
        return g;
    }

private:
    Tensor out_, t_;
};

constexpr int64_t kC = 6, kRows = 4;

std::shared_ptr<Model> test_model(int n_blocks, uint64_t seed = 3) {
    auto root = std::make_unique<Sequential>();
    std::vector<std::unique_ptr<Module>*> slots;
    for (int i = 0; i < n_blocks; ++i) root->add(std::make_unique<TestBlock>(kC));
    for (auto& l : root->layers()) slots.push_back(&l);  // after the vector stops growing
    ModelSpec spec;
    spec.type = ModelSpec::Type::Sequential;
    spec.sequential.seed = seed;
    IoContract io;
    io.in_width = kC;
    io.out_width = kC;
    io.class_targets = false;
    auto m = std::make_shared<Model>(spec, std::move(root), std::make_unique<TestMse>(), io, std::move(slots));
    for (NnParam* p : m->params()) init_normal(*p, seed, 0.5);
    return m;
}

std::vector<float> values(int64_t n, float scale, float shift) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * std::sin(0.7f * static_cast<float>(i) + shift);
    return v;
}

struct RunResult {
    float loss;
    std::vector<std::vector<float>> grads;
    int64_t peak;
};

// One training forward + backward at the nn level, gradients zeroed first:
// the loss (over the output's rows), every gradient and the activation peak.
RunResult run_nn(Model& m, const Tensor& x, const Tensor& targets, uint64_t seed, uint64_t forward_index) {
    Allocator alloc;
    for (NnParam* p : m.params()) p->grad = Tensor::zeros(p->shape, DType::F32, Device::cpu(), alloc, MemCategory::Grads);
    RunContext ctx;
    ctx.alloc = &alloc;
    ctx.seed = seed;
    ctx.forward_index = forward_index;
    ctx.meter = &m.meter();
    Tensor y = call_forward(m.root(), x, ctx);
    const int64_t width = y.shape().back();
    RunResult r;
    r.loss = m.loss().forward(y.view({y.numel() / width, width}), targets, ctx);
    m.root().backward(m.loss().backward(1.0f, ctx).view(y.shape()), ctx);
    for (NnParam* p : m.params()) r.grads.emplace_back(p->grad.data<float>(), p->grad.data<float>() + p->grad.numel());
    r.peak = m.meter().peak_bytes;
    return r;
}

// The test model on a fixed batch; every activation kept is freed by its backward.
RunResult run_model(Model& m) {
    std::vector<float> x = values(kRows * kC, 0.8f, 0.1f), t = values(kRows * kC, 0.5f, 1.3f);
    const RunResult r = run_nn(m, Tensor::borrow(x.data(), {kRows, kC}, {}, DType::F32, Device::cpu()),
                               Tensor::borrow(t.data(), {kRows, kC}, {}, DType::F32, Device::cpu()), 11, 5);
    EXPECT_EQ(m.meter().live_bytes, 0);
    return r;
}

TEST(NnActivationCheckpointing, SameLossAndGradientsFewerBytes) {
    auto plain = test_model(3);
    auto ckpt = test_model(3);
    auto cpu = test_model(3);
    EXPECT_EQ(ckpt->checkpoint_layers(100, false), 3);  // clamped to the layers there are
    EXPECT_EQ(cpu->checkpoint_layers(2, true), 2);
    const RunResult a = run_model(*plain), b = run_model(*ckpt), c = run_model(*cpu);
    EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof a.loss), 0);
    EXPECT_EQ(std::memcmp(&a.loss, &c.loss, sizeof a.loss), 0);
    ASSERT_EQ(a.grads.size(), 3u);
    for (size_t i = 0; i < a.grads.size(); ++i) {
        EXPECT_EQ(a.grads[i], b.grads[i]) << "parameter " << i;  // bit for bit: the masks replay
        EXPECT_EQ(a.grads[i], c.grads[i]) << "parameter " << i;
    }
    // Kept (t = one activation tensor): plain, 3 blocks x (x, tanh) = 6t;
    // checkpointed, the 3 inputs plus the last block's recomputed (x, tanh)
    // while its backward runs = 5t.
    const int64_t t = kRows * kC * 4;
    EXPECT_EQ(a.peak, 6 * t);
    EXPECT_EQ(b.peak, 5 * t);
    EXPECT_LT(b.peak, a.peak);
    EXPECT_GT(cpu->cpu_checkpoint_pool().peak(MemCategory::Buffers), 0);  // the inputs went to the pool
    // Re-binding undoes the wrapping: 0 checkpointed layers, the plain peak.
    EXPECT_EQ(ckpt->checkpoint_layers(0, false), 0);
    ckpt->meter() = ActivationMeter{};
    EXPECT_EQ(run_model(*ckpt).peak, a.peak);
}

TEST(NnModel, NamesIdsAndInit) {
    auto m = test_model(2);
    ASSERT_EQ(m->params().size(), 2u);
    EXPECT_EQ(m->params()[0]->name, "0.weight");
    EXPECT_EQ(m->params()[1]->name, "1.weight");
    EXPECT_EQ(m->num_params(), 2 * kC * kC);
    // init: a pure function of (seed, name); mean ~0, std ~0.5 over 72 values
    auto m2 = test_model(2);
    EXPECT_EQ(0, std::memcmp(m->params()[1]->value.data<float>(), m2->params()[1]->value.data<float>(), kC * kC * 4));
    EXPECT_NE(0, std::memcmp(m->params()[0]->value.data<float>(), m->params()[1]->value.data<float>(), kC * kC * 4));
}

// ---------------------------------------------------------------- engine binding

std::string config(const std::string& extra = "") {
    return R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
               "optimizer": {"type": "SGD", "params": {"lr": 0.5}})" + extra + "}";
}

struct Dl {
    DLTensor t{};
    int64_t shape[2];
    Dl(float* data, int64_t r, int64_t c) {
        shape[0] = r;
        shape[1] = c;
        t.data = data;
        t.device = {kDLCPU, 0};
        t.ndim = 2;
        t.dtype = {kDLFloat, 32, 1};
        t.shape = shape;
    }
};

// A language model's two ds_forward inputs, int32 [rows, cols]: token ids
// (i * 3) % vocab and next-token targets (i * 3 + 1) % vocab.
struct TokenInputs {
    std::vector<int32_t> ids, targets;
    int64_t shape[2];
    DLTensor in[2];
    TokenInputs(int64_t rows, int64_t cols, int32_t vocab)
        : ids(size_t(rows * cols)), targets(ids.size()), shape{rows, cols} {
        for (size_t i = 0; i < ids.size(); ++i) {
            ids[i] = int32_t(i * 3) % vocab;
            targets[i] = int32_t(i * 3 + 1) % vocab;
        }
        in[0] = {ids.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0};
        in[1] = {targets.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0};
    }
    TokenInputs(const TokenInputs&) = delete;
    TokenInputs& operator=(const TokenInputs&) = delete;
};

// The test model's fixed micro-batch (features x, mse targets t) as
// ds_forward's two inputs, and the scalar `lo` that receives the loss.
struct Batch {
    std::vector<float> x = values(kRows * kC, 0.8f, 0.1f), t = values(kRows * kC, 0.5f, 1.3f);
    Dl in[2] = {Dl(x.data(), kRows, kC), Dl(t.data(), kRows, kC)};
    DLTensor inputs[2] = {in[0].t, in[1].t};
    float loss = 0.0f;
    Dl lo{&loss, 1, 1};
    Batch() { lo.t.ndim = 0; }
    Batch(const Batch&) = delete;
    Batch& operator=(const Batch&) = delete;
};

// The float64 reference of one TestBlock + MSE: loss and dL/dW.
double reference(const std::vector<float>& w, const std::vector<float>& x, const std::vector<float>& t, uint64_t seed,
                 uint64_t fi, uint32_t id, std::vector<double>* gw, std::vector<double>* dout = nullptr) {
    const int64_t n = kRows * kC;
    std::vector<double> y(static_cast<size_t>(n)), h(static_cast<size_t>(n));
    for (int64_t r = 0; r < kRows; ++r)
        for (int64_t j = 0; j < kC; ++j) {
            double a = 0.0;
            for (int64_t k = 0; k < kC; ++k) a += double(x[size_t(r * kC + k)]) * w[size_t(j * kC + k)];
            const size_t i = size_t(r * kC + j);
            h[i] = std::tanh(a);
            y[i] = x[i] + h[i] * mask_at(seed, fi, id, int64_t(i));
        }
    double loss = 0.0;
    for (size_t i = 0; i < size_t(n); ++i) loss += (y[i] - t[i]) * (y[i] - t[i]) / double(n);
    gw->assign(size_t(kC * kC), 0.0);
    if (dout) dout->resize(size_t(n));
    for (int64_t r = 0; r < kRows; ++r)
        for (int64_t j = 0; j < kC; ++j) {
            const size_t i = size_t(r * kC + j);
            const double dy = 2.0 * (y[i] - t[i]) / double(n);
            if (dout) (*dout)[i] = dy;
            const double da = dy * mask_at(seed, fi, id, int64_t(i)) * (1.0 - h[i] * h[i]);
            for (int64_t k = 0; k < kC; ++k) (*gw)[size_t(j * kC + k)] += da * x[size_t(r * kC + k)];
        }
    return loss;
}

std::vector<float> full(Engine& e, FullTensor which, const char* name) {
    std::vector<float> v(size_t(kC * kC));
    Dl d(v.data(), kC, kC);
    e.get_full(which, name, nullptr, &d.t);
    return v;
}

TEST(NnEngineModel, GradientsAndStepMatchFloat64) {
    for (const char* precision : {"", R"(, "fp16": {"enabled": true, "loss_scale": 1024})", R"(, "bf16": {"enabled": true})"}) {
        SCOPED_TRACE(precision);
        auto m = test_model(1);
        const uint32_t id = m->root().children()[0]->id();
        Engine e(config(precision), EngineOptions{});
        e.attach_model(m);
        const std::vector<float> w0 = full(e, FullTensor::Param, "0.weight");
        Batch b;
        e.forward(b.inputs, 2, &b.lo.t);
        // The weights the forward read: fp16/bf16 round them (the reference uses the same).
        std::vector<float> wr = w0;
        if (precision[0] != '\0') {
            Tensor r = Tensor::borrow(wr.data(), {kC, kC}, {}, DType::F32, Device::cpu());
            Tensor q = r.to(std::string(precision).find("fp16") != std::string::npos ? DType::F16 : DType::BF16,
                            Allocator::process(), MemCategory::Buffers);
            r.copy_from(q);
        }
        std::vector<double> gw;
        const double ref = reference(wr, b.x, b.t, m->seed(), 0, id, &gw);
        EXPECT_NEAR(b.loss, ref, 1e-5 * std::abs(ref) + 1e-6);
        e.backward(nullptr);
        EXPECT_EQ(e.model_binding()->forward_index(), 1u);
        e.step();
        const std::vector<float> w1 = full(e, FullTensor::Param, "0.weight");
        // SGD: w -= lr * g. bf16 accumulates gradients in bf16 (8-bit significand).
        const double rel = std::string(precision).find("bf16") != std::string::npos ? 8e-3 : 1e-3;
        for (size_t i = 0; i < w1.size(); ++i)
            EXPECT_NEAR((w0[i] - w1[i]) / 0.5, gw[i], 1e-4 + rel * std::abs(gw[i])) << i;
        EXPECT_EQ(e.counters().global_samples, 4);
    }
}

TEST(NnEngineModel, NonScalarBackwardEqualsScalar) {
    std::vector<float> x = values(kRows * kC, 0.8f, 0.1f), t = values(kRows * kC, 0.5f, 1.3f);
    std::vector<float> got[2];
    for (int mode = 0; mode < 2; ++mode) {
        auto m = test_model(1);
        Engine e(config(), EngineOptions{});
        e.attach_model(m);
        Dl in[2] = {Dl(x.data(), kRows, kC), Dl(t.data(), kRows, kC)};
        DLTensor inputs[2] = {in[0].t, in[1].t};
        std::vector<float> out(size_t(kRows * kC));
        Dl o(out.data(), kRows, kC);
        if (mode == 0) {
            float loss = 0.0f;
            Dl lo(&loss, 1, 1);
            lo.t.ndim = 0;
            e.forward(inputs, 2, &lo.t);
            e.backward(nullptr);
        } else {
            e.forward(inputs, 1, &o.t);
            std::vector<double> gw, dout;
            reference(full(e, FullTensor::Param, "0.weight"), x, t, m->seed(), 0, m->root().children()[0]->id(), &gw,
                      &dout);
            std::vector<float> g(dout.begin(), dout.end());
            Dl gd(g.data(), kRows, kC);
            e.backward(&gd.t);
        }
        got[mode] = full(e, FullTensor::Grad, "0.weight");
    }
    for (size_t i = 0; i < got[0].size(); ++i) EXPECT_NEAR(got[0][i], got[1][i], 1e-6f + 1e-5f * std::abs(got[0][i]));
}

TEST(NnEngineModel, CallOrderAndArgumentErrors) {
    auto m = test_model(1);
    Engine e(config(), EngineOptions{});
    e.attach_model(m);
    Batch b;
    std::vector<float> out(size_t(kRows * kC));
    Dl o(out.data(), kRows, kC);
    auto expect = [](ds_status_t st, const char* text, auto&& f) {
        Error err = catch_error(f);
        EXPECT_EQ(err.status(), st) << err.what();
        EXPECT_NE(std::string(err.what()).find(text), std::string::npos) << err.what();
    };
    expect(DS_ERR_INVALID_STATE, "without a ds_forward", [&] { e.backward(nullptr); });
    e.forward(b.inputs, 2, &b.lo.t);
    expect(DS_ERR_INVALID_STATE, "call ds_backward(engine, NULL)", [&] { e.backward(&o.t); });
    e.backward(nullptr);
    expect(DS_ERR_INVALID_STATE, "without a ds_forward", [&] { e.backward(nullptr); });
    e.step();
    e.forward(b.inputs, 1, &o.t);
    expect(DS_ERR_INVALID_STATE, "no scalar loss", [&] { e.backward(nullptr); });
    Dl bad(out.data(), kRows, kC - 1);
    expect(DS_ERR_INVALID_ARGUMENT, "out_grad", [&] { e.backward(&bad.t); });
    e.set_eval(true);
    e.forward(b.inputs, 2, &b.lo.t);
    expect(DS_ERR_INVALID_STATE, "under ds_engine_eval", [&] { e.backward(nullptr); });
    e.set_eval(false);
    Dl small(b.x.data(), 2, kC);
    expect(DS_ERR_INVALID_ARGUMENT, "train_micro_batch_size_per_gpu = 4", [&] { e.forward(&small.t, 1, &o.t); });
    expect(DS_ERR_INVALID_ARGUMENT, "n_inputs = 3", [&] { e.forward(b.inputs, 3, &o.t); });
    expect(DS_ERR_INVALID_ARGUMENT, "out (the output)", [&] { e.forward(b.inputs, 1, &b.lo.t); });
    expect(DS_ERR_INVALID_ARGUMENT, "out (the loss)", [&] { e.forward(b.inputs, 2, &o.t); });
    Dl wide(b.x.data(), 3, 8);
    expect(DS_ERR_INVALID_ARGUMENT, "inputs[0].shape = [3, 8]", [&] { e.forward(&wide.t, 1, &o.t); });
    // A second engine cannot take the same model while the first holds it.
    expect(DS_ERR_INVALID_STATE, "already used by another engine", [&] {
        Engine e2(config(), EngineOptions{});
        e2.attach_model(m);
    });
    // The engine is still usable.
    e.forward(b.inputs, 2, &b.lo.t);
    e.backward(nullptr);
    e.step();
}

TEST(NnEngineModel, EvalIsDeterministicTrainingDrawsNewMasks) {
    auto m = test_model(1);
    Engine e(config(), EngineOptions{});
    e.attach_model(m);
    std::vector<float> x = values(kRows * kC, 0.8f, 0.1f);
    Dl in(x.data(), kRows, kC);
    std::vector<float> a(size_t(kRows * kC)), b(a.size());
    Dl oa(a.data(), kRows, kC), ob(b.data(), kRows, kC);
    e.forward(&in.t, 1, &oa.t);
    e.forward(&in.t, 1, &ob.t);  // a new forward replaces the first
    EXPECT_NE(a, b);
    EXPECT_EQ(e.model_binding()->forward_index(), 2u);
    e.set_eval(true);
    e.forward(&in.t, 1, &oa.t);
    e.forward(&in.t, 1, &ob.t);
    EXPECT_EQ(a, b);
    EXPECT_EQ(e.model_binding()->forward_index(), 2u);  // eval draws nothing
}

TEST(NnEngineModel, CheckpointRestoresTheDropoutStream) {
    const std::string dir = (std::filesystem::temp_directory_path() / ("ds_nn_model_" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(dir);
    auto m = test_model(1);
    std::vector<float> x = values(kRows * kC, 0.8f, 0.1f), t = values(kRows * kC, 0.5f, 1.3f);
    Dl in[2] = {Dl(x.data(), kRows, kC), Dl(t.data(), kRows, kC)};
    DLTensor inputs[2] = {in[0].t, in[1].t};
    float la = 0.0f, lb = 0.0f;
    Dl lo(&la, 1, 1), lo2(&lb, 1, 1);
    lo.t.ndim = lo2.t.ndim = 0;
    {
        Engine e(config(), EngineOptions{});
        e.attach_model(m);
        for (int i = 0; i < 3; ++i) {
            e.forward(inputs, 2, &lo.t);
            e.backward(nullptr);
            e.step();
        }
        e.save_checkpoint(dir.c_str(), "t", nullptr);
        e.forward(inputs, 2, &lo.t);  // the 4th forward's loss
    }
    auto m2 = test_model(1, /*seed=*/99);  // another seed: the checkpoint's wins
    Engine e(config(), EngineOptions{});
    e.attach_model(m2);
    e.load_checkpoint(dir.c_str(), "t", 0);
    EXPECT_EQ(e.model_binding()->forward_index(), 3u);
    EXPECT_EQ(e.model_binding()->seed(), 3u);
    e.forward(inputs, 2, &lo2.t);
    EXPECT_EQ(0, std::memcmp(&la, &lb, sizeof la));
    std::filesystem::remove_all(dir);
}

TEST(NnEngineModel, Fp16OverflowSkipsTheStep) {
    auto m = test_model(1);
    // 2^40 times a gradient of order 1 overflows fp16 (max 65504): skipped, scale halved.
    Engine e(config(R"(, "fp16": {"enabled": true, "initial_scale_power": 40, "hysteresis": 1})"), EngineOptions{});
    e.attach_model(m);
    const std::vector<float> w0 = full(e, FullTensor::Param, "0.weight");
    Batch b;
    e.forward(b.inputs, 2, &b.lo.t);
    e.backward(nullptr);
    StepResult r = e.step();
    EXPECT_TRUE(r.skipped);
    EXPECT_EQ(e.counters().skipped_steps, 1);
    EXPECT_EQ(e.loss_scale(), std::ldexp(1.0, 39));
    EXPECT_EQ(full(e, FullTensor::Param, "0.weight"), w0);  // unchanged
}

// ZeRO-3 in one process: the binding gathers for the forward and releases
// after the backward; the numbers equal stage 0's bit for bit.
TEST(NnEngineModel, Zero3GathersAndMatchesStage0) {
    std::vector<float> w[2];
    for (int stage : {0, 3}) {
        auto m = test_model(2);
        Engine e(config(R"(, "zero_optimization": {"stage": )" + std::to_string(stage) +
                        R"(, "param_persistence_threshold": 0}, "zero_allow_untested_optimizer": true)"),
                 EngineOptions{});
        e.attach_model(m);
        Batch b;
        for (int i = 0; i < 3; ++i) {
            e.forward(b.inputs, 2, &b.lo.t);
            if (stage == 3) {  // gathered while the micro-step is in flight
                EXPECT_TRUE(e.params().get("0.weight").working.defined());
            }
            e.backward(nullptr);
            if (stage == 3) {
                EXPECT_FALSE(m->params()[0]->value.defined());  // released after the backward
            }
            e.step();
        }
        e.set_eval(true);
        e.forward(b.inputs, 2, &b.lo.t);  // eval: gathered and released at once
        if (stage == 3) {
            EXPECT_FALSE(m->params()[0]->value.defined());
        }
        w[stage == 3] = full(e, FullTensor::Param, "1.weight");
    }
    EXPECT_EQ(w[0], w[1]);
}

// ---------------------------------------------------------------- sequential models (library layers)

double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

TEST(NnSequential, MlpLossMatchesFloat64AndTrains) {
    std::shared_ptr<Model> m(ds::nn::build_model(R"({"type": "sequential", "loss": "mse", "seed": 4,
        "initializer_range": 0.5, "layers": [{"type": "linear", "in_features": 6, "out_features": 8},
        {"type": "gelu"}, {"type": "dropout", "p": 0.0}, {"type": "linear", "in_features": 8, "out_features": 6}]})"));
    ASSERT_EQ(m->params().size(), 4u);
    EXPECT_EQ(m->params()[0]->name, "0.weight");
    EXPECT_EQ(m->params()[3]->name, "3.bias");
    EXPECT_EQ(m->num_params(), 6 * 8 + 8 + 8 * 6 + 6);
    auto val = [&](size_t i) {
        const NnParam& p = *m->params()[i];
        return std::vector<double>(p.value.data<float>(), p.value.data<float>() + p.value.numel());
    };
    const std::vector<double> w1 = val(0), b1 = val(1), w2 = val(2), b2 = val(3);
    for (double b : b1) EXPECT_EQ(b, 0.0);  // biases start at 0
    std::vector<float> x = values(kRows * kC, 0.8f, 0.1f), t = values(kRows * kC, 0.5f, 1.3f);
    double ref = 0.0;
    for (int64_t r = 0; r < kRows; ++r) {
        std::vector<double> g(8);
        for (int j = 0; j < 8; ++j) {
            double h = b1[size_t(j)];
            for (int k = 0; k < kC; ++k) h += w1[size_t(j * kC + k)] * x[size_t(r * kC + k)];
            g[size_t(j)] = gelu_tanh(h);
        }
        for (int j = 0; j < kC; ++j) {
            double y = b2[size_t(j)];
            for (int k = 0; k < 8; ++k) y += w2[size_t(j * 8 + k)] * g[size_t(k)];
            ref += (y - t[size_t(r * kC + j)]) * (y - t[size_t(r * kC + j)]) / double(kRows * kC);
        }
    }
    Engine e(config(), EngineOptions{});
    e.attach_model(m);
    Dl in[2] = {Dl(x.data(), kRows, kC), Dl(t.data(), kRows, kC)};
    DLTensor inputs[2] = {in[0].t, in[1].t};
    float loss = 0.0f, first = 0.0f;
    Dl lo(&loss, 1, 1);
    lo.t.ndim = 0;
    for (int i = 0; i < 30; ++i) {
        e.forward(inputs, 2, &lo.t);
        if (i == 0) {
            first = loss;
            EXPECT_NEAR(loss, ref, 1e-5 * ref);
        }
        e.backward(nullptr);
        e.step();
    }
    EXPECT_LT(loss, 0.5f * first);
}

TEST(NnSequential, EmbeddingCrossEntropyTrains) {
    std::shared_ptr<Model> m(ds::nn::build_model(R"({"type": "sequential", "loss": "cross_entropy", "layers": [
        {"type": "embedding", "num_embeddings": 10, "embedding_dim": 8}, {"type": "layernorm", "dim": 8},
        {"type": "linear", "in_features": 8, "out_features": 10}]})"));
    Engine e(R"({"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "adamw", "params": {"lr": 0.05}}})",
             EngineOptions{});
    e.attach_model(m);
    TokenInputs tokens(4, 5, 10);
    DLTensor* inputs = tokens.in;
    float loss = 0.0f, first = 0.0f;
    Dl lo(&loss, 1, 1);
    lo.t.ndim = 0;
    for (int i = 0; i < 30; ++i) {
        e.forward(inputs, 2, &lo.t);
        if (i == 0) first = loss;
        e.backward(nullptr);
        e.step();
    }
    EXPECT_NEAR(first, std::log(10.0), 0.7);
    EXPECT_LT(loss, 0.3f * first);
    // logits out: [4, 5, 10]
    std::vector<float> logits(200);
    int64_t lshape[3] = {4, 5, 10};
    DLTensor out{};
    out.data = logits.data();
    out.device = {kDLCPU, 0};
    out.ndim = 3;
    out.dtype = {kDLFloat, 32, 1};
    out.shape = lshape;
    e.set_eval(true);
    e.forward(inputs, 1, &out);
    int correct = 0;
    for (int r = 0; r < 20; ++r) {
        int best = 0;
        for (int v = 1; v < 10; ++v)
            if (logits[size_t(r * 10 + v)] > logits[size_t(r * 10 + best)]) best = v;
        correct += best == tokens.targets[size_t(r)];
    }
    EXPECT_EQ(correct, 20);
}

// ---------------------------------------------------------------- GPT

int64_t gpt_formula(int64_t V, int64_t S, int64_t C, int64_t L, bool bias, bool tied) {
    // wte + wpe; per layer ln_1, c_attn, attn.c_proj, ln_2, c_fc, mlp.c_proj; ln_f; untied head
    const int64_t b = bias ? 1 : 0;
    const int64_t layer = 2 * C + (3 * C * C + 3 * C * b) + (C * C + C * b) + 2 * C + (4 * C * C + 4 * C * b) +
                          (4 * C * C + C * b);
    return V * C + S * C + L * layer + 2 * C + (tied ? 0 : V * C);
}

TEST(NnGpt, ParamCountIsTheClosedFormula) {
    for (bool bias : {true, false})
        for (bool tied : {true, false}) {
            const std::string spec = std::string(R"({"type":"gpt","vocab_size":37,"block_size":9,"n_layer":3,)") +
                                     R"("n_head":2,"n_embd":12,"bias":)" + (bias ? "true" : "false") +
                                     R"(,"tied_embeddings":)" + (tied ? "true" : "false") + "}";
            std::unique_ptr<Model> m = ds::nn::build_model(spec);
            EXPECT_EQ(m->num_params(), gpt_formula(37, 9, 12, 3, bias, tied)) << spec;
            EXPECT_EQ(m->num_params(), ds::nn::gpt_param_count(m->spec().gpt)) << spec;
            EXPECT_EQ(m->params().front()->name, "wte.weight");
            EXPECT_EQ(m->checkpointable_layers(), 3);
            bool has_head = false, has_c_attn = false;
            for (NnParam* p : m->params()) {
                has_head = has_head || p->name == "lm_head.weight";
                has_c_attn = has_c_attn || p->name == "h.2.attn.c_attn.weight";
            }
            EXPECT_EQ(has_head, !tied) << spec;
            EXPECT_TRUE(has_c_attn) << spec;
        }
}

// A GPT on a fixed batch of token ids, its activation meter reset first.
RunResult run_gpt(Model& m) {
    const int64_t B = 2, T = 16, V = m.spec().gpt.vocab_size;
    std::vector<int64_t> ids(size_t(B * T)), tg(ids.size());
    for (int64_t i = 0; i < B * T; ++i) {
        ids[size_t(i)] = (i * 7 + 1) % V;
        tg[size_t(i)] = (i * 11 + 2) % V;
    }
    m.meter() = ActivationMeter{};
    return run_nn(m, Tensor::borrow(ids.data(), {B, T}, {}, DType::I64, Device::cpu()),
                  Tensor::borrow(tg.data(), {B * T}, {}, DType::I64, Device::cpu()), 21, 4);
}

TEST(NnGpt, ActivationCheckpointingBitIdenticalFewerBytes) {
    const char* spec = R"({"type":"gpt","vocab_size":50,"block_size":16,"n_layer":4,"n_head":4,"n_embd":32,
                          "dropout":0.1,"seed":8})";
    std::unique_ptr<Model> plain = ds::nn::build_model(spec), ckpt = ds::nn::build_model(spec),
                           cpu = ds::nn::build_model(spec);
    EXPECT_EQ(ckpt->checkpoint_layers(4, false), 4);
    EXPECT_EQ(cpu->checkpoint_layers(2, true), 2);
    const RunResult a = run_gpt(*plain), b = run_gpt(*ckpt), c = run_gpt(*cpu);
    EXPECT_EQ(0, std::memcmp(&a.loss, &b.loss, sizeof a.loss));
    EXPECT_EQ(0, std::memcmp(&a.loss, &c.loss, sizeof a.loss));
    ASSERT_EQ(a.grads.size(), b.grads.size());
    for (size_t i = 0; i < a.grads.size(); ++i) {
        EXPECT_EQ(a.grads[i], b.grads[i]) << plain->params()[i]->name;
        EXPECT_EQ(a.grads[i], c.grads[i]) << plain->params()[i]->name;
    }
    std::printf("GPT (4 layers, C=32, B=2, T=16) activation bytes kept at peak: %lld without checkpointing, "
                "%lld with all 4 layers checkpointed, %lld with 2 (cpu_checkpointing)\n",
                static_cast<long long>(a.peak), static_cast<long long>(b.peak), static_cast<long long>(c.peak));
    EXPECT_LT(b.peak, c.peak);
    EXPECT_LT(c.peak, a.peak);
    EXPECT_LT(b.peak, a.peak / 2);
}

// The engine reports the activation bytes kept at the meter's peak (after
// the first backward) and how many layers it checkpointed (at creation).
TEST(NnGpt, EngineLogsActivationPeakWithAndWithoutCheckpointing) {
    const char* spec = R"({"type":"gpt","vocab_size":20,"block_size":8,"n_layer":3,"n_head":2,"n_embd":16,"seed":2})";
    long long peak[2] = {0, 0};
    for (int ckpt = 0; ckpt < 2; ++ckpt) {
        std::vector<std::string> lines;
        EngineOptions o;
        o.log_level = DS_LOG_INFO;
        o.log_user_data = &lines;
        o.log_callback = [](int32_t, const char* msg, void* ud) {
            static_cast<std::vector<std::string>*>(ud)->push_back(msg);
        };
        Engine e(R"({"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "adamw", "params": {"lr": 0.01}})" +
                     std::string(ckpt ? R"(, "activation_checkpointing": {"number_checkpoints": 3}})" : "}"),
                 o);
        e.attach_model(std::shared_ptr<Model>(ds::nn::build_model(spec)));
        TokenInputs tokens(2, 8, 20);
        float loss = 0.0f;
        Dl lo(&loss, 1, 1);
        lo.t.ndim = 0;
        e.forward(tokens.in, 2, &lo.t);
        e.backward(nullptr);
        bool created = false;
        for (const std::string& l : lines) {
            created = created || l.find(ckpt ? "activation checkpointing: 3 of 3 transformer layers"
                                             : "activation checkpointing: 0 of 3 transformer layers") !=
                                     std::string::npos;
            const size_t at = l.find("activations kept for backward: peak ");
            if (at != std::string::npos) peak[ckpt] = std::atoll(l.c_str() + at + 36);
        }
        EXPECT_TRUE(created);
        EXPECT_GT(peak[ckpt], 0);
    }
    EXPECT_LT(peak[1], peak[0]);
}

}  // namespace
