// AutoTP training of the built-in GPT under mpirun (`tensor_parallel:
// {"autotp_size": N}`): every data x model layout of the world with N > 1
// (2 ranks: tp 2; 3: tp 3; 4: tp 2 x 2 replicas and tp 4) trains 20 steps
// through the ordinary ds_forward / ds_backward / ds_step and equals one
// process (stage 0 on a world of one, the replicas' micro-batches
// accumulated) within steps x lr x 3e-4 relative: three times the ZeRO
// tests' (test_zero_stages.cpp), because the row-parallel all-reduces
// reorder the sums of every layer's products, forward and backward, not only
// the gradient reduction (measured: 1.7e-6 = steps x lr x 0.9e-4 at tp 2 x 2
// replicas, below 1e-6 otherwise). Each rank's shard
// is compared with the matching block of the reference's weights. Gradient
// clipping is active (the norm across the group, replicated parameters
// counted once); dropout is on with one replica (the masks equal one
// process's). ZeRO-1 on the data axis with replicas. Then the refusals, and
// the checkpoint calls through the C API.
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
#include "tp_shard_index.h"

#include "deepspeed_c.h"

namespace {

constexpr int64_t kB = 2, kT = 8, kV = 32, kC = 48;
constexpr double kLr = 1e-3;

std::string spec(double dropout) {
    return "{\"type\": \"gpt\", \"vocab_size\": 32, \"block_size\": 8, \"n_layer\": 2, \"n_head\": 12, "
           "\"n_embd\": 48, \"seed\": 7, \"dropout\": " +
           std::to_string(dropout) + "}";
}

std::string config(int gas, int tp, int zero_stage) {
    std::string c = "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": " + std::to_string(gas) +
                    ", \"gradient_clipping\": 0.05, \"zero_optimization\": {\"stage\": " +
                    std::to_string(zero_stage) +
                    "}, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001, \"weight_decay\": 0.01}}";
    if (tp > 0) c += ", \"tensor_parallel\": {\"autotp_size\": " + std::to_string(tp) + "}";
    return c + "}";
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

// One micro-step of micro-batch k on a C ABI engine: the loss; *info at a boundary.
float abi_micro_step(ds_engine_t* e, int64_t k, ds_step_info_t* info) {
    std::vector<int32_t> ids(kB * kT), tg(ids.size());
    micro_batch(k, ids.data(), tg.data());
    int64_t shape[2] = {kB, kT};
    DLTensor in[2] = {ids_tensor(ids, shape), ids_tensor(tg, shape)};
    float loss = 0.0f;
    DLTensor out{&loss, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
    EXPECT_EQ(ds_forward(e, in, 2, &out), DS_OK) << ds_last_error();
    EXPECT_EQ(ds_backward(e, nullptr), DS_OK) << ds_last_error();
    info->struct_size = sizeof *info;
    EXPECT_EQ(ds_step(e, info), DS_OK) << ds_last_error();
    return loss;
}

using Shard = ds_mpi_test::ModelRank;

using ds_mpi_test::checkpoint_round_trip;

void train_and_compare(int N) {
    const int W = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    const int D = W / N, d = rank / N, r = rank % N;
    const double dropout = D == 1 ? 0.1 : 0.0;
    const int zero_stage = D > 1 ? 1 : 0;
    Shard sh;
    ASSERT_EQ(sh.create(spec(dropout), config(1, N, zero_stage)), DS_OK) << ds_last_error();
    int32_t ws = 0;
    ASSERT_EQ(ds_engine_world_size(sh.engine, &ws), DS_OK);
    EXPECT_EQ(ws, D);  // the engine runs on the data axis

    ds::EngineOptions o;
    o.log_level = DS_LOG_WARN;
    auto ref = std::make_unique<ds::Engine>(config(D, 0, 0), o, ds::comm::make_local(ds::comm::Options{}));
    ref->attach_model(std::shared_ptr<ds::nn::Model>(ds::nn::build_model(spec(dropout))));

    const int steps = 20;
    float first = 0.0f, last = 0.0f;
    double worst_loss = 0.0, worst_norm = 0.0;
    for (int s = 0; s < steps; ++s) {
        ds_step_info_t info;
        const float loss = abi_micro_step(sh.engine, int64_t{s} * D + d, &info);
        ASSERT_EQ(info.stepped, 1);
        double ref_loss = 0.0;
        ds::StepResult rr;
        for (int j = 0; j < D; ++j) {
            std::vector<int32_t> ids(kB * kT), tg(ids.size());
            micro_batch(int64_t{s} * D + j, ids.data(), tg.data());
            int64_t shape[2] = {kB, kT};
            DLTensor in[2] = {ids_tensor(ids, shape), ids_tensor(tg, shape)};
            float l = 0.0f;
            DLTensor out{&l, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
            ref->forward(in, 2, &out);
            ref->backward(nullptr);
            ds::StepResult x = ref->step();
            if (x.stepped) rr = x;
            if (j == d) ref_loss = l;  // this replica's micro-batch
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

    const double tol = steps * kLr * 3e-4;
    double worst = 0.0;
    size_t split = 0;
    for (const ds::Param& p : ref->params().all()) {
        DLTensor view;
        ASSERT_EQ(ds_engine_param_view(sh.engine, p.name.c_str(), &view), DS_OK) << p.name << ": " << ds_last_error();
        int64_t numel = 1;
        for (int i = 0; i < view.ndim; ++i) numel *= view.shape[i];
        if (numel != p.numel) {
            ++split;
            EXPECT_EQ(numel * N, p.numel) << p.name;
        }
        std::vector<float> b(static_cast<size_t>(p.numel));
        std::vector<int64_t> pshape = p.shape;
        DLTensor tb{b.data(), {kDLCPU, 0}, static_cast<int32_t>(pshape.size()), {kDLFloat, 32, 1}, pshape.data(),
                    nullptr, 0};
        ref->get_full(ds::FullTensor::Param, p.name.c_str(), nullptr, &tb);
        const float* a = static_cast<const float*>(view.data);
        for (int64_t j = 0; j < numel; ++j) {
            const float want = numel == p.numel ? b[static_cast<size_t>(j)]
                                                : b[static_cast<size_t>(ds_mpi_test::tp_full_index(p.name, pshape, kC, j, r, N))];
            const double dd = std::fabs(double(a[j]) - want) / std::max(1.0, double(std::fabs(want)));
            worst = std::max(worst, dd);
            ASSERT_LE(dd, tol) << p.name << "[" << j << "] " << a[j] << " vs " << want;
        }
    }
    EXPECT_EQ(split, size_t{2 * 6});  // per layer: c_attn, attn.c_proj, c_fc weights and biases, mlp.c_proj weight
    if (rank == 0)
        std::printf("AutoTP %d x %d replicas (ZeRO-%d) vs one process, 20 steps: loss %.4f -> %.4f, worst loss %.2g, "
                    "grad norm %.2g, weights %.3g (tolerance %.3g)\n",
                    N, D, zero_stage, first, last, worst_loss, worst_norm, worst, tol);
}

TEST(TpEngine, EveryLayoutOfTheWorldEqualsOneProcess) {
    const int W = ds_mpi_test::world_size();
    for (int N = 2; N <= W; ++N) {
        if (W % N != 0) continue;
        SCOPED_TRACE("autotp_size " + std::to_string(N));
        train_and_compare(N);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(TpEngine, RefusalsNameTheirCause) {
    const int W = ds_mpi_test::world_size();
    {
        Shard sh;  // W + 1 never divides W
        EXPECT_EQ(sh.create(spec(0.0), config(1, W + 1, 0)), DS_ERR_INVALID_CONFIG);
        EXPECT_NE(std::string(ds_last_error()).find("tensor_parallel.autotp_size"), std::string::npos)
            << ds_last_error();
    }
    {
        Shard sh;  // 12 heads: 5 never divides them (the size must divide the world: only W = 5 reaches the split)
        const std::string s = "{\"type\": \"gpt\", \"vocab_size\": 32, \"block_size\": 8, \"n_layer\": 1, "
                              "\"n_head\": 5, \"n_embd\": 40}";
        const ds_status_t st = sh.create(s, config(1, W, 0));
        if (W % 5 != 0) {
            EXPECT_EQ(st, DS_ERR_INVALID_ARGUMENT);
            EXPECT_NE(std::string(ds_last_error()).find("n_head"), std::string::npos) << ds_last_error();
        }
    }
    {
        Shard sh;
        EXPECT_EQ(sh.create(spec(0.0), config(1, W, 3)), DS_ERR_UNSUPPORTED);
        EXPECT_NE(std::string(ds_last_error()).find("ZeRO"), std::string::npos) << ds_last_error();
    }
    {
        Shard sh;
        ASSERT_EQ(sh.create(spec(0.0), config(1, W, 0)), DS_OK) << ds_last_error();
        checkpoint_round_trip(sh.engine, "tp");  // a shard's checkpoint calls work (not refused)
    }
}

}  // namespace
