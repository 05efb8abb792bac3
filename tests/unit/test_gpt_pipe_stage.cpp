// The built-in GPT cut into pipeline stages (src/nn/gpt_pipe.h), checked
// against the uncut model on the same batch and dropout key: the stages'
// chained forwards give the same logits bit for bit, their chained
// backwards the same gradients (a tied wte.weight held by two stages: its two
// gradients summed, to float rounding), each stage holds exactly its
// layers' parameters with the full model's names, ids and initial values,
// micro-batches in flight on a stage replay their forward before their
// backward, and every refusal names what was wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "catch_error.h"
#include "nn/gpt.h"
#include "nn/gpt_pipe.h"
#include "nn/model.h"

using namespace ds;
using ds::nn::Model;
using ds::nn::Module;
using ds::nn::PipeLayerInfo;
using ds::nn::RunContext;
using NnParam = ds::nn::Param;

namespace {

constexpr int64_t kV = 64, kS = 16, kL = 4, kC = 32, kB = 2, kT = 16;
constexpr int64_t kLayers = kL + 3;
constexpr uint64_t kDropSeed = 21, kForwardIndex = 4;

// moe: "" or a "moe" object's JSON.
std::string gpt_spec(bool tied, const std::string& moe = "") {
    return std::string(R"({"type":"gpt","vocab_size":64,"block_size":16,"n_layer":4,"n_head":4,"n_embd":32,)") +
           R"("embd_dropout":0.1,"attn_dropout":0.1,"resid_dropout":0.1,"seed":5,"tied_embeddings":)" +
           (tied ? "true" : "false") + (moe.empty() ? "" : ",\"moe\":" + moe) + "}";
}

std::vector<int64_t> token_ids(int64_t mul, int64_t add) {
    std::vector<int64_t> v(size_t(kB * kT));
    for (int64_t i = 0; i < kB * kT; ++i) v[size_t(i)] = (i * mul + add) % kV;
    return v;
}

RunContext train_ctx(Allocator& alloc) {
    RunContext ctx;
    ctx.alloc = &alloc;
    ctx.training = true;
    ctx.seed = kDropSeed;
    ctx.forward_index = kForwardIndex;
    return ctx;
}

void zero_grads(Model& m, Allocator& alloc) {
    for (NnParam* p : m.params()) p->grad = Tensor::zeros(p->shape, DType::F32, Device::cpu(), alloc, MemCategory::Grads);
}

std::vector<float> to_vec(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); }

// What one training forward + backward produced.
struct Pass {
    std::vector<float> logits;
    float loss = 0.0f;
    std::map<std::string, std::vector<std::vector<float>>> grads;  // by name; a tied weight on two stages: two
};

// The uncut model: forward, loss, backward.
Pass run_full(Model& m, Allocator& alloc) {
    const std::vector<int64_t> ids = token_ids(7, 1), tg = token_ids(11, 2);
    zero_grads(m, alloc);
    RunContext ctx = train_ctx(alloc);
    Tensor y = m.root().forward(Tensor::borrow(const_cast<int64_t*>(ids.data()), {kB, kT}, {}, DType::I64, Device::cpu()),
                                ctx);
    Pass r;
    r.logits = to_vec(y);
    r.loss = m.loss().forward(y.view({kB * kT, kV}),
                              Tensor::borrow(const_cast<int64_t*>(tg.data()), {kB * kT}, {}, DType::I64, Device::cpu()),
                              ctx);
    EXPECT_FALSE(m.root().backward(m.loss().backward(1.0f, ctx).view(y.shape()), ctx).defined());
    for (NnParam* p : m.params()) r.grads[p->name].push_back(to_vec(p->grad));
    return r;
}

// The stages in order: each forward feeds the next, the last one's loss
// backward starts the chain back, each dx goes to the stage before.
Pass run_stages(std::vector<std::unique_ptr<Model>>& stages, Allocator& alloc) {
    const std::vector<int64_t> ids = token_ids(7, 1), tg = token_ids(11, 2);
    std::vector<RunContext> ctx;
    for (auto& s : stages) {
        zero_grads(*s, alloc);
        ctx.push_back(train_ctx(alloc));
    }
    Tensor x = Tensor::borrow(const_cast<int64_t*>(ids.data()), {kB, kT}, {}, DType::I64, Device::cpu());
    for (size_t k = 0; k < stages.size(); ++k) {
        x = stages[k]->root().forward(x, ctx[k]);
        const bool last = k + 1 == stages.size();
        EXPECT_EQ(x.shape(), (Shape{kB, kT, last ? kV : kC})) << "stage " << k;
    }
    Pass r;
    r.logits = to_vec(x);
    Model& tail = *stages.back();
    r.loss = tail.loss().forward(x.view({kB * kT, kV}),
                                 Tensor::borrow(const_cast<int64_t*>(tg.data()), {kB * kT}, {}, DType::I64, Device::cpu()),
                                 ctx.back());
    // MoE: the stages before the last add their own aux terms and seed them (as the pipeline engine does).
    for (size_t k = 0; k + 1 < stages.size(); ++k)
        if (ds::nn::AuxLoss* aux = stages[k]->aux_loss()) r.loss += aux->value();
    Tensor dy = tail.loss().backward(1.0f, ctx.back()).view(x.shape());
    for (size_t k = stages.size(); k-- > 0;) {
        if (k + 1 < stages.size() && stages[k]->aux_loss() != nullptr) stages[k]->aux_loss()->set_grad(1.0f);
        dy = stages[k]->root().backward(dy, ctx[k]);
        if (k == 0) {
            EXPECT_FALSE(dy.defined()) << "the embedding stage returns no gradient for token ids";
        } else {
            EXPECT_EQ(dy.shape(), (Shape{kB, kT, kC})) << "stage " << k;
        }
    }
    for (auto& s : stages)
        for (NnParam* p : s->params()) r.grads[p->name].push_back(to_vec(p->grad));
    return r;
}

// Every module of the tree by its dotted name, with its id.
void ids_by_name(Module& m, std::map<std::string, uint32_t>& out) {
    out[m.name()] = m.id();
    for (Module* c : m.children()) ids_by_name(*c, out);
}

std::vector<std::unique_ptr<Model>> cut(bool tied, const std::vector<int64_t>& bounds, const std::string& moe = "") {
    std::vector<std::unique_ptr<Model>> stages;
    for (size_t k = 0; k + 1 < bounds.size(); ++k) {
        stages.push_back(ds::nn::build_model(gpt_spec(tied, moe)));
        ds::nn::cut_gpt_to_stage(*stages.back(), bounds[k], bounds[k + 1]);
    }
    return stages;
}

std::string bounds_str(const std::vector<int64_t>& b) {
    std::string s;
    for (int64_t v : b) s += std::to_string(v) + " ";
    return s;
}

// Stage boundaries over the 7 pipeline layers (0 embedding, 1..4 h.0..h.3,
// 5 ln_f, 6 head): 2, 3 and 4 stages, an embedding-only stage and an
// ln_f + head stage among them.
const std::vector<std::vector<int64_t>> kCuts = {
    {0, 1, 7}, {0, 3, 7}, {0, 5, 7}, {0, 6, 7}, {0, 1, 5, 7}, {0, 2, 4, 7}, {0, 1, 3, 5, 7}, {0, 4, 5, 6, 7}};

// loss_rel: 0 for bit for bit; MoE stages add their aux terms in another order.
void expect_same_pass(const Pass& full, const Pass& staged, const std::string& what, float loss_rel = 0.0f) {
    ASSERT_EQ(full.logits.size(), staged.logits.size()) << what;
    EXPECT_EQ(0, std::memcmp(full.logits.data(), staged.logits.data(), full.logits.size() * sizeof(float))) << what;
    if (loss_rel == 0.0f) EXPECT_EQ(0, std::memcmp(&full.loss, &staged.loss, sizeof(float))) << what;
    else EXPECT_NEAR(full.loss, staged.loss, loss_rel * std::fabs(full.loss)) << what;
    ASSERT_EQ(full.grads.size(), staged.grads.size()) << what;
    for (const auto& [name, g] : full.grads) {
        auto it = staged.grads.find(name);
        ASSERT_NE(it, staged.grads.end()) << what << name;
        const std::vector<std::vector<float>>& parts = it->second;
        ASSERT_EQ(g.size(), 1u);
        if (parts.size() == 1) {
            EXPECT_EQ(g[0], parts[0]) << what << name << ": bit for bit";
            continue;
        }
        // The tied weight on two stages: the head's and the embedding's
        // gradients, added in another order than the uncut model's.
        ASSERT_EQ(parts.size(), 2u) << what << name;
        EXPECT_EQ(name, "wte.weight") << what;
        float largest = 0.0f;
        for (float v : g[0]) largest = std::max(largest, std::fabs(v));
        ASSERT_GT(largest, 0.0f);
        for (size_t i = 0; i < g[0].size(); ++i)
            ASSERT_LE(std::fabs(parts[0][i] + parts[1][i] - g[0][i]), 1e-6f * largest) << what << name << "[" << i << "]";
    }
}

TEST(GptPipeStage, ChainedStagesEqualTheUncutModel) {
    for (bool tied : {true, false}) {
        Allocator alloc;
        auto full = ds::nn::build_model(gpt_spec(tied));
        const Pass ref = run_full(*full, alloc);
        for (const auto& b : kCuts) {
            auto stages = cut(tied, b);
            expect_same_pass(ref, run_stages(stages, alloc), (tied ? "tied, cut " : "untied, cut ") + bounds_str(b));
        }
    }
}

// MoE layers stay in their stages: every stage's aux_loss_coef * l_aux is
// part of the loss (the last stage's inside its loss, the others' from the
// model's aux_loss()), and each stage's gates get that term's gradient in its
// own backward, so the chain equals the uncut model: logits and gradients bit
// for bit, the loss to its addition order. Top-2 with sampling, RSample top-1
// with RTS and a capacity that drops tokens, the residual MoE.
TEST(GptPipeStage, MoeStagesAddTheirAuxTermsAndSeedTheirGates) {
    const std::vector<std::string> moes = {
        R"({"num_experts":4,"every":1,"k":2,"capacity_factor":1.0,"min_capacity":1,"aux_loss_coef":0.5})",
        R"({"num_experts":3,"every":2,"noisy_gate_policy":"RSample","capacity_factor":0.5,"min_capacity":1})",
        R"({"num_experts":2,"every":1,"use_residual":true})"};
    for (const std::string& moe : moes) {
        Allocator alloc;
        auto full = ds::nn::build_model(gpt_spec(true, moe));
        ASSERT_NE(full->aux_loss(), nullptr);
        const Pass ref = run_full(*full, alloc);
        EXPECT_GT(full->aux_loss()->value(), 0.0f) << moe;
        float whole_aux = full->aux_loss()->value();
        for (const auto& b : kCuts) {
            auto stages = cut(true, b, moe);
            const std::string what = "moe " + moe + ", cut " + bounds_str(b);
            expect_same_pass(ref, run_stages(stages, alloc), what, 1e-6f);
            float parts = 0.0f;  // the stages' terms add up to the whole model's
            for (auto& st : stages) parts += st->aux_loss()->value();
            EXPECT_NEAR(parts, whole_aux, 1e-6f * whole_aux) << what;
        }
    }
}

TEST(GptPipeStage, ActivationCheckpointingOnStagesIsBitIdentical) {
    for (bool tied : {true, false}) {
        Allocator alloc;
        auto full = ds::nn::build_model(gpt_spec(tied));
        const Pass ref = run_full(*full, alloc);
        for (const auto& b : {std::vector<int64_t>{0, 3, 7}, std::vector<int64_t>{0, 1, 3, 5, 7}}) {
            auto stages = cut(tied, b);
            for (size_t k = 0; k < stages.size(); ++k) {
                const int64_t layers = stages[k]->checkpointable_layers();
                EXPECT_EQ(stages[k]->checkpoint_layers(100, false), layers);  // clamped to the stage's layers
            }
            expect_same_pass(ref, run_stages(stages, alloc),
                             (tied ? "checkpointed, tied, cut " : "checkpointed, untied, cut ") + bounds_str(b));
        }
    }
}

// A module answers backward for its last forward only. Under 1F1B a stage
// has several micro-batches in flight, so before a micro-batch's backward
// the stage runs that micro-batch's forward again from its kept input with
// its dropout key (seed, forward_index): the recomputation is exact, and the
// gradients equal the uncut model's micro-batch after micro-batch.
TEST(GptPipeStage, InFlightMicroBatchesReplayTheirForward) {
    Allocator alloc;
    const std::vector<std::vector<int64_t>> ids = {token_ids(7, 1), token_ids(5, 3)}, tg = {token_ids(11, 2),
                                                                                             token_ids(13, 4)};
    auto ids_of = [&](size_t mb) {
        return Tensor::borrow(const_cast<int64_t*>(ids[mb].data()), {kB, kT}, {}, DType::I64, Device::cpu());
    };
    auto tg_of = [&](size_t mb) {
        return Tensor::borrow(const_cast<int64_t*>(tg[mb].data()), {kB * kT}, {}, DType::I64, Device::cpu());
    };
    auto ctx_of = [&](size_t mb) {
        RunContext c = train_ctx(alloc);
        c.forward_index = kForwardIndex + mb;
        return c;
    };
    // The uncut model: micro-batch 0 then 1, gradients accumulated.
    auto full = ds::nn::build_model(gpt_spec(true));
    zero_grads(*full, alloc);
    std::vector<float> full_loss;
    for (size_t mb = 0; mb < 2; ++mb) {
        RunContext c = ctx_of(mb);
        Tensor y = full->root().forward(ids_of(mb), c);
        full_loss.push_back(full->loss().forward(y.view({kB * kT, kV}), tg_of(mb), c));
        full->root().backward(full->loss().backward(1.0f, c).view(y.shape()), c);
    }
    // Two stages: stage 0 runs both forwards before its first backward.
    auto stages = cut(true, {0, 3, kLayers});
    Model& s0 = *stages[0];
    Model& s1 = *stages[1];
    zero_grads(s0, alloc);
    zero_grads(s1, alloc);
    std::vector<Tensor> act(2);
    for (size_t mb = 0; mb < 2; ++mb) {
        RunContext c = ctx_of(mb);
        act[mb] = s0.root().forward(ids_of(mb), c);
    }
    for (size_t mb = 0; mb < 2; ++mb) {
        RunContext c1 = ctx_of(mb);
        Tensor y = s1.root().forward(act[mb], c1);
        const float loss = s1.loss().forward(y.view({kB * kT, kV}), tg_of(mb), c1);
        EXPECT_EQ(0, std::memcmp(&loss, &full_loss[mb], sizeof loss)) << "micro-batch " << mb;
        Tensor dx = s1.root().backward(s1.loss().backward(1.0f, c1).view(y.shape()), c1);
        RunContext c0 = ctx_of(mb);
        const Tensor again = s0.root().forward(ids_of(mb), c0);  // the replay
        ASSERT_EQ(0, std::memcmp(again.data<float>(), act[mb].data<float>(), size_t(again.numel()) * sizeof(float)));
        EXPECT_FALSE(s0.root().backward(dx, c0).defined());
    }
    std::map<std::string, std::vector<const NnParam*>> staged;
    for (auto* s : {&s0, &s1})
        for (const NnParam* p : s->params()) staged[p->name].push_back(p);
    for (const NnParam* p : full->params()) {
        const std::vector<const NnParam*>& parts = staged[p->name];
        const std::vector<float> want = to_vec(p->grad);
        if (p->name != "wte.weight") {
            ASSERT_EQ(parts.size(), 1u) << p->name;
            EXPECT_EQ(to_vec(parts[0]->grad), want) << p->name;
            continue;
        }
        ASSERT_EQ(parts.size(), 2u);
        const std::vector<float> a = to_vec(parts[0]->grad), b = to_vec(parts[1]->grad);
        float largest = 0.0f;
        for (float v : want) largest = std::max(largest, std::fabs(v));
        for (size_t i = 0; i < want.size(); ++i) ASSERT_LE(std::fabs(a[i] + b[i] - want[i]), 1e-6f * largest) << i;
    }
}

TEST(GptPipeStage, ParamsNamesIdsAndInitialValuesAreTheFullModels) {
    for (bool tied : {true, false}) {
        auto full = ds::nn::build_model(gpt_spec(tied));
        std::map<std::string, const NnParam*> by_name;
        for (const NnParam* p : full->params()) by_name[p->name] = p;
        std::map<std::string, uint32_t> full_ids;
        ids_by_name(full->root(), full_ids);
        for (const auto& b : kCuts) {
            const std::string what = (tied ? "tied, cut " : "untied, cut ") + bounds_str(b);
            auto stages = cut(tied, b);
            std::map<std::string, int> held;
            for (auto& s : stages) {
                for (const NnParam* p : s->params()) {
                    ++held[p->name];
                    auto it = by_name.find(p->name);
                    ASSERT_NE(it, by_name.end()) << what << p->name;
                    ASSERT_EQ(p->shape, it->second->shape) << what << p->name;
                    EXPECT_EQ(0, std::memcmp(p->value.data<float>(), it->second->value.data<float>(),
                                             size_t(p->value.numel()) * sizeof(float)))
                        << what << p->name;
                }
                std::map<std::string, uint32_t> stage_ids;
                ids_by_name(s->root(), stage_ids);
                for (const auto& [name, id] : stage_ids) {
                    ASSERT_TRUE(full_ids.count(name)) << what << "module " << name;
                    EXPECT_EQ(id, full_ids[name]) << what << "module " << name;
                }
            }
            EXPECT_EQ(held.size(), by_name.size()) << what;
            for (const auto& [name, count] : held) {
                // Only a tied weight is on two stages: the embedding's and the head's.
                const bool two = tied && name == "wte.weight" && b[b.size() - 2] > 0;
                EXPECT_EQ(count, two ? 2 : 1) << what << name;
            }
        }
    }
}

TEST(GptPipeStage, LayerListAndPerStageCounts) {
    for (bool tied : {true, false}) {
        auto full = ds::nn::build_model(gpt_spec(tied));
        const ds::nn::GptSpec& g = full->spec().gpt;
        const std::vector<PipeLayerInfo> layers = ds::nn::gpt_pipe_layers(g);
        ASSERT_EQ(static_cast<int64_t>(layers.size()), kLayers);
        EXPECT_EQ(layers[0].type, "GPTEmbedding");
        for (int64_t i = 1; i <= kL; ++i) EXPECT_EQ(layers[size_t(i)].type, "TransformerLayer");
        EXPECT_EQ(layers[kL + 1].type, "LayerNorm");
        EXPECT_EQ(layers[kL + 2].type, "LMHead");
        int64_t sum = 0;
        for (const PipeLayerInfo& l : layers) sum += l.params;
        EXPECT_EQ(sum, ds::nn::gpt_param_count(g) + (tied ? kV * kC : 0));
        // By hand from the shapes: embeddings, ln_f, head.
        EXPECT_EQ(layers[0].params, kV * kC + kS * kC);
        EXPECT_EQ(layers[kL + 1].params, 2 * kC);
        EXPECT_EQ(layers[kL + 2].params, kV * kC);
        // A transformer layer's entry: the built h.i's parameters.
        for (int64_t i = 0; i < kL; ++i) {
            const std::string prefix = "h." + std::to_string(i) + ".";
            int64_t n = 0;
            for (const NnParam* p : full->params())
                if (p->name.compare(0, prefix.size(), prefix) == 0) n += p->value.numel();
            EXPECT_EQ(layers[size_t(i + 1)].params, n) << prefix;
        }
        for (const auto& b : kCuts)
            for (size_t k = 0; k + 1 < b.size(); ++k) {
                auto m = ds::nn::build_model(gpt_spec(tied));
                ds::nn::cut_gpt_to_stage(*m, b[k], b[k + 1]);
                int64_t want = 0;
                for (int64_t l = b[k]; l < b[k + 1]; ++l) want += layers[size_t(l)].params;
                // One stage holding both tied ends keeps wte.weight once.
                if (tied && b[k] == 0 && b[k + 1] == kLayers) want -= kV * kC;
                EXPECT_EQ(m->num_params(), want) << "layers [" << b[k] << ", " << b[k + 1] << ")";
            }
        // By hand: the ln_f + head stage, the head alone (tied: wte.weight).
        auto tail = ds::nn::build_model(gpt_spec(tied));
        ds::nn::cut_gpt_to_stage(*tail, kL + 1, kLayers);
        EXPECT_EQ(tail->num_params(), 2 * kC + kV * kC);
        std::vector<std::string> names;
        for (const NnParam* p : tail->params()) names.push_back(p->name);
        std::sort(names.begin(), names.end());
        std::vector<std::string> want = {"ln_f.bias", "ln_f.weight", tied ? "wte.weight" : "lm_head.weight"};
        std::sort(want.begin(), want.end());
        EXPECT_EQ(names, want);
        if (tied) {  // the head's weight, owned by the stage's root, comes first
            EXPECT_EQ(tail->params().front()->name, "wte.weight");
        }
    }
}

// The partition's weight of an MoE layer is what one rank builds: with
// moe.ep_size = P its num_experts / P experts (DeepSpeed counts each
// LayerSpec as built, and MoE(ep_size) builds the local experts).
TEST(GptPipeStage, MoeLayerCountsTheExpertsARankHolds) {
    for (int ep : {1, 2, 4}) {
        const std::string moe = R"({"num_experts":4,"every":2,"ep_size":)" + std::to_string(ep) + "}";
        auto full = ds::nn::build_model(gpt_spec(true, moe));
        const std::vector<PipeLayerInfo> layers = ds::nn::gpt_pipe_layers(full->spec().gpt);
        for (int64_t i = 0; i < kL; ++i) {
            const std::string prefix = "h." + std::to_string(i) + ".";
            int64_t n = 0;  // the built layer's parameters, the experts a rank of the group holds only
            for (const NnParam* p : full->params()) {
                if (p->name.compare(0, prefix.size(), prefix) != 0) continue;
                const size_t at = p->name.find("deepspeed_experts.");
                if (at != std::string::npos && std::stoi(p->name.substr(at + 18)) >= 4 / ep) continue;
                n += p->value.numel();
            }
            EXPECT_EQ(layers[size_t(i + 1)].params, n) << prefix << " ep_size " << ep;
        }
    }
}

TEST(GptPipeStage, StageDescribesItself) {
    auto m = ds::nn::build_model(gpt_spec(true));
    EXPECT_EQ(m->pipe_stage().num_layers, 0);  // never cut
    EXPECT_EQ(m->pipe_stage().first, 0);
    EXPECT_EQ(m->pipe_stage().last, 0);
    EXPECT_EQ(m->checkpoint_layers(4, false), 4);  // undone by the cut
    ds::nn::cut_gpt_to_stage(*m, 2, 4);            // h.1, h.2
    EXPECT_EQ(m->pipe_stage().first, 2);
    EXPECT_EQ(m->pipe_stage().last, 4);
    EXPECT_EQ(m->pipe_stage().num_layers, kLayers);
    EXPECT_EQ(m->checkpointed_layers(), 0);
    ASSERT_EQ(m->checkpointable_layers(), 2);
    for (size_t i = 0; i < 2; ++i) {
        const std::string prefix = "h." + std::to_string(i + 1) + ".";
        const std::vector<NnParam*> ps = m->layer_params(i);
        ASSERT_FALSE(ps.empty());
        for (const NnParam* p : ps) EXPECT_EQ(p->name.compare(0, prefix.size(), prefix), 0) << p->name;
    }
    const ds::nn::IoContract& io = m->io();
    EXPECT_FALSE(io.ids_input);
    EXPECT_EQ(io.act_width, kC);
    EXPECT_EQ(io.in_width, kC);
    EXPECT_TRUE(io.act_output);
    EXPECT_EQ(io.out_width, kC);
    EXPECT_EQ(io.max_seq, kS);

    auto head = ds::nn::build_model(gpt_spec(true));
    ds::nn::cut_gpt_to_stage(*head, kL + 2, kLayers);
    EXPECT_EQ(head->checkpointable_layers(), 0);
    EXPECT_FALSE(head->io().ids_input);
    EXPECT_FALSE(head->io().act_output);
    EXPECT_EQ(head->io().out_width, kV);
    auto first = ds::nn::build_model(gpt_spec(true));
    ds::nn::cut_gpt_to_stage(*first, 0, 1);
    EXPECT_TRUE(first->io().ids_input);
    EXPECT_EQ(first->io().act_width, 0);
    EXPECT_EQ(first->io().in_width, kV);
    EXPECT_TRUE(first->io().act_output);
    EXPECT_EQ(first->io().out_width, kC);
    EXPECT_EQ(first->checkpointable_layers(), 0);
}

TEST(GptPipeStage, CutFreesTheOtherLayersParameters) {
    for (bool tied : {true, false}) {
        auto m = ds::nn::build_model(gpt_spec(tied));
        const int64_t before = Allocator::process().bytes(MemCategory::Params);
        const int64_t all = m->num_params();
        ds::nn::cut_gpt_to_stage(*m, kL + 1, kLayers);  // ln_f + head (tied: wte.weight stays)
        const int64_t after = Allocator::process().bytes(MemCategory::Params);
        EXPECT_EQ(before - after, (all - m->num_params()) * int64_t(sizeof(float))) << (tied ? "tied" : "untied");
    }
}

TEST(GptPipeStage, StageInputIsChecked) {
    Allocator alloc;
    auto m = ds::nn::build_model(gpt_spec(true));
    ds::nn::cut_gpt_to_stage(*m, 1, 3);
    RunContext ctx = train_ctx(alloc);
    std::vector<int64_t> ids = token_ids(3, 0);
    Error e = catch_error(
        [&] { m->root().forward(Tensor::borrow(ids.data(), {kB, kT}, {}, DType::I64, Device::cpu()), ctx); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT) << e.what();
    std::vector<float> x(size_t(kB * kT * (kC + 1)), 0.5f);
    e = catch_error(
        [&] { m->root().forward(Tensor::borrow(x.data(), {kB, kT, kC + 1}, {}, DType::F32, Device::cpu()), ctx); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("[2, 16, 33]"), std::string::npos) << e.what();
    std::vector<float> long_x(size_t((kT + 1) * kC), 0.5f);
    e = catch_error(
        [&] { m->root().forward(Tensor::borrow(long_x.data(), {1, kT + 1, kC}, {}, DType::F32, Device::cpu()), ctx); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("block_size 16"), std::string::npos) << e.what();
}

std::string refused(Model& m, int64_t first, int64_t last, ds_status_t want) {
    Error e = catch_error([&] { ds::nn::cut_gpt_to_stage(m, first, last); });
    EXPECT_EQ(e.status(), want) << e.what();
    return e.what();
}

TEST(GptPipeStage, Refusals) {
    auto m = ds::nn::build_model(gpt_spec(true));
    EXPECT_NE(refused(*m, -1, 3, DS_ERR_INVALID_ARGUMENT).find("first = -1, last = 3"), std::string::npos);
    EXPECT_NE(refused(*m, 0, 8, DS_ERR_INVALID_ARGUMENT).find("last = 8) are not a non-empty range within the GPT's 7"),
              std::string::npos);
    EXPECT_NE(refused(*m, 3, 3, DS_ERR_INVALID_ARGUMENT).find("first = 3, last = 3"), std::string::npos);
    EXPECT_NE(refused(*m, 4, 2, DS_ERR_INVALID_ARGUMENT).find("first = 4, last = 2"), std::string::npos);
    EXPECT_EQ(m->pipe_stage().num_layers, 0);  // a refused cut leaves the model whole
    EXPECT_EQ(m->num_params(), ds::nn::gpt_param_count(m->spec().gpt));

    ds::nn::cut_gpt_to_stage(*m, 0, 3);
    EXPECT_NE(refused(*m, 0, 2, DS_ERR_INVALID_ARGUMENT).find("already cut to pipeline layers [0, 3) of 7"),
              std::string::npos);

    auto seq = ds::nn::build_model(R"({"type":"sequential","layers":[{"type":"linear","in_features":4,"out_features":2}]})");
    EXPECT_NE(refused(*seq, 0, 1, DS_ERR_INVALID_ARGUMENT).find("sequential model"), std::string::npos);

    auto held = ds::nn::build_model(gpt_spec(true));
    ASSERT_TRUE(held->try_acquire());  // as an engine does
    EXPECT_NE(refused(*held, 0, 3, DS_ERR_INVALID_STATE).find("an engine is using the model"), std::string::npos);
    held->release();
    ds::nn::cut_gpt_to_stage(*held, 0, 3);
    EXPECT_TRUE(held->try_acquire());  // the cut gave the model back
}

}  // namespace
