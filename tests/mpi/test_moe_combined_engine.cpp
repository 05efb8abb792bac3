// MoE layers together with pipeline and tensor parallelism (docs/PIPELINE.md
// sections 5-7) under mpirun: every layout of the world with MoE and
// pipeline stages or tensor parallelism (2 ranks: pipe 2, tp 2; 3: pipe 3;
// 4: pipe 2 x data 2 with ep 1 and ep 2, tp 2 x data 2 with ep 1 and ep 2,
// pipe 2 x tp 2) trains the GPT (both transformer layers MoE, 4 experts) 20
// steps of gradient_accumulation_steps = 2 and equals one process
// accumulating the same rows (stage 0 on a world of one, gas = 2 x
// replicas): the loss of every step (pipelines: train_batch's, which holds
// every stage's aux_loss_coef * l_aux; otherwise each micro-step's), the
// gradient norm (clipping active: the norm across stages, tp ranks and expert
// ranks) and every parameter this rank holds, experts by their global names
// and tp shards by their block. Tolerance: steps x lr x 1e-4 relative, three
// times that with tensor parallelism (test_tp_engine.cpp's rule: the
// row-parallel all-reduces reorder every layer's sums). Top-1 and top-2
// gating alternate over the layouts, and the reference checks that its
// capacity dropped tokens in each. With one replica the random parts are on
// (dropout, RTS, RSample, top-2's sampled second expert): a stage's or tp
// rank's forwards draw the reference's micro-steps' masks; with replicas
// they are off (the reference's forward indices differ by construction, as
// in test_model_zero). Two layouts checkpoint the stages' layers
// (activation_checkpoint_interval 1). Then the refusals that remain.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/factory.h"
#include "engine/engine.h"
#include "engine/engine_model.h"
#include "model_rank.h"
#include "mpi_gtest_main.h"
#include "nn/model.h"
#include "nn/moe_layer.h"
#include "tp_shard_index.h"

#include "deepspeed_c.h"

namespace {

constexpr int64_t kMicro = 2, kT = 8, kV = 32, kC = 16, kE = 4;
constexpr int kM = 2;  // gradient_accumulation_steps: micro-batches per replica and step
constexpr double kLr = 1e-3;
constexpr int kSteps = 20;

struct Layout {
    const char* name;
    int W;        // the world it lays out
    int S, N, P;  // pipeline stages, tensor-parallel size, expert-parallel size
    int k;        // top-k gating
    int ckpt;     // pipeline.activation_checkpoint_interval
};

struct Options {
    int S = 1, N = 1, P = 1, k = 1, ckpt = 0;
    bool random = false;  // dropout, RTS, RSample (top-1), sampled second expert (top-2)
    bool expert_tp = false;
};

std::string spec(const Options& o, bool reference) {
    std::string s = "{\"type\": \"gpt\", \"vocab_size\": 32, \"block_size\": 8, \"n_layer\": 2, \"n_head\": 2, "
                    "\"n_embd\": 16, \"seed\": 13, \"dropout\": ";
    s += o.random ? "0.1" : "0.0";
    s += ", \"moe\": {\"num_experts\": 4, \"every\": 1, \"k\": " + std::to_string(o.k) +
         ", \"capacity_factor\": 1.0, \"min_capacity\": 1, \"use_rts\": " + (o.random ? "true" : "false") +
         ", \"top2_2nd_expert_sampling\": " + (o.random ? "true" : "false") +
         ", \"noisy_gate_policy\": " + (o.random && o.k == 1 ? "\"RSample\"" : "\"None\"");
    if (!reference) s += ", \"ep_size\": " + std::to_string(o.P);
    if (o.expert_tp) s += ", \"enable_expert_tensor_parallelism\": true";
    s += "}";
    if (!reference && o.S > 1)
        s += ", \"pipeline\": {\"stages\": " + std::to_string(o.S) +
             ", \"activation_checkpoint_interval\": " + std::to_string(o.ckpt) + "}";
    return s + "}";
}

std::string config(int gas, int zero_stage, int tp) {
    return "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": " + std::to_string(gas) +
           ", \"gradient_clipping\": 0.05, \"zero_optimization\": {\"stage\": " + std::to_string(zero_stage) +
           "}, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001, \"weight_decay\": 0.01}}" +
           (tp > 1 ? ", \"tensor_parallel\": {\"autotp_size\": " + std::to_string(tp) + "}" : std::string()) + "}";
}

// Micro-batch j of the global stream.
void micro_batch(int64_t j, int32_t* ids, int32_t* tg) {
    for (int64_t i = 0; i < kMicro * kT; ++i) {
        ids[i] = static_cast<int32_t>((i * 5 + j * 3) % kV);
        tg[i] = static_cast<int32_t>((i * 5 + j * 3 + 1) % kV);
    }
}

DLTensor ids_tensor(std::vector<int32_t>& v, int64_t* shape) {
    return DLTensor{v.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0};
}

// Every MoE layer under `m`, in forward order.
void collect_moe(ds::nn::Module& m, std::vector<ds::nn::MoeLayer*>* out) {
    if (auto* moe = dynamic_cast<ds::nn::MoeLayer*>(&m)) out->push_back(moe);
    for (ds::nn::Module* c : m.children()) collect_moe(*c, out);
}

// One process holding the whole model, accumulating every replica's micro-batches.
struct Reference {
    std::unique_ptr<ds::Engine> e;
    std::vector<ds::nn::MoeLayer*> moe;
    int drops = 0;  // micro-steps where some expert's routes exceeded its capacity
    Reference(const Options& o, int replicas) {
        ds::EngineOptions eo;
        eo.log_level = DS_LOG_WARN;
        e = std::make_unique<ds::Engine>(config(kM * replicas, 0, 0), eo, ds::comm::make_local(ds::comm::Options{}));
        e->attach_model(std::shared_ptr<ds::nn::Model>(ds::nn::build_model(spec(o, true))));
        collect_moe(e->model_binding()->model().root(), &moe);
    }
    float micro_step(int64_t j, bool train, ds::StepResult* r) {
        std::vector<int32_t> ids(kMicro * kT), tg(ids.size());
        micro_batch(j, ids.data(), tg.data());
        int64_t shape[2] = {kMicro, kT};
        DLTensor in[2] = {ids_tensor(ids, shape), ids_tensor(tg, shape)};
        float loss = 0.0f;
        DLTensor out{&loss, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
        e->forward(in, 2, &out);
        for (ds::nn::MoeLayer* l : moe) {
            if (!train) break;
            const std::vector<int64_t>& c = l->exp_counts();
            if (!c.empty() && *std::max_element(c.begin(), c.end()) > l->capacity()) {
                ++drops;
                break;
            }
        }
        if (train) {
            e->backward(nullptr);
            ds::StepResult s = e->step();
            if (s.stepped) *r = s;
        }
        return loss;
    }
};

using Rank = ds_mpi_test::ModelRank;

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

void train_and_compare(const Layout& l) {
    const int W = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    const int D = W / (l.S * l.N);               // data-parallel replicas
    const int d = (rank / l.N) % D;              // pipe x data x model, model fastest
    const int r = rank % l.N;                    // tp rank
    Options o;
    o.S = l.S;
    o.N = l.N;
    o.P = l.P;
    o.k = l.k;
    o.ckpt = l.ckpt;
    o.random = D == 1;
    Rank me;
    ASSERT_EQ(me.create(spec(o, false), config(kM, D > 1 ? 1 : 0, l.N)), DS_OK) << ds_last_error();
    Reference ref(o, D);

    double worst_loss = 0.0, worst_norm = 0.0;
    float first = 0.0f, last = 0.0f;
    for (int s = 0; s < kSteps; ++s) {
        // Replica d's rows of step s: micro-batches (s * D + d) * kM + m; the
        // reference runs them all in that order.
        ds::StepResult rr;
        std::vector<double> ref_loss(static_cast<size_t>(kM * D));
        for (int j = 0; j < kM * D; ++j)
            ref_loss[static_cast<size_t>(j)] = ref.micro_step(int64_t{s} * D * kM + j, true, &rr);
        float loss = 0.0f, want = 0.0f;
        double norm = 0.0, step_loss = 0.0;  // this replica's mean over the step's micro-batches
        if (l.S > 1) {
            std::vector<int32_t> ids(kM * kMicro * kT), tg(ids.size());
            for (int m = 0; m < kM; ++m)
                micro_batch((int64_t{s} * D + d) * kM + m, ids.data() + m * kMicro * kT, tg.data() + m * kMicro * kT);
            int64_t shape[2] = {kM * kMicro, kT};
            DLTensor in = ids_tensor(ids, shape), t = ids_tensor(tg, shape);
            ds_step_info_t si;
            si.struct_size = sizeof si;
            ASSERT_EQ(ds_train_batch(me.engine, &in, &t, &loss, &si), DS_OK) << ds_last_error();
            ASSERT_EQ(si.stepped, 1);
            norm = si.grad_norm;
            step_loss = loss;
            double sum = 0.0;
            for (double v : ref_loss) sum += v;
            want = static_cast<float>(sum / (kM * D));
        } else {
            for (int m = 0; m < kM; ++m) {
                std::vector<int32_t> ids(kMicro * kT), tg(ids.size());
                micro_batch((int64_t{s} * D + d) * kM + m, ids.data(), tg.data());
                int64_t shape[2] = {kMicro, kT};
                DLTensor in[2] = {ids_tensor(ids, shape), ids_tensor(tg, shape)};
                DLTensor out{&loss, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
                ASSERT_EQ(ds_forward(me.engine, in, 2, &out), DS_OK) << ds_last_error();
                ASSERT_EQ(ds_backward(me.engine, nullptr), DS_OK) << ds_last_error();
                ds_step_info_t si;
                si.struct_size = sizeof si;
                ASSERT_EQ(ds_step(me.engine, &si), DS_OK) << ds_last_error();
                ASSERT_EQ(si.stepped, m == kM - 1 ? 1 : 0);
                norm = si.grad_norm;
                step_loss += loss / kM;
                want = static_cast<float>(ref_loss[static_cast<size_t>(d * kM + m)]);
                worst_loss = std::max(worst_loss, std::fabs(double(loss) - want) / want);
                ASSERT_NEAR(loss, want, 1e-5 * want) << "step " << s << " micro-batch " << m;
            }
        }
        worst_loss = std::max(worst_loss, std::fabs(double(loss) - want) / want);
        worst_norm = std::max(worst_norm, std::fabs(norm - rr.grad_norm) / rr.grad_norm);
        ASSERT_NEAR(loss, want, 1e-5 * want) << "step " << s;
        ASSERT_NEAR(norm, rr.grad_norm, 1e-5 * rr.grad_norm) << "step " << s;
        if (s == 0) {
            first = static_cast<float>(step_loss);
            EXPECT_GT(rr.grad_norm, 0.05);  // clipping is active
        }
        last = static_cast<float>(step_loss);
    }
    EXPECT_LT(last, first);
    EXPECT_GT(ref.drops, 0) << "the capacity never dropped a token: the layout does not test dropping";
    int64_t samples = 0;
    ASSERT_EQ(ds_engine_global_samples(me.engine, &samples), DS_OK);
    EXPECT_EQ(samples, int64_t{kSteps} * kM * kMicro * D);  // every replica's rows, once

    // Every parameter this rank holds against the reference's.
    const double tol = kSteps * kLr * (l.N > 1 ? 3e-4 : 1e-4);
    double worst = 0.0;
    size_t gates = 0, experts = 0, split = 0;
    for (const ds::Param& p : ref.e->params().all()) {
        DLTensor view;
        if (ds_engine_param_view(me.engine, p.name.c_str(), &view) != DS_OK) {
            // another stage's, or another expert rank's expert
            EXPECT_TRUE(l.S > 1 || (l.P > 1 && contains(p.name, "deepspeed_experts"))) << p.name << " is missing";
            continue;
        }
        if (contains(p.name, ".gate.wg.")) ++gates;
        if (contains(p.name, "deepspeed_experts")) ++experts;
        std::vector<float> b(static_cast<size_t>(p.numel));
        std::vector<int64_t> pshape = p.shape;
        DLTensor tb{b.data(), {kDLCPU, 0}, static_cast<int32_t>(pshape.size()), {kDLFloat, 32, 1}, pshape.data(),
                    nullptr, 0};
        ref.e->get_full(ds::FullTensor::Param, p.name.c_str(), nullptr, &tb);
        int64_t numel = 1;
        for (int i = 0; i < view.ndim; ++i) numel *= view.shape[i];
        if (numel != p.numel) {
            ++split;
            EXPECT_FALSE(contains(p.name, "deepspeed_moe")) << p.name << ": an MoE layer stays whole on every tp rank";
        }
        const float* a = static_cast<const float*>(view.data);
        for (int64_t j = 0; j < numel; ++j) {
            const int64_t at = numel == p.numel ? j : ds_mpi_test::tp_full_index(p.name, pshape, kC, j, r, l.N);
            const float w = b[static_cast<size_t>(at)];
            const double dd = std::fabs(double(a[j]) - w) / std::max(1.0, double(std::fabs(w)));
            worst = std::max(worst, dd);
            ASSERT_LE(dd, tol) << p.name << "[" << j << "] " << a[j] << " vs " << w;
        }
    }
    if (l.S == 2) EXPECT_EQ(gates, 1u);  // each of the 2 stages holds one MoE layer: the aux loss crosses stages
    EXPECT_EQ(experts, gates * static_cast<size_t>(kE / l.P) * 4);  // c_fc, c_proj weights and biases
    if (l.N > 1) EXPECT_GT(split, 0u);

    double held = 0.0, ref_held = 0.0;
    if (l.S > 1) {  // eval_batch: every stage's aux terms in the held-out loss too
        std::vector<int32_t> ids(kM * kMicro * kT), tg(ids.size());
        for (int m = 0; m < kM; ++m)
            micro_batch((int64_t{1000} * D + d) * kM + m, ids.data() + m * kMicro * kT, tg.data() + m * kMicro * kT);
        int64_t shape[2] = {kM * kMicro, kT};
        DLTensor in = ids_tensor(ids, shape), t = ids_tensor(tg, shape);
        float h = 0.0f;
        ASSERT_EQ(ds_eval_batch(me.engine, &in, &t, &h), DS_OK) << ds_last_error();
        held = h;
        ref.e->set_eval(true);
        for (int j = 0; j < kM * D; ++j) ref_held += ref.micro_step(int64_t{1000} * D * kM + j, false, nullptr);
        ref_held /= kM * D;
        EXPECT_NEAR(held, ref_held, 1e-5 * ref_held);
    }
    const std::string heldout =
        l.S > 1 ? ", held-out " + std::to_string(held) + " vs " + std::to_string(ref_held) : std::string();
    if (rank == 0)
        std::printf("MoE %s (top-%d, %d replica(s)) vs one process, %d steps: loss %.4f -> %.4f, worst loss %.2g, grad "
                    "norm %.2g, weights %.3g (tolerance %.3g); %d of %d reference micro-steps dropped tokens%s\n",
                    l.name, l.k, D, kSteps, first, last, worst_loss, worst_norm, worst, tol, ref.drops,
                    kSteps * kM * D, heldout.c_str());
}

// Activation checkpointing inside the stages in two layouts: the MoE layers'
// forwards (with their all-to-alls when experts are split) rerun in backward.
const Layout kLayouts[] = {
    {"pipe 2 x data 1, ep 1", 2, 2, 1, 1, 2, 0},
    {"tp 2, ep 1", 2, 1, 2, 1, 1, 0},
    {"pipe 3 x data 1, ep 1, activation checkpointing", 3, 3, 1, 1, 2, 1},
    {"pipe 2 x data 2, ep 1", 4, 2, 1, 1, 1, 0},
    {"pipe 2 x data 2, ep 2, activation checkpointing", 4, 2, 1, 2, 2, 1},
    {"tp 2 x data 2, ep 1", 4, 1, 2, 1, 2, 0},
    {"tp 2 x data 2, ep 2", 4, 1, 2, 2, 1, 0},
    {"pipe 2 x tp 2, ep 1", 4, 2, 2, 1, 2, 0},
};

TEST(MoeCombinedEngine, EveryLayoutOfTheWorldEqualsOneProcess) {
    const int W = ds_mpi_test::world_size();
    int ran = 0;
    for (const Layout& l : kLayouts) {
        if (l.W != W) continue;
        SCOPED_TRACE(l.name);
        train_and_compare(l);
        ++ran;
        if (::testing::Test::HasFatalFailure()) return;
    }
    if (ran == 0) GTEST_SKIP() << "no layout of " << W << " ranks";
}

TEST(MoeCombinedEngine, RefusalsNameTheirKey) {
    const int W = ds_mpi_test::world_size();
    if (W % 2 != 0) GTEST_SKIP() << "the refusals use tp 2";
    {
        Rank me;  // experts split by tensor parallelism: DeepSpeed's enable_expert_tensor_parallelism
        Options o;
        o.expert_tp = true;
        EXPECT_EQ(me.create(spec(o, false), config(1, 0, 2)), DS_ERR_UNSUPPORTED);
        EXPECT_TRUE(contains(ds_last_error(), "moe.enable_expert_tensor_parallelism")) << ds_last_error();
    }
    {
        Rank me;  // ep_size must divide each stage's replicas: W stages leave one
        Options o;
        o.S = W;
        o.P = 2;
        EXPECT_EQ(me.create(spec(o, false), config(kM, 0, 0)), DS_ERR_INVALID_ARGUMENT);
        EXPECT_TRUE(contains(ds_last_error(), "moe.ep_size")) << ds_last_error();
    }
    {
        Rank me;  // and each tp rank's replicas: tp W leaves one
        Options o;
        o.P = 2;
        EXPECT_EQ(me.create(spec(o, false), config(1, 0, W)), DS_ERR_INVALID_ARGUMENT);
        EXPECT_TRUE(contains(ds_last_error(), "moe.ep_size")) << ds_last_error();
    }
    {
        Rank me;  // DeepSpeed's D + E group layout
        Options o;
        o.P = 2;
        std::string c = config(1, 0, 0);
        c.pop_back();
        EXPECT_EQ(me.create(spec(o, false), c + ", \"use_data_before_expert_parallelism\": true}"), DS_ERR_UNSUPPORTED);
        EXPECT_TRUE(contains(ds_last_error(), "use_data_before_expert_parallelism")) << ds_last_error();
    }
    if (W == 4) {
        Rank me;  // ZeRO-2 with experts split, with tensor parallelism too
        Options o;
        o.P = 2;
        EXPECT_EQ(me.create(spec(o, false), config(1, 2, 2)), DS_ERR_UNSUPPORTED);
        EXPECT_TRUE(contains(ds_last_error(), "zero_optimization.stage")) << ds_last_error();
    }
}

}  // namespace
