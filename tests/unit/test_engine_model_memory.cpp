// Who owns a built-in model's gradients and weights inside the engine
// (docs/DESIGN.md, "Built-in models"): at ZeRO 0/1 with fp32 gradient
// buffers the layers add straight into the engine's accumulation buffer, so
// micro-steps must still add up, a host's ds_engine_accumulate_grad must add
// to them, and a backward that fails part-way must leave no partial
// gradient; fp16/bf16 engines convert one transformer layer's weights at a
// time and hand each layer's gradients over as its backward returns.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "core/tensor.h"
#include "engine/engine.h"
#include "engine/engine_model.h"
#include "nn/layer_scope.h"
#include "nn/model.h"

namespace {

using ds::Engine;
using ds::EngineOptions;
using ds::FullTensor;
using ds::nn::Model;

constexpr int64_t kRows = 4, kIn = 6, kHid = 8, kOut = 5;

// Two Linear layers and the mean squared error: float64 gradients by hand.
// (Two, so that an allocation failing in the first layer's backward comes
// after the second layer's gradients were written.)
std::shared_ptr<Model> linear_model() {
    return std::shared_ptr<Model>(ds::nn::build_model(R"({"type": "sequential", "loss": "mse", "seed": 7,
        "initializer_range": 0.5, "layers": [{"type": "linear", "in_features": 6, "out_features": 8},
        {"type": "linear", "in_features": 8, "out_features": 5}]})"));
}

const char* const kNames[4] = {"0.weight", "0.bias", "1.weight", "1.bias"};
const std::vector<int64_t> kShapes[4] = {{kHid, kIn}, {kHid}, {kOut, kHid}, {kOut}};

std::string config(int gas, const std::string& extra = "") {
    return R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": )" + std::to_string(gas) +
           R"(, "gradient_clipping": 0.0, "optimizer": {"type": "SGD", "params": {"lr": 0.25}})" + extra + "}";
}

std::vector<float> values(int64_t n, float scale, float shift) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = scale * std::sin(0.7f * float(i) + shift);
    return v;
}

struct Dl {
    DLTensor t{};
    std::vector<int64_t> shape;
    Dl(void* data, std::vector<int64_t> s, DLDataType dt = {kDLFloat, 32, 1}) : shape(std::move(s)) {
        t.data = data;
        t.device = {kDLCPU, 0};
        t.ndim = static_cast<int32_t>(shape.size());
        t.dtype = dt;
        t.shape = shape.data();
    }
};

std::vector<float> full(Engine& e, FullTensor which, const char* name, const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    Dl d(v.data(), shape);
    e.get_full(which, name, nullptr, &d.t);
    return v;
}

using Grads = std::vector<std::vector<double>>;  // kNames order

std::vector<std::vector<float>> weights(Engine& e) {
    std::vector<std::vector<float>> w;
    for (int i = 0; i < 4; ++i) w.push_back(full(e, FullTensor::Param, kNames[i], kShapes[i]));
    return w;
}

Grads zero_grads() {
    Grads g;
    for (int i = 0; i < 4; ++i) {
        int64_t n = 1;
        for (int64_t d : kShapes[i]) n *= d;
        g.emplace_back(size_t(n), 0.0);
    }
    return g;
}

// Micro-batch k: inputs and targets.
void batch(int k, std::vector<float>* x, std::vector<float>* t) {
    *x = values(kRows * kIn, 0.9f, 0.3f * float(k));
    *t = values(kRows * kOut, 0.6f, 1.1f + 0.5f * float(k));
}

// The gradients of mean((W1 x + b1) W2^T + b2 - t)^2, in float64, times `mult`, added to g.
void reference_grad(const std::vector<std::vector<float>>& w, int k, double mult, Grads* g) {
    std::vector<float> x, t;
    batch(k, &x, &t);
    const double n = double(kRows * kOut);
    for (int64_t r = 0; r < kRows; ++r) {
        std::vector<double> h(static_cast<size_t>(kHid)), dh(static_cast<size_t>(kHid), 0.0);
        for (int64_t j = 0; j < kHid; ++j) {
            h[size_t(j)] = w[1][size_t(j)];
            for (int64_t i = 0; i < kIn; ++i) h[size_t(j)] += double(w[0][size_t(j * kIn + i)]) * x[size_t(r * kIn + i)];
        }
        for (int64_t o = 0; o < kOut; ++o) {
            double y = w[3][size_t(o)];
            for (int64_t j = 0; j < kHid; ++j) y += double(w[2][size_t(o * kHid + j)]) * h[size_t(j)];
            const double dy = mult * 2.0 * (y - t[size_t(r * kOut + o)]) / n;
            (*g)[3][size_t(o)] += dy;
            for (int64_t j = 0; j < kHid; ++j) {
                (*g)[2][size_t(o * kHid + j)] += dy * h[size_t(j)];
                dh[size_t(j)] += dy * w[2][size_t(o * kHid + j)];
            }
        }
        for (int64_t j = 0; j < kHid; ++j) {
            (*g)[1][size_t(j)] += dh[size_t(j)];
            for (int64_t i = 0; i < kIn; ++i) (*g)[0][size_t(j * kIn + i)] += dh[size_t(j)] * x[size_t(r * kIn + i)];
        }
    }
}

void forward_backward(Engine& e, int k) {
    std::vector<float> x, t;
    batch(k, &x, &t);
    Dl in[2] = {Dl(x.data(), {kRows, kIn}), Dl(t.data(), {kRows, kOut})};
    DLTensor inputs[2] = {in[0].t, in[1].t};
    float loss = 0.0f;
    Dl lo(&loss, {});
    e.forward(inputs, 2, &lo.t);
    e.backward(nullptr);
}

void expect_grads(Engine& e, const Grads& want) {
    for (int p = 0; p < 4; ++p) {
        const std::vector<float> got = full(e, FullTensor::Grad, kNames[p], kShapes[p]);
        for (size_t i = 0; i < got.size(); ++i)
            EXPECT_NEAR(got[i], want[size_t(p)][i], 1e-6 + 1e-5 * std::abs(want[size_t(p)][i])) << kNames[p] << "[" << i << "]";
    }
}

// Three micro-steps add into the engine's buffer (the layers write it in
// place): the float64 sum of the three pre-divided gradients; a gradient
// view of the model's parameter reads the same; a host gradient handed to
// ds_engine_accumulate_grad adds to it; the step applies the total.
TEST(EngineModelGradOwnership, ThreeMicroStepsAndAHostGradientAddUp) {
    auto m = linear_model();
    Engine e(config(3), EngineOptions{});
    e.attach_model(m);
    const std::vector<std::vector<float>> w0 = weights(e);
    Grads g = zero_grads();
    for (int k = 0; k < 3; ++k) {
        forward_backward(e, k);
        reference_grad(w0, k, 1.0 / 3.0, &g);
        if (k < 2) EXPECT_FALSE(e.step().stepped);  // inside the window: no update
    }
    expect_grads(e, g);
    // ds_engine_grad_view of the model's parameter: the same buffer.
    DLTensor view{};
    e.grad_view("1.weight", &view);
    ASSERT_EQ(view.ndim, 2);
    const float* gv = static_cast<const float*>(view.data);
    for (size_t i = 0; i < g[2].size(); ++i) EXPECT_NEAR(gv[i], g[2][i], 1e-6 + 1e-5 * std::abs(g[2][i])) << i;
    // A host gradient (not pre-divided: the engine divides it by 3) adds.
    std::vector<float> host = values(kOut * kHid, 0.3f, 2.0f);
    Dl hd(host.data(), {kOut, kHid});
    e.accumulate_grad("1.weight", &hd.t, 0);
    for (size_t i = 0; i < g[2].size(); ++i) g[2][i] += double(host[i]) / 3.0;
    expect_grads(e, g);
    EXPECT_TRUE(e.step().stepped);
    const std::vector<std::vector<float>> w1 = weights(e);
    for (int p = 0; p < 4; ++p)
        for (size_t i = 0; i < w1[size_t(p)].size(); ++i)
            EXPECT_NEAR(w1[size_t(p)][i], w0[size_t(p)][i] - 0.25 * g[size_t(p)][i], 1e-6) << kNames[p] << i;
    // The next window starts from zeros: one micro-step's gradient only.
    forward_backward(e, 5);
    Grads h = zero_grads();
    reference_grad(w1, 5, 1.0 / 3.0, &h);
    expect_grads(e, h);
}

// Out of memory at each allocation of a backward in turn. On the window's
// first micro-step (written in place) the buffers read as zeros again: the
// next backward's gradient is exactly its own. A later micro-step computes
// its gradient apart and adds it only when the backward has finished, so
// the earlier micro-step's gradient is still there, whole.
TEST(EngineModelGradOwnership, BackwardFailingPartWayLeavesNoPartialGradient) {
    for (int later = 0; later < 2; ++later) {
        int failures = 0;
        for (int n = 1; n <= 12; ++n) {
            SCOPED_TRACE("later micro-step " + std::to_string(later) + ", allocation " + std::to_string(n));
            auto m = linear_model();
            Engine e(config(2), EngineOptions{});
            e.attach_model(m);
            if (later) {
                forward_backward(e, 0);
                EXPECT_FALSE(e.step().stepped);
            }
            std::vector<float> x, t;
            batch(1, &x, &t);
            Dl in[2] = {Dl(x.data(), {kRows, kIn}), Dl(t.data(), {kRows, kOut})};
            DLTensor inputs[2] = {in[0].t, in[1].t};
            float loss = 0.0f;
            Dl lo(&loss, {});
            e.forward(inputs, 2, &lo.t);
            ds::Allocator::set_fail_after(n);
            bool threw = false;
            try {
                e.backward(nullptr);
            } catch (const ds::Error& err) {
                threw = true;
                EXPECT_EQ(err.status(), DS_ERR_OUT_OF_MEMORY) << err.what();
            }
            ds::Allocator::set_fail_after(-1);
            if (!threw) break;  // the backward makes fewer than n allocations
            ++failures;
            // The engine stays usable: a clean micro-step, then the window's gradient.
            const std::vector<std::vector<float>> w = weights(e);
            forward_backward(e, 2);
            Grads g = zero_grads();
            if (later) reference_grad(w, 0, 0.5, &g);
            reference_grad(w, 2, 0.5, &g);
            expect_grads(e, g);
        }
        EXPECT_GE(failures, 3);  // the loss's and both layers' allocations at least
    }
}

// ---------------------------------------------------------------- GPT, per-layer binding

const char* kGpt = R"({"type": "gpt", "vocab_size": 24, "block_size": 8, "n_layer": 2, "n_head": 2,
    "n_embd": 16, "dropout": 0.0, "seed": 5})";
constexpr int64_t kB = 2, kT = 8;

float gpt_micro_step(Engine& e) {
    std::vector<int32_t> ids(kB * kT), tg(kB * kT);
    for (int64_t i = 0; i < kB * kT; ++i) {
        ids[size_t(i)] = int32_t((i * 5 + 3) % 24);
        tg[size_t(i)] = int32_t((i * 7 + 1) % 24);
    }
    Dl in[2] = {Dl(ids.data(), {kB, kT}, {kDLInt, 32, 1}), Dl(tg.data(), {kB, kT}, {kDLInt, 32, 1})};
    DLTensor inputs[2] = {in[0].t, in[1].t};
    float loss = 0.0f;
    Dl lo(&loss, {});
    e.forward(inputs, 2, &lo.t);
    e.backward(nullptr);
    return loss;
}

std::string gpt_config(const std::string& extra) {
    return R"({"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "SGD", "params": {"lr": 0.1}})" + extra +
           "}";
}

float to_bf16_and_back(float v) {
    ds::Tensor a = ds::Tensor::borrow(&v, {1}, {}, ds::DType::F32, ds::Device::cpu());
    ds::Tensor h = a.to(ds::DType::BF16, ds::Allocator::process(), ds::MemCategory::Buffers);
    a.copy_from(h);
    return v;
}

// A bf16 engine converts each transformer layer's weights while it runs and
// hands its gradients over as its backward returns: its gradients equal an
// fp32 engine's at the same (bf16-representable) weights with the same bf16 matrix
// products (set_matmul_dtype), rounded to bf16;
// with and without activation checkpointing. After the engine is gone the
// model keeps its final weights, and a new engine trains it.
TEST(EngineModelLayerScope, Bf16GptGradientsEqualFp32AtTheSameWeights) {
    for (const char* ckpt : {"", R"(, "activation_checkpointing": {"number_checkpoints": 1})"}) {
        SCOPED_TRACE(ckpt);
        std::shared_ptr<Model> mb(ds::nn::build_model(kGpt)), mf(ds::nn::build_model(kGpt));
        auto eb = std::make_unique<Engine>(gpt_config(std::string(R"(, "bf16": {"enabled": true})") + ckpt),
                                           EngineOptions{});
        eb->attach_model(mb);
        Engine ef(gpt_config(ckpt), EngineOptions{});
        ef.attach_model(mf);
        ef.model_binding()->set_matmul_dtype(ds::DType::BF16);  // the bf16 engine's products, in an fp32 engine
        // The bf16 model's layers are wrapped, the fp32 one's are not (its
        // gradients are the engine's buffers): the wrappers are invisible to
        // whatever walks the module tree (the flops profiler).
        auto tree = [](Model& m) {
            std::vector<std::string> out;
            for (ds::nn::Module* c : m.root().children()) {
                out.push_back(std::string(c->type()) + " " + c->name() + " " + std::to_string(c->id()));
                for (ds::nn::Module* g : c->children()) out.push_back(std::string("  ") + g->type() + " " + g->name());
            }
            return out;
        };
        EXPECT_EQ(tree(*mb), tree(*mf));
        EXPECT_NE(dynamic_cast<ds::nn::LayerScope*>(mb->root().children()[3]), nullptr);
        for (ds::nn::Param* p : mb->params()) {
            std::vector<float> w = full(*eb, FullTensor::Param, p->name.c_str(), p->shape);
            Dl d(w.data(), p->shape);
            ef.set_full(FullTensor::Param, p->name.c_str(), nullptr, &d.t);
        }
        const float lb = gpt_micro_step(*eb), lf = gpt_micro_step(ef);
        EXPECT_NEAR(lb, lf, 1e-6 * std::abs(lf));
        size_t compared = 0;
        for (ds::nn::Param* p : mb->params()) {
            const std::vector<float> gb = full(*eb, FullTensor::Grad, p->name.c_str(), p->shape);
            const std::vector<float> gf = full(ef, FullTensor::Grad, p->name.c_str(), p->shape);
            for (size_t i = 0; i < gf.size(); ++i, ++compared)
                ASSERT_NEAR(gb[i], gf[i], std::ldexp(std::abs(gf[i]), -8) + 1e-30) << p->name << "[" << i << "]";
        }
        EXPECT_EQ(compared, size_t(mb->num_params()));
        eb->step();
        std::vector<std::vector<float>> master;
        for (ds::nn::Param* p : mb->params()) master.push_back(full(*eb, FullTensor::Param, p->name.c_str(), p->shape));
        eb.reset();
        for (size_t k = 0; k < mb->params().size(); ++k) {
            const ds::nn::Param& p = *mb->params()[k];
            ASSERT_TRUE(p.value.defined()) << p.name;
            for (size_t i = 0; i < master[k].size(); ++i)
                ASSERT_EQ(p.value.data<float>()[i], to_bf16_and_back(master[k][i])) << p.name << "[" << i << "]";
        }
        Engine again(gpt_config(ckpt), EngineOptions{});
        again.attach_model(mb);
        EXPECT_TRUE(std::isfinite(gpt_micro_step(again)));
    }
}

// A bf16 engine binds the Linear weights and the embedding tables to its
// bf16 working weights in place (the same memory), so the only fp32 weight
// copies it makes are those of the other parameters (LayerNorms, biases):
// the model's own outside the transformer layers, plus one layer-sized
// buffer for the widest layer's. Before, every weight had an fp32 copy (the
// tied wte the largest). The step's loss and gradients are checked in
// Bf16GptGradientsEqualFp32AtTheSameWeights.
TEST(EngineModelLayerScope, Bf16EngineKeepsNoFp32CopyOfMatmulWeights) {
    std::shared_ptr<Model> m(ds::nn::build_model(kGpt));
    Engine e(gpt_config(R"(, "bf16": {"enabled": true})"), EngineOptions{});
    e.attach_model(m);
    int64_t outside = 0, widest_layer = 0, direct = 0;
    std::vector<const ds::nn::Param*> in_layer;
    for (int64_t k = 0; k < m->checkpointable_layers(); ++k) {
        int64_t bytes = 0;
        for (ds::nn::Param* p : m->layer_params(size_t(k))) {
            in_layer.push_back(p);
            if (!p->reads_bf16) bytes += 4 * ds::checked_numel(p->shape, p->name.c_str());
        }
        widest_layer = std::max(widest_layer, bytes);
    }
    for (ds::nn::Param* p : m->params()) {
        const ds::Param& ep = e.params().get(p->name.c_str());
        if (p->reads_bf16) {
            ++direct;
            ASSERT_TRUE(p->value.defined()) << p->name;
            EXPECT_EQ(p->value.dtype(), ds::DType::BF16) << p->name;
            EXPECT_EQ(p->value.data_ptr(), ep.working.data_ptr()) << p->name << ": not the working weights";
        } else if (std::find(in_layer.begin(), in_layer.end(), p) == in_layer.end()) {
            outside += 4 * ds::checked_numel(p->shape, p->name.c_str());
        }
    }
    EXPECT_EQ(direct, 2 + 2 * 4);  // wte (tied with lm_head), wpe; c_attn, attn c_proj, c_fc, mlp c_proj per layer
    EXPECT_EQ(e.allocator().bytes(ds::MemCategory::Buffers), outside + widest_layer);
    // A step trains, and the tied wte's gradient (lm_head + embedding) arrives.
    EXPECT_TRUE(std::isfinite(gpt_micro_step(e)));
    const std::vector<float> g = full(e, FullTensor::Grad, "wte.weight", {24, 16});
    double sum = 0.0;
    for (float v : g) sum += std::abs(v);
    EXPECT_GT(sum, 0.0);
    EXPECT_TRUE(e.step().stepped);
    EXPECT_EQ(m->params()[0]->value.data_ptr(), e.params().get(m->params()[0]->name.c_str()).working.data_ptr());
}

}  // namespace
