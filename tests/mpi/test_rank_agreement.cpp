// Ranks that disagree (issue 8 §2): different configs at create, different
// parameters at init, and different collective calls (save vs step, gather
// vs step, backward vs step, a boundary on one rank only) must end with a
// clear status on every rank — never a crash, a hang or a collective left
// half-posted — and the engine must stay usable: the next matching call
// works and the ranks' weights stay identical.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "comm/factory.h"
#include "engine/engine.h"
#include "engine/rank_agreement.h"
#include "mpi_gtest_main.h"

namespace {

struct Outcome {
    ds_status_t status = DS_OK;
    std::string message;
};

Outcome run(const std::function<void()>& f) {
    Outcome o;
    try {
        f();
    } catch (const ds::Error& e) {
        o.status = e.status();
        o.message = e.what();
    }
    return o;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string config(int stage, int gas = 1, const std::string& extra = "", int64_t bucket = 500000000) {
    return "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": " + std::to_string(gas) +
           extra + ", \"zero_optimization\": {\"stage\": " + std::to_string(stage) +
           ", \"reduce_bucket_size\": " + std::to_string(bucket) + ", \"param_persistence_threshold\": 0}" +
           ", \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}}}";
}

std::unique_ptr<ds::Engine> create(const std::string& json) {
    ds::EngineOptions o;
    o.log_level = DS_LOG_OFF;
    return std::make_unique<ds::Engine>(json, o);
}

DLTensor f32(float* d, int64_t* shape, int ndim) {
    DLTensor t{};
    t.data = d;
    t.device = {kDLCPU, 0};
    t.ndim = ndim;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
    return t;
}

// Two parameters: "w" [rows, cols] and "b" [cols].
void add_params(ds::Engine& e, int64_t rows = 4, int64_t cols = 3) {
    std::vector<float> w(static_cast<size_t>(rows * cols)), b(static_cast<size_t>(cols));
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.1f * static_cast<float>(i) - 0.3f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = 0.05f * static_cast<float>(i);
    int64_t ws[2] = {rows, cols}, bs[1] = {cols};
    DLTensor tw = f32(w.data(), ws, 2), tb = f32(b.data(), bs, 1);
    e.add_param("w", &tw, DS_PARAM_TRAINABLE);
    e.add_param("b", &tb, DS_PARAM_TRAINABLE);
}

std::unique_ptr<ds::Engine> ready(const std::string& json) {
    auto e = create(json);
    add_params(*e);
    e->init();
    return e;
}

// This rank's gradient for a micro-step: rank- and step-dependent.
void accumulate(ds::Engine& e, int step) {
    const int rank = ds_mpi_test::world_rank();
    for (const char* name : {"w", "b"}) {
        const ds::Param& p = e.params().get(name);
        std::vector<float> g(static_cast<size_t>(p.numel));
        for (size_t i = 0; i < g.size(); ++i) g[i] = 0.01f * static_cast<float>((rank + 1) * (step + 2)) + 0.001f * i;
        std::vector<int64_t> shape(p.shape.begin(), p.shape.end());
        DLTensor t = f32(g.data(), shape.data(), static_cast<int>(shape.size()));
        e.accumulate_grad(name, &t);
    }
}

// Every rank's full fp32 weights equal rank 0's (the data-parallel invariant).
void expect_same_weights_everywhere(ds::Engine& e) {
    for (const char* name : {"w", "b"}) {
        const ds::Param& p = e.params().get(name);
        std::vector<float> mine(static_cast<size_t>(p.numel));
        std::vector<int64_t> shape(p.shape.begin(), p.shape.end());
        DLTensor t = f32(mine.data(), shape.data(), static_cast<int>(shape.size()));
        e.get_full(ds::FullTensor::Param, name, nullptr, &t);
        std::vector<float> root = mine;
        MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
        EXPECT_EQ(mine, root) << "parameter " << name << " differs from rank 0's";
    }
}

// A full matching micro-step on every rank must succeed after a refused call.
void expect_matching_step_works(ds::Engine& e, int step) {
    accumulate(e, step);
    e.backward(nullptr);
    ds::StepResult r = e.step();
    EXPECT_TRUE(r.stepped);
    EXPECT_FALSE(r.skipped);
    expect_same_weights_everywhere(e);
}

std::string temp_dir() {
    std::string d = "/tmp/ds_rank_agreement_XXXXXX";
    if (ds_mpi_test::world_rank() == 0 && !mkdtemp(d.data())) d.clear();
    int n = static_cast<int>(d.size());
    MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
    d.resize(static_cast<size_t>(n));
    MPI_Bcast(d.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
    return d;
}

// ---------------------------------------------------------------------------
// Configs at create
// ---------------------------------------------------------------------------

struct ConfigCase {
    const char* name;
    std::string rank0, others;
    const char* key;  // the first differing key the message must name
};

TEST(RankAgreement, DifferentConfigsFailCreateOnEveryRankNamingTheKey) {
    const int rank = ds_mpi_test::world_rank();
    const std::vector<ConfigCase> cases = {
        {"stage", config(1), config(2), "zero_optimization.stage"},
        {"gas", config(1, 1), config(1, 2), "gradient_accumulation_steps"},
        {"dtype", config(1), config(1, 1, ", \"bf16\": {\"enabled\": true}"), "bf16.enabled"},
        {"bucket", config(2, 1, "", 1000), config(2, 1, "", 2000), "zero_optimization.reduce_bucket_size"},
        {"clipping", config(0, 1, ", \"gradient_clipping\": 0.5"), config(0), "gradient_clipping"},
    };
    for (const ConfigCase& c : cases) {
        SCOPED_TRACE(c.name);
        Outcome o = run([&] { create(rank == 0 ? c.rank0 : c.others); });
        EXPECT_EQ(o.status, DS_ERR_INVALID_CONFIG) << o.message;
        EXPECT_TRUE(contains(o.message, c.key)) << o.message;
        EXPECT_TRUE(contains(o.message, "on rank 0") && contains(o.message, "on rank 1")) << o.message;
    }
    // Afterwards the same world creates, initialises and trains a matching engine.
    auto e = ready(config(2));
    expect_matching_step_works(*e, 0);
}

TEST(RankAgreement, ConfigThatFailsOnOneRankFailsCreateOnEveryRank) {
    const int rank = ds_mpi_test::world_rank();
    const std::string bad = "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_acumulation_steps\": 1}";
    Outcome o = run([&] { create(rank == 1 ? bad : config(1)); });
    EXPECT_EQ(o.status, DS_ERR_INVALID_CONFIG) << o.message;
    if (rank == 1)
        EXPECT_TRUE(contains(o.message, "gradient_acumulation_steps")) << o.message;
    else
        EXPECT_TRUE(contains(o.message, "ds_engine_create failed on rank 1")) << o.message;
}

TEST(RankAgreement, BadDeviceOnOneRankFailsCreateOnEveryRank) {
    const int rank = ds_mpi_test::world_rank();
    ds::EngineOptions o;
    o.log_level = DS_LOG_OFF;
    if (rank == 1) o.device_index = 3;  // cpu:3 does not exist
    Outcome out = run([&] { ds::Engine e(config(1), o); });
    EXPECT_EQ(out.status, DS_ERR_INVALID_ARGUMENT) << out.message;
    EXPECT_TRUE(contains(out.message, rank == 1 ? "CPU device id must be 0" : "ds_engine_create failed on rank 1"))
        << out.message;
}

TEST(RankAgreement, LocalOutputPathsMayDiffer) {
    const int rank = ds_mpi_test::world_rank();
    const std::string extra = ", \"tensorboard\": {\"enabled\": false, \"output_path\": \"/tmp/tb_rank" +
                              std::to_string(rank) + "\"}";
    Outcome o = run([&] { create(config(1, 1, extra)); });
    EXPECT_EQ(o.status, DS_OK) << o.message;
}

// ---------------------------------------------------------------------------
// Parameters at init
// ---------------------------------------------------------------------------

TEST(RankAgreement, DifferentParameterShapesFailInitOnEveryRank) {
    const int rank = ds_mpi_test::world_rank();
    auto e = create(config(1));
    if (rank == 1) add_params(*e, 3, 4);  // "w" [3, 4] instead of [4, 3]: same numel, other shape
    else add_params(*e);
    Outcome o = run([&] { e->init(); });
    EXPECT_EQ(o.status, DS_ERR_INVALID_ARGUMENT) << o.message;
    EXPECT_TRUE(contains(o.message, "'w' [4, 3] trainable on rank 0") && contains(o.message, "'w' [3, 4]"))
        << o.message;
    // Still not initialized: calls that need init say so.
    DLTensor view{};
    Outcome v = run([&] { e->param_view("w", &view); });
    EXPECT_EQ(v.status, DS_ERR_INVALID_STATE) << v.message;
    EXPECT_TRUE(contains(v.message, "called before ds_engine_init")) << v.message;
    auto good = ready(config(1));
    expect_matching_step_works(*good, 0);
}

TEST(RankAgreement, DifferentParameterCountFailsInitOnEveryRank) {
    const int rank = ds_mpi_test::world_rank();
    auto e = create(config(0));
    add_params(*e);
    if (rank == 1) {
        float x = 1.0f;
        int64_t s = 1;
        DLTensor t = f32(&x, &s, 1);
        e->add_param("extra", &t, 0);
    }
    Outcome o = run([&] { e->init(); });
    EXPECT_EQ(o.status, DS_ERR_INVALID_ARGUMENT) << o.message;
    EXPECT_TRUE(contains(o.message, "rank 0 registered 2 parameters, rank 1 3")) << o.message;
}

// ---------------------------------------------------------------------------
// Different calls
// ---------------------------------------------------------------------------

class DifferentCalls : public ::testing::TestWithParam<int> {};

TEST_P(DifferentCalls, SaveWhileAnotherStepsIsRefusedEverywhereThenTrainingGoesOn) {
    const int rank = ds_mpi_test::world_rank();
    auto e = ready(config(GetParam()));
    const std::string dir = temp_dir();
    accumulate(*e, 0);
    e->backward(nullptr);
    Outcome o = run([&] {
        if (rank == 0) e->save_checkpoint(dir.c_str(), "t", nullptr);
        else e->step();
    });
    EXPECT_EQ(o.status, DS_ERR_INVALID_STATE) << o.message;
    const std::string me = rank == 0 ? "ds_save_checkpoint" : "ds_step";
    EXPECT_TRUE(contains(o.message, "this rank (" + std::to_string(rank) + ") is in " + me)) << o.message;
    EXPECT_TRUE(contains(o.message, rank == 0 ? "rank 1 is in ds_step" : "rank 0 is in ds_save_checkpoint"))
        << o.message;
    EXPECT_EQ(e->counters().global_steps, 0);
    // Nothing was half-done: the matching step and save work.
    ds::StepResult r = e->step();
    EXPECT_TRUE(r.stepped);
    expect_same_weights_everywhere(*e);
    EXPECT_EQ(run([&] { e->save_checkpoint(dir.c_str(), "t", nullptr); }).status, DS_OK);
    expect_matching_step_works(*e, 1);
    if (rank == 0) std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_P(DifferentCalls, BackwardWhileAnotherStepsIsRefused) {
    const int rank = ds_mpi_test::world_rank();
    auto e = ready(config(GetParam()));
    accumulate(*e, 0);
    if (GetParam() >= 2) {
        // ZeRO 2/3 reduce in backward (collective): rank 0 in backward, the
        // others in step, is refused on every rank.
        Outcome o = run([&] {
            if (rank == 0) e->backward(nullptr);
            else e->step();
        });
        EXPECT_EQ(o.status, DS_ERR_INVALID_STATE) << o.message;
        EXPECT_TRUE(contains(o.message, rank == 0 ? "rank 1 is in ds_step" : "rank 0 is in ds_backward"))
            << o.message;
    } else {
        // Below ZeRO-2 backward is local: rank 1 skips it, and the step
        // that follows fails on every rank (rank 1's own check).
        if (rank != 1) e->backward(nullptr);
        Outcome o = run([&] { e->step(); });
        EXPECT_EQ(o.status, DS_ERR_INVALID_STATE) << o.message;
        EXPECT_TRUE(contains(o.message, rank == 1 ? "without ds_backward" : "ds_step failed on rank 1"))
            << o.message;
    }
    // Nothing was done: every rank ends the micro-step and steps.
    if (GetParam() >= 2 || rank == 1) e->backward(nullptr);
    ds::StepResult r = e->step();
    EXPECT_TRUE(r.stepped);
    EXPECT_EQ(e->counters().global_steps, 1);
    expect_same_weights_everywhere(*e);
}

TEST_P(DifferentCalls, ACheckFailingOnOneRankFailsTheCallEverywhere) {
    const int rank = ds_mpi_test::world_rank();
    auto e = ready(config(GetParam()));
    const std::string dir = temp_dir();
    // Rank 1 passes an empty save_dir: its own check fails; the others must
    // not go on into the save's collectives (they would wait for rank 1).
    Outcome o = run([&] { e->save_checkpoint(rank == 1 ? "" : dir.c_str(), "t", nullptr); });
    EXPECT_EQ(o.status, DS_ERR_INVALID_ARGUMENT) << o.message;
    if (rank == 1) EXPECT_TRUE(contains(o.message, "save_dir")) << o.message;
    else EXPECT_TRUE(contains(o.message, "ds_save_checkpoint failed on rank 1")) << o.message;
    expect_matching_step_works(*e, 0);
    EXPECT_EQ(run([&] { e->save_checkpoint(dir.c_str(), "t", nullptr); }).status, DS_OK);
    if (rank == 0) std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_P(DifferentCalls, BoundaryOnOneRankOnlyIsRefused) {
    const int rank = ds_mpi_test::world_rank();
    auto e = ready(config(GetParam(), 2));
    accumulate(*e, 0);
    e->backward(nullptr);
    if (rank == 0) e->set_gradient_accumulation_boundary(true);
    Outcome o = run([&] { e->step(); });
    EXPECT_EQ(o.status, DS_ERR_INVALID_ARGUMENT) << o.message;
    EXPECT_TRUE(contains(o.message, "boundary=1") && contains(o.message, "boundary=0")) << o.message;
    if (rank == 0) e->set_gradient_accumulation_boundary(false);
    EXPECT_FALSE(e->step().stepped);  // micro-step 1 of 2 everywhere
    e->set_gradient_accumulation_boundary(true);
    accumulate(*e, 1);
    e->backward(nullptr);
    EXPECT_TRUE(e->step().stepped);
    expect_same_weights_everywhere(*e);
}

TEST_P(DifferentCalls, LoadWithDifferentTagsIsRefused) {
    const int rank = ds_mpi_test::world_rank();
    auto e = ready(config(GetParam()));
    const std::string dir = temp_dir();
    expect_matching_step_works(*e, 0);
    e->save_checkpoint(dir.c_str(), "a", nullptr);
    e->save_checkpoint(dir.c_str(), "b", nullptr);
    Outcome o = run([&] { e->load_checkpoint(dir.c_str(), rank == 0 ? "a" : "b", 0); });
    EXPECT_EQ(o.status, DS_ERR_INVALID_ARGUMENT) << o.message;
    EXPECT_TRUE(contains(o.message, "ds_load_checkpoint: rank 1 passed different arguments")) << o.message;
    EXPECT_EQ(run([&] { e->load_checkpoint(dir.c_str(), "a", 0); }).status, DS_OK);
    expect_matching_step_works(*e, 1);
    if (rank == 0) std::system(("rm -rf '" + dir + "'").c_str());
}

INSTANTIATE_TEST_SUITE_P(Stages, DifferentCalls, ::testing::Values(0, 1, 2, 3));

TEST(RankAgreement, GatherWhileAnotherStepsIsRefusedAtStage3) {
    const int rank = ds_mpi_test::world_rank();
    auto e = ready(config(3));
    accumulate(*e, 0);
    e->backward(nullptr);
    const char* names[] = {"w", "b"};
    Outcome o = run([&] {
        if (rank == 0) e->gather(names, 2);
        else e->step();
    });
    EXPECT_EQ(o.status, DS_ERR_INVALID_STATE) << o.message;
    EXPECT_TRUE(contains(o.message, rank == 0 ? "rank 1 is in ds_step" : "rank 0 is in ds_engine_gather"))
        << o.message;
    // Different names: refused with the counts.
    o = run([&] { e->gather(names, rank == 0 ? 2 : 1); });
    EXPECT_EQ(o.status, DS_ERR_INVALID_ARGUMENT) << o.message;
    EXPECT_TRUE(contains(o.message, "rank 0: n=2, rank 1: n=1")) << o.message;
    // Same count, different names.
    const char* other[] = {"b", "w"};
    o = run([&] { e->gather(rank == 0 ? names : other, 2); });
    EXPECT_EQ(o.status, DS_ERR_INVALID_ARGUMENT) << o.message;
    // Matching calls work.
    EXPECT_EQ(run([&] { e->gather(names, 2); }).status, DS_OK);
    DLTensor v{};
    EXPECT_EQ(run([&] { e->param_view("w", &v); }).status, DS_OK);
    e->release(names, 2);
    EXPECT_TRUE(e->step().stepped);
    expect_same_weights_everywhere(*e);
}

// The agreement's cost per call (printed; DESIGN.md §6 "Ranks that disagree" quotes it). What is
// asserted is structural, not a time (timings are not test assertions: three ranks on two busy
// cores made a time bound flaky): each agreed call is exactly one collective, counted by the
// comms logger, so a config or parameter exchange added to every call fails the test.
TEST(RankAgreement, PerCallCostIsOneTinyExchange) {
    auto comm = ds::comm::make_world(ds::comm::options_from_env());
    auto once = [&] {
        ds::agree::enter(*comm, ds::agree::Call::Step, [] {
            ds::agree::CallArgs a;
            a.detail = 1;
            return a;
        });
    };
    for (int i = 0; i < 50; ++i) once();  // warm up
    auto counter = std::make_shared<ds::comm::CommsLogger>(ds::comm::CommsLoggerOptions{}, ds::Logger(),
                                                           ds_mpi_test::world_rank(), ds_mpi_test::world_size());
    comm->set_comms_logger(counter);
    const int n = 2000;
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) once();
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
    if (ds_mpi_test::world_rank() == 0)
        std::printf("agreement: %.1f us per call (%d ranks, %d calls)\n", us, ds_mpi_test::world_size(), n);
    comm->set_comms_logger(nullptr);
    EXPECT_EQ(counter->total_ops(), n) << "an agreed call is no longer one collective";
    comm->finalize();
}

}  // namespace

namespace {

// Not run by default (400 MB of parameters per rank): the figure DESIGN.md
// §6.4 compares the agreement with. Run with
//   mpirun -np 2 mpi_test_rank_agreement --gtest_also_run_disabled_tests \
//          --gtest_filter='*StepCost*'
TEST(RankAgreement, DISABLED_StepCostAt100MParameters) {
    const int64_t n = 100000000;
    auto e = create(config(1));
    std::vector<float> w(static_cast<size_t>(n), 0.5f);
    int64_t shape = n;
    DLTensor t = f32(w.data(), &shape, 1);
    e->add_param("big", &t, DS_PARAM_TRAINABLE);
    e->init();
    std::vector<float> g(static_cast<size_t>(n), 1e-3f);
    DLTensor gt = f32(g.data(), &shape, 1);
    std::vector<double> ms;
    for (int s = 0; s < 4; ++s) {
        e->accumulate_grad("big", &gt);
        MPI_Barrier(MPI_COMM_WORLD);
        const auto t0 = std::chrono::steady_clock::now();
        e->backward(nullptr);
        e->step();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin() + 1, ms.end());
    if (ds_mpi_test::world_rank() == 0)
        std::printf("100M-parameter ds_backward + ds_step (ZeRO-1, fp32, AdamW, %d ranks): median %.1f ms\n",
                    ds_mpi_test::world_size(), ms[2]);
}

}  // namespace
