// Expert parallelism of the built-in GPT's MoE layers (the spec's
// moe.ep_size) under mpirun: every layout of the world with ep_size > 1
// (2 ranks: ep 2; 3: ep 3; 4: ep 2 x 2 replicas at ZeRO-1, and ep 4) trains
// 20 steps, each rank its own micro-batch, and equals one process holding
// every expert (stage 0 on a world of one, accumulating all ranks'
// micro-batches) within the ZeRO tests' tolerance (steps x lr x 1e-4
// relative): losses, the gradient norm (clipping active), and every
// parameter this rank holds, experts by their global names. Top-2 gating
// with a capacity that drops tokens, so routing across ranks matters.
// Dropout is 0, use_rts and top2_2nd_expert_sampling false: a rank's k-th
// forward and the reference's k-th micro-step draw from different forward
// indices (as in test_model_zero), and RTS's priorities (which tokens a full
// expert drops) and top-2's sampled second expert are random draws; the
// experts' dropout masks are drawn over the tokens they receive from every
// rank besides (nn/moe_ep.h). Then the refusals, and the checkpoint calls
// through the C API.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/factory.h"
#include "engine/engine.h"
#include "engine/engine_model.h"
#include "model_rank.h"
#include "mpi_gtest_main.h"
#include "nn/model.h"

#include "deepspeed_c.h"

namespace {

constexpr int64_t kB = 2, kT = 8, kV = 32;
constexpr double kLr = 1e-3;

std::string spec(int ep_size) {
    return "{\"type\": \"gpt\", \"vocab_size\": 32, \"block_size\": 8, \"n_layer\": 2, \"n_head\": 2, "
           "\"n_embd\": 16, \"seed\": 11, \"moe\": {\"num_experts\": 12, \"every\": 1, \"k\": 2, "
           "\"capacity_factor\": 1.0, \"min_capacity\": 1, \"use_rts\": false, \"top2_2nd_expert_sampling\": false, \"ep_size\": " +
           std::to_string(ep_size) + "}}";
}

std::string config(int gas, int zero_stage) {
    return "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": " + std::to_string(gas) +
           ", \"gradient_clipping\": 0.05, \"zero_optimization\": {\"stage\": " + std::to_string(zero_stage) +
           "}, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001, \"weight_decay\": 0.01}}}";
}

void micro_batch(int64_t k, int32_t* ids, int32_t* tg) {
    for (int64_t i = 0; i < kB * kT; ++i) {
        ids[i] = static_cast<int32_t>((i * 5 + k * 3) % kV);
        tg[i] = static_cast<int32_t>((i * 5 + k * 3 + 1) % kV);
    }
}

DLTensor ids_tensor(std::vector<int32_t>& v, int64_t* shape) {
    return DLTensor{v.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0};
}

using Shard = ds_mpi_test::ModelRank;

using ds_mpi_test::checkpoint_round_trip;

void train_and_compare(int P) {
    const int W = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    const int D = W / P;
    const int zero_stage = D > 1 ? 1 : 0;
    Shard sh;
    ASSERT_EQ(sh.create(spec(P), config(1, zero_stage)), DS_OK) << ds_last_error();

    ds::EngineOptions o;
    o.log_level = DS_LOG_WARN;
    auto ref = std::make_unique<ds::Engine>(config(W, 0), o, ds::comm::make_local(ds::comm::Options{}));
    ref->attach_model(std::shared_ptr<ds::nn::Model>(ds::nn::build_model(spec(1))));

    const int steps = 20;
    float first = 0.0f, last = 0.0f;
    double worst_loss = 0.0, worst_norm = 0.0;
    int64_t shape[2] = {kB, kT};
    for (int s = 0; s < steps; ++s) {
        std::vector<int32_t> ids(kB * kT), tg(ids.size());
        micro_batch(int64_t{s} * W + rank, ids.data(), tg.data());
        DLTensor in[2] = {ids_tensor(ids, shape), ids_tensor(tg, shape)};
        float loss = 0.0f;
        DLTensor out{&loss, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
        ASSERT_EQ(ds_forward(sh.engine, in, 2, &out), DS_OK) << ds_last_error();
        ASSERT_EQ(ds_backward(sh.engine, nullptr), DS_OK) << ds_last_error();
        ds_step_info_t info;
        info.struct_size = sizeof info;
        ASSERT_EQ(ds_step(sh.engine, &info), DS_OK) << ds_last_error();
        ASSERT_EQ(info.stepped, 1);
        double ref_loss = 0.0;
        ds::StepResult rr;
        for (int j = 0; j < W; ++j) {
            std::vector<int32_t> rids(kB * kT), rtg(rids.size());
            micro_batch(int64_t{s} * W + j, rids.data(), rtg.data());
            DLTensor rin[2] = {ids_tensor(rids, shape), ids_tensor(rtg, shape)};
            float l = 0.0f;
            DLTensor rout{&l, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
            ref->forward(rin, 2, &rout);
            ref->backward(nullptr);
            ds::StepResult x = ref->step();
            if (x.stepped) rr = x;
            if (j == rank) ref_loss = l;
        }
        worst_loss = std::max(worst_loss, std::fabs(loss - ref_loss) / ref_loss);
        worst_norm = std::max(worst_norm, std::fabs(info.grad_norm - rr.grad_norm) / rr.grad_norm);
        ASSERT_NEAR(loss, ref_loss, 1e-5 * ref_loss) << "step " << s;
        ASSERT_NEAR(info.grad_norm, rr.grad_norm, 1e-5 * rr.grad_norm) << "step " << s;
        if (s == 0) {
            first = loss;
            EXPECT_GT(rr.grad_norm, 0.05);  // clipping is active
        }
        last = loss;
    }
    EXPECT_LT(last, first);
    int64_t samples = 0;
    ASSERT_EQ(ds_engine_global_samples(sh.engine, &samples), DS_OK);
    EXPECT_EQ(samples, int64_t{steps} * kB * W);  // DeepSpeed's count: every rank's micro-batch

    const double tol = steps * kLr * 1e-4;
    double worst = 0.0;
    size_t experts = 0, held = 0;
    for (const ds::Param& p : ref->params().all()) {
        DLTensor view;
        if (ds_engine_param_view(sh.engine, p.name.c_str(), &view) != DS_OK) {
            EXPECT_NE(p.name.find("deepspeed_experts"), std::string::npos) << p.name << " is missing on this rank";
            continue;  // another rank's expert
        }
        ++held;
        if (p.name.find("deepspeed_experts") != std::string::npos) ++experts;
        std::vector<float> b(static_cast<size_t>(p.numel));
        std::vector<int64_t> pshape = p.shape;
        DLTensor tb{b.data(), {kDLCPU, 0}, static_cast<int32_t>(pshape.size()), {kDLFloat, 32, 1}, pshape.data(),
                    nullptr, 0};
        ref->get_full(ds::FullTensor::Param, p.name.c_str(), nullptr, &tb);
        const float* a = static_cast<const float*>(view.data);
        for (size_t j = 0; j < b.size(); ++j) {
            const double dd = std::fabs(double(a[j]) - b[j]) / std::max(1.0, double(std::fabs(b[j])));
            worst = std::max(worst, dd);
            ASSERT_LE(dd, tol) << p.name << "[" << j << "] " << a[j] << " vs " << b[j];
        }
    }
    // 2 MoE layers x 12 / P experts x 4 tensors (c_fc and c_proj weight and bias)
    EXPECT_EQ(experts, static_cast<size_t>(2 * (12 / P) * 4));
    if (rank == 0)
        std::printf("MoE ep %d x %d replicas (ZeRO-%d) vs one process, 20 steps: loss %.4f -> %.4f, worst loss %.2g, "
                    "grad norm %.2g, weights %.3g (tolerance %.3g), %zu tensors held\n",
                    P, D, zero_stage, first, last, worst_loss, worst_norm, worst, tol, held);
}

TEST(MoeEpEngine, EveryLayoutOfTheWorldEqualsOneProcess) {
    const int W = ds_mpi_test::world_size();
    for (int P = 2; P <= W; ++P) {
        if (W % P != 0 || 12 % P != 0) continue;
        SCOPED_TRACE("ep_size " + std::to_string(P));
        train_and_compare(P);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(MoeEpEngine, RefusalsNameTheirCause) {
    const int W = ds_mpi_test::world_size();
    {
        Shard sh;
        EXPECT_EQ(sh.create(spec(W), config(1, 2)), DS_ERR_UNSUPPORTED);
        EXPECT_NE(std::string(ds_last_error()).find("zero_optimization.stage"), std::string::npos) << ds_last_error();
    }
    {
        Shard sh;
        ASSERT_EQ(sh.create(spec(W), config(1, 0)), DS_OK) << ds_last_error();
        checkpoint_round_trip(sh.engine, "ep");  // a shard's checkpoint calls work (not refused)
    }
}

}  // namespace
