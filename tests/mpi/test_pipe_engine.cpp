// The pipeline engine over the built-in GPT (ds_train_batch) under mpirun:
// every pipe x data layout of the world (2 ranks: 2x1; 3: 3x1; 4: 2x2 and
// 4x1) trains 20 batches and equals one process (stage 0 on a world of one,
// gradient_accumulation_steps x data micro-batches per step) within the
// ZeRO tests' tolerance (steps x lr x 1e-4 relative): the same terms, the
// tied embedding's gradient associated differently (the first and last
// stage sum their own micro-batches, then each other's) and, with data
// replicas, the data-parallel average. Gradient clipping is on and active,
// so the norm across stages is exercised; with one replica dropout is on
// too (a stage's micro-batch draws the reference micro-step's masks; with
// replicas the reference's forward indices differ by construction, as in
// test_model_zero; the replicas run ZeRO-1 over the data axis). Then the refusals: ds_forward/ds_step on a
// stage (its checkpoint calls work), a malformed batch on one rank (every rank refuses it, nothing
// changes, the next batch trains), a world the stages do not divide, ZeRO-2.
#include <cmath>
#include <cstdio>
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

constexpr int64_t kMicro = 2, kT = 8, kV = 32;
constexpr int kM = 4;  // micro-batches per batch (gradient_accumulation_steps)
constexpr double kLr = 1e-3;

std::string spec(int stages, double dropout, const char* method = "parameters", int ckpt_interval = 0) {
    std::string s = "{\"type\": \"gpt\", \"vocab_size\": 32, \"block_size\": 8, \"n_layer\": 4, \"n_head\": 2, "
                    "\"n_embd\": 16, \"seed\": 5, \"dropout\": " +
                    std::to_string(dropout);
    if (stages > 0)
        s += ", \"pipeline\": {\"stages\": " + std::to_string(stages) + ", \"partition_method\": \"" + method +
             "\", \"activation_checkpoint_interval\": " + std::to_string(ckpt_interval) + "}";
    return s + "}";
}

std::string config(int gas, int zero_stage = 0, int tp = 0) {
    return "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": " + std::to_string(gas) +
           ", \"gradient_clipping\": 0.05, \"zero_optimization\": {\"stage\": " + std::to_string(zero_stage) +
           "}, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001, \"weight_decay\": 0.01}}" +
           (tp > 1 ? ", \"tensor_parallel\": {\"autotp_size\": " + std::to_string(tp) + "}" : std::string()) + "}";
}

// Micro-batch k of the global stream: ids (i * 5 + k * 3) % V, next-token targets.
void micro_batch(int64_t k, int32_t* ids, int32_t* tg) {
    for (int64_t i = 0; i < kMicro * kT; ++i) {
        ids[i] = static_cast<int32_t>((i * 5 + k * 3) % kV);
        tg[i] = static_cast<int32_t>((i * 5 + k * 3 + 1) % kV);
    }
}

DLTensor ids_tensor(std::vector<int32_t>& v, int64_t* shape) {
    return DLTensor{v.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0};
}

// The reference: one process, stage 0, gas = kM x replicas.
struct Reference {
    std::unique_ptr<ds::Engine> e;
    Reference(int replicas, double dropout) {
        ds::EngineOptions o;
        o.log_level = DS_LOG_WARN;
        e = std::make_unique<ds::Engine>(config(kM * replicas), o, ds::comm::make_local(ds::comm::Options{}));
        e->attach_model(std::shared_ptr<ds::nn::Model>(ds::nn::build_model(spec(0, dropout))));
    }
    float micro_step(int64_t k, bool train, ds::StepResult* r) {
        std::vector<int32_t> ids(kMicro * kT), tg(ids.size());
        micro_batch(k, ids.data(), tg.data());
        int64_t shape[2] = {kMicro, kT};
        DLTensor in[2] = {ids_tensor(ids, shape), ids_tensor(tg, shape)};
        float loss = 0.0f;
        DLTensor out{&loss, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
        e->forward(in, 2, &out);
        if (train) {
            e->backward(nullptr);
            ds::StepResult s = e->step();
            if (s.stepped) *r = s;
        }
        return loss;
    }
};

using Stage = ds_mpi_test::ModelRank;

using ds_mpi_test::checkpoint_round_trip;

// Replica d's batch of step s: micro-batches (s * D + d) * kM + m, m < kM.
void replica_batch(int64_t s, int d, int D, std::vector<int32_t>* ids, std::vector<int32_t>* tg) {
    ids->assign(kM * kMicro * kT, 0);
    tg->assign(ids->size(), 0);
    for (int m = 0; m < kM; ++m)
        micro_batch((s * D + d) * kM + m, ids->data() + m * kMicro * kT, tg->data() + m * kMicro * kT);
}

void train_and_compare(int S, int ckpt_interval = 0, int N = 1) {
    const int W = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    const int D = W / (S * N), r = rank % N;  // pipe x data x model, model fastest
    const double dropout = D == 1 ? 0.1 : 0.0;
    Stage st;
    // ZeRO-1 over the data axis where there are replicas (DeepSpeed's pipeline + ZeRO-1).
    ASSERT_EQ(st.create(spec(S, dropout, "parameters", ckpt_interval), config(kM, D > 1 ? 1 : 0, N)), DS_OK)
        << ds_last_error();
    ds_pipe_info_t info;
    info.struct_size = sizeof info;
    ASSERT_EQ(ds_engine_pipe_info(st.engine, &info), DS_OK) << ds_last_error();
    EXPECT_EQ(info.num_stages, S);
    EXPECT_EQ(info.stage_id, rank / (D * N));
    EXPECT_EQ(info.data_parallel_size, D);
    EXPECT_EQ(info.num_layers, 4 + 3);
    EXPECT_EQ(info.micro_batches, kM);
    EXPECT_LT(info.first_layer, info.last_layer);
    const int d = (rank / N) % D;

    Reference ref(D, dropout);
    const int steps = 20;
    int64_t shape[2] = {kM * kMicro, kT};
    double worst_loss = 0.0, worst_norm = 0.0;
    float first = 0.0f, last = 0.0f;
    for (int s = 0; s < steps; ++s) {
        std::vector<int32_t> ids, tg;
        replica_batch(s, d, D, &ids, &tg);
        DLTensor in = ids_tensor(ids, shape), t = ids_tensor(tg, shape);
        float loss = 0.0f;
        ds_step_info_t si;
        si.struct_size = sizeof si;
        ASSERT_EQ(ds_train_batch(st.engine, &in, &t, &loss, &si), DS_OK) << ds_last_error();
        ASSERT_EQ(si.stepped, 1);
        ds::StepResult rr;
        double ref_loss = 0.0;
        for (int j = 0; j < kM * D; ++j) ref_loss += ref.micro_step(int64_t{s} * D * kM + j, true, &rr);
        ref_loss /= kM * D;
        worst_loss = std::max(worst_loss, std::fabs(loss - ref_loss) / ref_loss);
        worst_norm = std::max(worst_norm, std::fabs(si.grad_norm - rr.grad_norm) / rr.grad_norm);
        ASSERT_NEAR(loss, ref_loss, 1e-5 * ref_loss) << "step " << s;
        ASSERT_NEAR(si.grad_norm, rr.grad_norm, 1e-5 * rr.grad_norm) << "step " << s;
        if (s == 0) {
            first = loss;
            EXPECT_GT(rr.grad_norm, 0.05);  // clipping is active
        }
        last = loss;
    }
    EXPECT_LT(last, first);
    int64_t gs = 0;
    ASSERT_EQ(ds_engine_global_steps(st.engine, &gs), DS_OK);
    EXPECT_EQ(gs, steps);
    ASSERT_EQ(ds_engine_global_samples(st.engine, &gs), DS_OK);
    EXPECT_EQ(gs, int64_t{steps} * kM * kMicro * D);

    // This stage's parameters against the reference's, by name.
    const double tol = steps * kLr * (N > 1 ? 3e-4 : 1e-4);  // tensor parallelism: test_tp_engine.cpp's rule
    double worst = 0.0;
    size_t compared = 0, split = 0;
    for (const ds::Param& p : ref.e->params().all()) {
        DLTensor view;
        if (ds_engine_param_view(st.engine, p.name.c_str(), &view) != DS_OK) continue;  // another stage's
        std::vector<float> b(static_cast<size_t>(p.numel));
        std::vector<int64_t> pshape = p.shape;
        DLTensor tb{b.data(), {kDLCPU, 0}, static_cast<int32_t>(pshape.size()), {kDLFloat, 32, 1}, pshape.data(),
                    nullptr, 0};
        ref.e->get_full(ds::FullTensor::Param, p.name.c_str(), nullptr, &tb);
        const float* a = static_cast<const float*>(view.data);
        int64_t numel = 1;
        for (int i = 0; i < view.ndim; ++i) numel *= view.shape[i];
        if (numel != p.numel) ++split;
        for (int64_t j = 0; j < numel; ++j) {  // a tensor-parallel shard: the matching block
            const float want = b[static_cast<size_t>(
                numel == p.numel ? j : ds_mpi_test::tp_full_index(p.name, pshape, 16, j, r, N))];
            const double dd = std::fabs(double(a[j]) - want) / std::max(1.0, double(std::fabs(want)));
            worst = std::max(worst, dd);
            ASSERT_LE(dd, tol) << p.name << "[" << j << "] " << a[j] << " vs " << want;
        }
        ++compared;
    }
    EXPECT_GT(compared, 0u);
    if (N > 1 && info.first_layer < 5 && info.last_layer > 1) EXPECT_GT(split, 0u);  // it holds transformer layers

    // eval_batch: the InferenceSchedule's mean loss against the reference in eval mode.
    std::vector<int32_t> ids, tg;
    replica_batch(1000, d, D, &ids, &tg);
    DLTensor in = ids_tensor(ids, shape), t = ids_tensor(tg, shape);
    float held = 0.0f;
    ASSERT_EQ(ds_eval_batch(st.engine, &in, &t, &held), DS_OK) << ds_last_error();
    ref.e->set_eval(true);
    double ref_held = 0.0;
    for (int j = 0; j < kM * D; ++j) ref_held += ref.micro_step(int64_t{1000} * D * kM + j, false, nullptr);
    ref_held /= kM * D;
    EXPECT_NEAR(held, ref_held, 1e-5 * ref_held);
    ASSERT_EQ(ds_engine_pipe_info(st.engine, &info), DS_OK);
    EXPECT_GT(info.batch_seconds, 0.0);
    if (rank == 0)
        std::printf("pipeline %d stages x %d replicas x tp %d%s vs one process, 20 batches: loss %.4f -> %.4f, worst loss %.2g, "
                    "grad norm %.2g, weights %.3g (tolerance %.3g), held-out %.6f vs %.6f\n",
                    S, D, N, ckpt_interval > 0 ? " (activation checkpointing)" : "", first, last, worst_loss, worst_norm, worst, tol, held, ref_held);
}

TEST(PipeEngine, EveryLayoutOfTheWorldEqualsOneProcess) {
    const int W = ds_mpi_test::world_size();
    for (int S = 2; S <= W; ++S) {
        if (W % S != 0) continue;
        SCOPED_TRACE("stages " + std::to_string(S));
        train_and_compare(S);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

// PipelineModule's activation_checkpoint_interval: the stages' transformer
// layers keep only their inputs; the numbers do not change.
TEST(PipeEngine, ActivationCheckpointIntervalChangesNoNumber) { train_and_compare(ds_mpi_test::world_size(), 1); }

// Pipeline stages split by tensor parallelism too (4 ranks: 2 stages x tp 2,
// DeepSpeed's PipeModelDataParallelTopology): the norm spans stages and
// shards, the tied embedding is summed per tp rank.
TEST(PipeEngine, StagesSplitByTensorParallelismEqualOneProcess) {
    if (ds_mpi_test::world_size() != 4) GTEST_SKIP() << "2 stages x tp 2 needs 4 ranks";
    train_and_compare(2, 0, 2);
}

// csv_monitor on a pipeline: every stage's engine is rank 0 of its data
// axis, but only world rank 0 writes, one train_loss row per batch holding
// the batch's loss (which the first stage gets from the last).
TEST(PipeEngine, MonitorsAreWrittenOnceWithEachBatchLoss) {
    const int W = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    const std::string dir = "/tmp/ds_pipe_monitor_test_" + std::to_string(W);
    if (rank == 0) EXPECT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
    MPI_Barrier(MPI_COMM_WORLD);
    std::string cfg = config(kM);
    cfg.pop_back();  // the closing brace
    cfg += ", \"csv_monitor\": {\"enabled\": true, \"output_path\": \"" + dir + "\", \"job_name\": \"pipe\"}}";
    std::vector<float> losses;
    {
        Stage st;
        ASSERT_EQ(st.create(spec(W, 0.0), cfg), DS_OK) << ds_last_error();
        int64_t shape[2] = {kM * kMicro, kT};
        for (int s = 0; s < 3; ++s) {
            std::vector<int32_t> ids, tg;
            replica_batch(s, 0, 1, &ids, &tg);
            DLTensor in = ids_tensor(ids, shape), t = ids_tensor(tg, shape);
            float loss = 0.0f;
            ASSERT_EQ(ds_train_batch(st.engine, &in, &t, &loss, nullptr), DS_OK) << ds_last_error();
            losses.push_back(loss);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank != 0) return;
    std::FILE* f = std::fopen((dir + "/pipe/Train_Samples_train_loss.csv").c_str(), "rb");
    ASSERT_NE(f, nullptr) << "no train_loss csv under " << dir;
    char line[256];
    std::vector<double> rows;
    ASSERT_NE(std::fgets(line, sizeof line, f), nullptr);  // the header
    while (std::fgets(line, sizeof line, f)) {
        const char* comma = std::strchr(line, ',');
        ASSERT_NE(comma, nullptr) << line;
        rows.push_back(std::strtod(comma + 1, nullptr));
    }
    std::fclose(f);
    ASSERT_EQ(rows.size(), losses.size());  // once per batch, by one writer
    for (size_t i = 0; i < rows.size(); ++i) EXPECT_NEAR(rows[i], losses[i], 1e-6 * losses[i]) << "batch " << i;
    EXPECT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

TEST(PipeEngine, StagesRefuseTheCallsOfAnEngineWithoutAPipeline) {
    const int W = ds_mpi_test::world_size();
    Stage st;
    ASSERT_EQ(st.create(spec(W, 0.0), config(kM)), DS_OK) << ds_last_error();
    int64_t shape[2] = {kMicro, kT};
    std::vector<int32_t> ids(kMicro * kT, 1);
    DLTensor in = ids_tensor(ids, shape);
    float out = 0.0f;
    DLTensor o{&out, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
    EXPECT_EQ(ds_forward(st.engine, &in, 1, &o), DS_ERR_INVALID_STATE);
    EXPECT_NE(std::string(ds_last_error()).find("ds_train_batch"), std::string::npos) << ds_last_error();
    EXPECT_EQ(ds_backward(st.engine, nullptr), DS_ERR_INVALID_STATE);
    EXPECT_EQ(ds_step(st.engine, nullptr), DS_ERR_INVALID_STATE);
    checkpoint_round_trip(st.engine, "pipe");  // a stage's checkpoint calls work (not refused)
}

TEST(PipeEngine, AMalformedBatchOnOneRankIsRefusedEverywhereAndChangesNothing) {
    const int W = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    Stage st;
    ASSERT_EQ(st.create(spec(W, 0.0), config(kM)), DS_OK) << ds_last_error();
    ds_pipe_info_t info;
    info.struct_size = sizeof info;
    ASSERT_EQ(ds_engine_pipe_info(st.engine, &info), DS_OK);
    // A parameter of this stage, before: the first of these names it holds.
    std::string name;
    for (const char* n : {"wpe.weight", "ln_f.weight", "wte.weight", "h.0.ln_1.weight", "h.1.ln_1.weight",
                          "h.2.ln_1.weight", "h.3.ln_1.weight"}) {
        DLTensor probe;
        if (ds_engine_param_view(st.engine, n, &probe) == DS_OK) {
            name = n;
            break;
        }
    }
    ASSERT_FALSE(name.empty());
    std::vector<float> before;
    auto snapshot = [&](std::vector<float>* v) {
        DLTensor view;
        ASSERT_EQ(ds_engine_param_view(st.engine, name.c_str(), &view), DS_OK) << name << ": " << ds_last_error();
        int64_t numel = 1;
        for (int i = 0; i < view.ndim; ++i) numel *= view.shape[i];
        const float* p = static_cast<const float*>(view.data);
        v->assign(p, p + numel);
    };
    snapshot(&before);
    std::vector<int32_t> ids, tg;
    replica_batch(0, 0, 1, &ids, &tg);
    if (rank == 0) ids[5] = static_cast<int32_t>(kV);  // the first stage's inputs: an id out of range
    int64_t shape[2] = {kM * kMicro, kT};
    DLTensor in = ids_tensor(ids, shape), t = ids_tensor(tg, shape);
    float loss = 0.0f;
    EXPECT_EQ(ds_train_batch(st.engine, &in, &t, &loss, nullptr), DS_ERR_INVALID_ARGUMENT);
    const std::string msg = ds_last_error();
    if (rank == 0) EXPECT_NE(msg.find("inputs[0][5] = 32"), std::string::npos) << msg;
    else EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
    std::vector<float> after;
    snapshot(&after);
    EXPECT_EQ(before, after);
    int64_t gs = -1;
    ASSERT_EQ(ds_engine_global_steps(st.engine, &gs), DS_OK);
    EXPECT_EQ(gs, 0);
    // The engine stays usable: a good batch trains.
    ids[5] = 3;
    ASSERT_EQ(ds_train_batch(st.engine, &in, &t, &loss, nullptr), DS_OK) << ds_last_error();
    EXPECT_TRUE(std::isfinite(loss));
    snapshot(&after);
    EXPECT_NE(before, after);
}

TEST(PipeEngine, BadLayoutsAreRefusedOnEveryRank) {
    const int W = ds_mpi_test::world_size();
    {
        Stage st;  // W + 1 stages never divide W
        EXPECT_EQ(st.create(spec(W + 1, 0.0), config(kM)), DS_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(ds_last_error()).find("does not divide"), std::string::npos) << ds_last_error();
    }
    {
        Stage st;
        EXPECT_EQ(st.create(spec(W, 0.0), config(kM, 2)), DS_ERR_UNSUPPORTED);
        EXPECT_NE(std::string(ds_last_error()).find("zero_optimization.stage"), std::string::npos)
            << ds_last_error();
    }
    {
        Stage st;  // 8 stages for 7 layers: W = 8 only; an unknown method everywhere
        EXPECT_EQ(st.create(spec(W, 0.0, "bogus"), config(kM)), DS_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(ds_last_error()).find("partition_method"), std::string::npos) << ds_last_error();
    }
}

}  // namespace
