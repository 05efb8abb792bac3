// Checkpoints of pipeline stages, tensor- and expert-parallel shards under
// mpirun (docs/CHECKPOINTS.md, "Pipeline, tensor- and expert-parallel
// engines"): a sharded run saves the LOGICAL model, which any layout loads.
// For each layout of the world (2 ranks: pipe 2, tp 2, ep 2, plain ZeRO-2;
// 3: pipe 3, tp 3, ep 3, plain ZeRO-2; 4: pipe 2 x data 2, pipe 2 x tp 2,
// tp 2 x data 2 at ZeRO-2, ep 2 x data 2, ep 4; and on 2 ranks bf16 and NVMe
// optimizer state) a GPT (dense, or with MoE layers of 12 experts) trains 3
// steps of one global batch stream and saves; then
//   (1) the move is exact: other layouts (including one process on a world
//       of one and plain data-parallel ZeRO-1/2 engines) load it and save
//       again at once, and every tensor (working, master, each state), the
//       parameter order, counters, schedule, loss scaler and dropout stream
//       of both checkpoints are equal bit for bit;
//   (2) resuming is exact: the same layout loads it and trains 2 more steps
//       with bitwise the losses and the final checkpoint of the
//       uninterrupted run; another layout within the layout-vs-one-process
//       tolerance of test_pipe_engine / test_tp_engine (steps x lr x 1e-4,
//       3e-4 with tensor parallelism), twice (both runs differ from one
//       process by up to that);
//   (3) the checkpoint's model file equals one process trained on the same
//       batches within that tolerance;
//   (4) ds_save_16bit_model writes the same logical weights as the model file,
//       and ds-to-fp32's consolidation the optimizer files' masters;
//   (5) bad input: another logical shape is refused on every rank naming the
//       parameter, strict and non-strict loads of other depths across
//       layouts, a write failing on rank 1 alone fails the save on every rank
//       with nothing committed, and the engines go on.
// Dropout is on where every layout of a case has one data-parallel replica
// (then a micro-batch's dropout masks are one process's: same forward index).
#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/consolidate.h"
#include "ckpt/safetensors.h"
#include "comm/factory.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/expert_parallel_engine.h"
#include "engine/pipeline_engine.h"
#include "engine/tensor_parallel_engine.h"
#include "mpi_gtest_main.h"
#include "nn/model.h"
#include "ckpt_compare.h"

#include "deepspeed_c.h"

namespace {

using ds_mpi_test::CkptTensors;
using ds_mpi_test::read_ckpt;

constexpr int64_t kB = 2, kT = 8, kV = 32;
constexpr double kLr = 1e-3;
constexpr int kSteps = 3, kMore = 2;

// Micro-batches per optimizer step, the same for every layout of a world.
int total_micro(int W) { return W == 3 ? 6 : 4; }

struct Layout {
    std::string name;
    int pipe = 1, tp = 1, ep = 1;
    int zero = 0;
    bool one_process = false;  // each rank alone (only rank 0 runs it)
    bool bf16 = false;
    std::string nvme;          // optimizer state on NVMe under this directory
};

struct Model {
    bool moe = false;
    int n_layer = 4;
    int block_size = 8;
    double dropout = 0.0;
};

std::string spec(const Model& m, const Layout& L) {
    if (m.moe)
        return "{\"type\": \"gpt\", \"vocab_size\": 32, \"block_size\": " + std::to_string(m.block_size) +
               ", \"n_layer\": 2, \"n_head\": 2, \"n_embd\": 16, \"seed\": 11, \"moe\": {\"num_experts\": 12, "
               "\"every\": 1, \"k\": 2, \"capacity_factor\": 1.0, \"min_capacity\": 1, \"use_rts\": false, "
               "\"top2_2nd_expert_sampling\": false, \"ep_size\": " +
               std::to_string(L.ep) + "}" +
               (L.pipe > 1 ? ", \"pipeline\": {\"stages\": " + std::to_string(L.pipe) + "}" : std::string()) + "}";
    std::string s = "{\"type\": \"gpt\", \"vocab_size\": 32, \"block_size\": " + std::to_string(m.block_size) +
                    ", \"n_layer\": " + std::to_string(m.n_layer) +
                    ", \"n_head\": 12, \"n_embd\": 48, \"seed\": 7, \"dropout\": " + std::to_string(m.dropout);
    if (L.pipe > 1) s += ", \"pipeline\": {\"stages\": " + std::to_string(L.pipe) + "}";
    return s + "}";
}

int ranks_of(const Layout& L) { return L.one_process ? 1 : ds_mpi_test::world_size(); }
// Data-parallel replicas: the ranks of a replica (its stages and tp ranks)
// share its micro-batches; expert groups sit inside the replicas (every
// replica of an expert group trains its own micro-batches).
int replicas(const Layout& L) { return ranks_of(L) / (L.pipe * L.tp); }
// Micro-steps per replica and step.
int gas(const Layout& L) { return total_micro(ds_mpi_test::world_size()) / replicas(L); }

std::string config(const Layout& L) {
    std::string zero = "{\"stage\": " + std::to_string(L.zero);
    if (!L.nvme.empty())
        zero += ", \"sub_group_size\": 1024, \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"" +
                L.nvme + "\"}";
    std::string c = "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": " +
                    std::to_string(gas(L)) + ", \"gradient_clipping\": 0.05, \"zero_optimization\": " + zero +
                    "}, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001, \"weight_decay\": 0.01}}, "
                    "\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 4, "
                    "\"warmup_max_lr\": 0.001}}";
    if (L.tp > 1) c += ", \"tensor_parallel\": {\"autotp_size\": " + std::to_string(L.tp) + "}";
    if (L.bf16) c += ", \"bf16\": {\"enabled\": true}";
    return c + "}";
}

void micro_batch(int64_t k, int32_t* ids, int32_t* tg) {
    for (int64_t i = 0; i < kB * kT; ++i) {
        ids[i] = static_cast<int32_t>((i * 5 + k * 3) % kV);
        tg[i] = static_cast<int32_t>((i * 5 + k * 3 + 1) % kV);
    }
}

ds_status_t status_of(const std::function<void()>& f, std::string* msg = nullptr) {
    try {
        f();
        return DS_OK;
    } catch (const ds::Error& e) {
        if (msg) *msg = e.what();
        return e.status();
    }
}

// One rank's engine of a layout (on the world, or alone).
struct LayoutRun {
    Layout L;
    std::shared_ptr<ds::comm::Communicator> comm;
    std::unique_ptr<ds::Engine> e;
    int rank = 0;

    LayoutRun(const Layout& layout, const Model& m) : L(layout) {
        comm = L.one_process ? ds::comm::make_local(ds::comm::Options{}) : ds::comm::make_world(ds::comm::Options{});
        rank = comm->rank();
        auto model = std::shared_ptr<ds::nn::Model>(ds::nn::build_model(spec(m, L)));
        ds::EngineOptions o;
        o.log_level = DS_LOG_WARN;
        const std::string cfg = config(L);
        if (L.pipe > 1) e = ds::pipe::create_stage_engine(cfg, o, comm, model);
        else if (L.ep > 1) e = ds::ep::create_ep_engine(cfg, o, comm, model);
        else if (L.tp > 1) e = ds::tp::create_tp_engine(cfg, o, comm, model, L.tp);
        else {
            e = std::make_unique<ds::Engine>(cfg, o, comm);
            e->attach_model(model);
        }
    }

    // Optimizer step s of the global stream: micro-batches s * total + i,
    // this rank's (its replica's) slot of gas() of them. Returns its mean loss.
    float step(int64_t s) {
        const int g = gas(L);
        const int slot = (rank / L.tp) % replicas(L);  // rank = (stage * D + replica) * tp + tp rank
        const int64_t first = s * total_micro(ds_mpi_test::world_size()) + int64_t{slot} * g;
        std::vector<int32_t> ids(static_cast<size_t>(g * kB * kT)), tg(ids.size());
        for (int m = 0; m < g; ++m) micro_batch(first + m, ids.data() + m * kB * kT, tg.data() + m * kB * kT);
        if (ds::pipe::PipeEngine* p = e->pipeline()) {
            const ds::Shape shape = {g * kB, kT}, strides = {kT, 1};
            ds::Tensor in = ds::Tensor::borrow(ids.data(), shape, strides, ds::DType::I32, ds::Device::cpu());
            ds::Tensor t = ds::Tensor::borrow(tg.data(), shape, strides, ds::DType::I32, ds::Device::cpu());
            return p->train_batch(in, t, nullptr);
        }
        double sum = 0.0;
        int64_t shape[2] = {kB, kT};
        for (int m = 0; m < g; ++m) {
            DLTensor in[2] = {{ids.data() + m * kB * kT, {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0},
                              {tg.data() + m * kB * kT, {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0}};
            float loss = 0.0f;
            DLTensor out{&loss, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
            e->forward(in, 2, &out);
            e->backward(nullptr);
            e->step();
            sum += loss;
        }
        return static_cast<float>(sum / g);
    }
    std::vector<float> train(int64_t from, int64_t to) {
        std::vector<float> losses;
        for (int64_t s = from; s < to; ++s) losses.push_back(step(s));
        return losses;
    }
};

// A directory every rank of the job agrees on (rank 0 creates it).
std::string shared_dir() {
    char path[64] = "/tmp/ds_parallel_ckptXXXXXX";
    if (ds_mpi_test::world_rank() == 0 && !mkdtemp(path)) std::abort();
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    return path;
}
void remove_dir(const std::string& dir) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (ds_mpi_test::world_rank() == 0) EXPECT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

// Runs `f` where the layout runs (every rank, or rank 0 alone), then waits for all.
void on_layout(const Layout& L, const std::function<void()>& f) {
    if (!L.one_process || ds_mpi_test::world_rank() == 0) f();
    MPI_Barrier(MPI_COMM_WORLD);
}

double tolerance(const Layout& a, const Layout& b, int steps) {
    return steps * kLr * (a.tp > 1 || b.tp > 1 ? 3e-4 : 1e-4);
}

const Layout kOne{"one process", 1, 1, 1, 0, true};

struct Case {
    Layout saver;
    std::vector<Layout> loaders;
    Model model;
};

void run_case(const Case& c) {
    const int rank = ds_mpi_test::world_rank();
    const std::string dir = shared_dir();
    const Layout& A = c.saver;
    SCOPED_TRACE("saver " + A.name);
    std::vector<float> tail;  // the uninterrupted run's losses after the save
    // The saver: 3 steps, save, export, 2 more steps, save again.
    {
        LayoutRun a(A, c.model);
        a.train(0, kSteps);
        const auto t0 = std::chrono::steady_clock::now();
        ASSERT_EQ(status_of([&] { a.e->save_checkpoint(dir.c_str(), "a", "{\"epoch\": 1}"); }), DS_OK);
        const double save_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ASSERT_EQ(status_of([&] { a.e->save_16bit_model(dir.c_str(), "a16.safetensors"); }), DS_OK);
        tail = a.train(kSteps, kSteps + kMore);
        ASSERT_EQ(status_of([&] { a.e->save_checkpoint(dir.c_str(), "a_end", nullptr); }), DS_OK);
        if (rank == 0) std::printf("%s: save %.3f s\n", A.name.c_str(), save_s);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // (2) The same layout resumes bitwise.
    {
        LayoutRun r(A, c.model);
        const auto t0 = std::chrono::steady_clock::now();
        ASSERT_EQ(status_of([&] { r.e->load_checkpoint(dir.c_str(), "a", 0); }), DS_OK);
        const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const std::vector<float> again = r.train(kSteps, kSteps + kMore);
        ASSERT_EQ(again.size(), tail.size());
        for (size_t i = 0; i < tail.size(); ++i) EXPECT_EQ(again[i], tail[i]) << "step " << kSteps + i;
        ASSERT_EQ(status_of([&] { r.e->save_checkpoint(dir.c_str(), "a_resumed", nullptr); }), DS_OK);
        if (rank == 0) std::printf("%s: load %.3f s\n", A.name.c_str(), load_s);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CkptTensors saved, saved_end;
    if (rank == 0) ds_mpi_test::guarded([&] {
        saved = read_ckpt(dir, "a");
        saved_end = read_ckpt(dir, "a_end");
        ds_mpi_test::expect_same_checkpoint(saved_end, read_ckpt(dir, "a_resumed"), "same layout resumed");
        // (4) the 16-bit export holds the model file's tensors.
        std::ifstream f(dir + "/a16.safetensors", std::ios::binary);
        const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        const ds::ckpt::StHeader h = ds::ckpt::parse_safetensors(bytes.data(), bytes.size(), "a16");
        EXPECT_EQ(h.tensors.size(), saved.order.size());
        for (const std::string& name : saved.order) {
            const ds::ckpt::StTensor* t = h.find(name);
            ASSERT_NE(t, nullptr) << name;
            const std::vector<uint8_t> got(bytes.begin() + static_cast<int64_t>(h.data_start + t->begin),
                                           bytes.begin() + static_cast<int64_t>(h.data_start + t->end));
            EXPECT_TRUE(got == saved.working.at(name)) << name;
        }
        // ds-to-fp32's consolidation reads it as any checkpoint: every master whole.
        const std::string fp32 = dir + "/a.fp32.safetensors";
        ds::ckpt::consolidate_fp32(dir, "a", fp32);
        std::ifstream g(fp32, std::ios::binary);
        const std::vector<uint8_t> all((std::istreambuf_iterator<char>(g)), std::istreambuf_iterator<char>());
        const ds::ckpt::StHeader hf = ds::ckpt::parse_safetensors(all.data(), all.size(), fp32);
        EXPECT_EQ(hf.tensors.size(), saved.order.size());
        for (const auto& [name, tensors] : saved.optim) {
            const ds::ckpt::StTensor* t = hf.find(name);
            ASSERT_NE(t, nullptr) << name;
            const std::vector<uint8_t> got(all.begin() + static_cast<int64_t>(hf.data_start + t->begin),
                                           all.begin() + static_cast<int64_t>(hf.data_start + t->end));
            EXPECT_TRUE(got == tensors[0]) << name;
        }
    });
    // (3) One process trained on the same batches (bf16: the layouts round
    // differently summed masters to bf16, so only the exact checks apply).
    const bool close_checks = !A.bf16;
    if (close_checks) on_layout(kOne, [&] {
        LayoutRun one(kOne, c.model);
        one.train(0, kSteps);
        ASSERT_EQ(status_of([&] { one.e->save_checkpoint((dir + "/ref").c_str(), "ref", nullptr); }), DS_OK);
        ds_mpi_test::guarded([&] {
            const double worst = ds_mpi_test::max_rel_difference(saved, read_ckpt(dir + "/ref", "ref"));
            const double tol = tolerance(A, kOne, kSteps);
            EXPECT_LE(worst, tol);
            std::printf("%s after %d steps vs one process: %.3g (tolerance %.3g)\n", A.name.c_str(), kSteps, worst,
                        tol);
        });
    });
    // (1) + (2) every loader: the move is exact, training on stays close.
    for (const Layout& B : c.loaders) {
        SCOPED_TRACE("loader " + B.name);
        const std::string bdir = B.one_process ? dir + "/one" : dir;
        const std::string tag = "b_" + std::to_string(&B - c.loaders.data());
        on_layout(B, [&] {
            LayoutRun b(B, c.model);
            std::string msg;
            ASSERT_EQ(status_of([&] { b.e->load_checkpoint(dir.c_str(), "a", 0); }, &msg), DS_OK) << msg;
            ASSERT_EQ(status_of([&] { b.e->save_checkpoint(bdir.c_str(), tag.c_str(), "{\"epoch\": 1}"); }, &msg),
                      DS_OK)
                << msg;
            b.train(kSteps, kSteps + kMore);
            ASSERT_EQ(status_of([&] { b.e->save_checkpoint(bdir.c_str(), (tag + "_end").c_str(), nullptr); }), DS_OK);
        });
        if (rank == 0) ds_mpi_test::guarded([&] {
            // A loader accumulating another number of micro-steps starts its next window whole.
            const int64_t g = gas(B), micro = (saved.m.micro_steps + g - 1) / g * g;
            ds_mpi_test::expect_same_checkpoint(saved, read_ckpt(bdir, tag), A.name + " moved to " + B.name, micro);
            if (!close_checks) {
                std::printf("%s -> %s: moved\n", A.name.c_str(), B.name.c_str());
                return;
            }
            const double worst = ds_mpi_test::max_rel_difference(read_ckpt(bdir, tag + "_end"), saved_end);
            const double tol = 2 * tolerance(A, B, kSteps + kMore);
            EXPECT_LE(worst, tol);
            std::printf("%s -> %s: moved; %d more steps vs the uninterrupted run: %.3g (tolerance %.3g)\n",
                        A.name.c_str(), B.name.c_str(), kMore, worst, tol);
        });
        if (::testing::Test::HasFatalFailure()) break;
    }
    remove_dir(dir);
}

Layout L(const char* name, int pipe, int tp, int ep, int zero) { return Layout{name, pipe, tp, ep, zero, false}; }

TEST(ParallelCheckpoint, DenseLayoutsMoveExactlyAndResume) {
    const int W = ds_mpi_test::world_size();
    const Model drop{false, 4, 8, 0.1}, plain{false, 4, 8, 0.0};
    const Layout one = kOne;
    std::vector<Case> cases;
    if (W == 2) {
        cases.push_back({L("pipe 2", 2, 1, 1, 0), {L("tp 2", 1, 2, 1, 0), one}, drop});
        cases.push_back({L("tp 2", 1, 2, 1, 0), {L("pipe 2", 2, 1, 1, 0), one}, drop});
        cases.push_back({L("data 2 (ZeRO-2)", 1, 1, 1, 2), {L("tp 2", 1, 2, 1, 0), L("pipe 2", 2, 1, 1, 0)}, plain});
    } else if (W == 3) {
        cases.push_back({L("pipe 3", 3, 1, 1, 0), {L("tp 3", 1, 3, 1, 0), one}, drop});
        cases.push_back({L("tp 3", 1, 3, 1, 0), {L("pipe 3", 3, 1, 1, 0)}, drop});
        cases.push_back({L("data 3 (ZeRO-2)", 1, 1, 1, 2), {L("tp 3", 1, 3, 1, 0)}, plain});
    } else if (W == 4) {
        cases.push_back({L("pipe 2 x data 2 (ZeRO-1)", 2, 1, 1, 1),
                         {L("pipe 2 x tp 2", 2, 2, 1, 0), L("data 4 (ZeRO-2)", 1, 1, 1, 2), one}, plain});
        cases.push_back({L("pipe 2 x tp 2", 2, 2, 1, 0), {L("pipe 4", 4, 1, 1, 0), one}, drop});
        cases.push_back({L("tp 2 x data 2 (ZeRO-2)", 1, 2, 1, 2), {L("pipe 2 x data 2 (ZeRO-1)", 2, 1, 1, 1)}, plain});
    }
    for (const Case& c : cases) {
        run_case(c);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(ParallelCheckpoint, ExpertLayoutsMoveExactlyAndResume) {
    const int W = ds_mpi_test::world_size();
    const Model moe{true, 2, 8, 0.0};
    std::vector<Case> cases;
    if (W == 2) {
        cases.push_back({L("ep 2", 1, 1, 2, 0), {kOne, L("data 2 (ZeRO-1)", 1, 1, 1, 1)}, moe});
    } else if (W == 3) {
        cases.push_back({L("ep 3", 1, 1, 3, 0), {kOne}, moe});
    } else if (W == 4) {
        cases.push_back({L("ep 2 x data 2 (ZeRO-1)", 1, 1, 2, 1), {L("ep 4", 1, 1, 4, 0), kOne}, moe});
        cases.push_back({L("ep 4", 1, 1, 4, 0), {L("ep 2 x data 2 (ZeRO-1)", 1, 1, 2, 1)}, moe});
    }
    for (const Case& c : cases) {
        run_case(c);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

// MoE layers in pipeline stages and in tensor-parallel layers, with experts
// split inside the replicas (docs/PIPELINE.md sections 5-7).
TEST(ParallelCheckpoint, CombinedMoeLayoutsMoveExactlyAndResume) {
    const int W = ds_mpi_test::world_size();
    const Model moe{true, 2, 8, 0.0};
    std::vector<Case> cases;
    if (W == 2) {
        cases.push_back({L("pipe 2 (MoE)", 2, 1, 1, 0), {L("tp 2 (MoE)", 1, 2, 1, 0), kOne}, moe});
        cases.push_back({L("tp 2 (MoE)", 1, 2, 1, 0), {L("ep 2", 1, 1, 2, 0), L("pipe 2 (MoE)", 2, 1, 1, 0)}, moe});
    } else if (W == 4) {
        cases.push_back({L("pipe 2 x data 2, ep 2 (ZeRO-1)", 2, 1, 2, 1),
                         {L("tp 2 x data 2, ep 2", 1, 2, 2, 0), L("ep 4", 1, 1, 4, 0), kOne}, moe});
        cases.push_back({L("tp 2 x data 2, ep 2", 1, 2, 2, 0),
                         {L("pipe 2 x data 2, ep 2 (ZeRO-1)", 2, 1, 2, 1), L("pipe 2 x tp 2 (MoE)", 2, 2, 1, 0)}, moe});
    } else {
        GTEST_SKIP() << "2 or 4 ranks";
    }
    for (const Case& c : cases) {
        run_case(c);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

// bf16 working weights (the masters and moments stay fp32) and optimizer
// state on NVMe (saved by streaming it from the swap file, loaded by
// writing it back there) move and resume as exactly.
TEST(ParallelCheckpoint, Bf16AndNvmeLayoutsMoveExactly) {
    const int W = ds_mpi_test::world_size();
    if (W != 2) GTEST_SKIP() << "2 ranks: tp 2 and pipe 2";
    const std::string nvme = "/tmp/ds_parallel_ckpt_nvme_" + std::to_string(W);
    if (ds_mpi_test::world_rank() == 0) EXPECT_EQ(std::system(("mkdir -p " + nvme).c_str()), 0);
    MPI_Barrier(MPI_COMM_WORLD);
    const Model drop{false, 4, 8, 0.1};
    Layout tp = L("tp 2 (bf16)", 1, 2, 1, 0), pipe = L("pipe 2 (bf16)", 2, 1, 1, 0), one = kOne;
    tp.bf16 = pipe.bf16 = one.bf16 = true;
    one.name = "one process (bf16)";
    run_case({tp, {pipe, one}, drop});
    if (::testing::Test::HasFatalFailure()) return;
    Layout tpn = L("tp 2 (NVMe optimizer state)", 1, 2, 1, 0), pipen = L("pipe 2 (NVMe optimizer state)", 2, 1, 1, 0);
    tpn.nvme = pipen.nvme = nvme;
    run_case({tpn, {pipen, kOne}, drop});
    remove_dir(nvme);
}

// The world's first sharded layout: a pipeline of every rank.
Layout pipe_all() {
    const int W = ds_mpi_test::world_size();
    return L("pipe", W, 1, 1, 0);
}
Layout tp_all() {
    const int W = ds_mpi_test::world_size();
    return L("tp", 1, W, 1, 0);
}

TEST(ParallelCheckpoint, AnotherLogicalShapeIsRefusedOnEveryRank) {
    const std::string dir = shared_dir();
    const Model model{false, 4, 8, 0.0}, longer{false, 4, 16, 0.0};
    {
        LayoutRun a(pipe_all(), model);
        a.train(0, 1);
        ASSERT_EQ(status_of([&] { a.e->save_checkpoint(dir.c_str(), "a", nullptr); }), DS_OK);
    }
    LayoutRun b(tp_all(), longer);  // wpe is [16, 48] here, [8, 48] in the checkpoint; every tp rank holds it whole
    std::string msg;
    EXPECT_EQ(status_of([&] { b.e->load_checkpoint(dir.c_str(), "a", 0); }, &msg), DS_ERR_FORMAT);
    EXPECT_NE(msg.find("'wpe.weight' has shape [8, 48], this model's is [16, 48]"), std::string::npos) << msg;
    EXPECT_EQ(b.e->counters().global_steps, 0);  // nothing loaded
    b.train(0, 1);     // the engine goes on
    remove_dir(dir);
}

TEST(ParallelCheckpoint, OtherDepthsLoadNonStrictAcrossLayouts) {
    const std::string dir = shared_dir();
    const int W = ds_mpi_test::world_size();
    const Model four{false, 4, 8, 0.0}, two{false, 2, 8, 0.0}, six{false, 6, 8, 0.0};
    {
        LayoutRun a(pipe_all(), four);
        a.train(0, 2);
        ASSERT_EQ(status_of([&] { a.e->save_checkpoint(dir.c_str(), "a", nullptr); }), DS_OK);
    }
    // Fewer layers on a tensor-parallel layout: h.2 and h.3 are unexpected.
    {
        LayoutRun b(tp_all(), two);
        std::string msg;
        EXPECT_EQ(status_of([&] { b.e->load_checkpoint(dir.c_str(), "a", 0); }, &msg), DS_ERR_FORMAT);
        EXPECT_NE(msg.find("unexpected parameter(s) 'h.2."), std::string::npos) << msg;
        ASSERT_EQ(status_of([&] { b.e->load_checkpoint(dir.c_str(), "a", DS_LOAD_NON_STRICT); }, &msg), DS_OK) << msg;
        EXPECT_EQ(b.e->counters().global_steps, 2);
        ASSERT_EQ(status_of([&] { b.e->save_checkpoint(dir.c_str(), "b", nullptr); }), DS_OK);
    }
    // More layers on a pipeline of another depth: h.4 and h.5 are missing
    // on the ranks holding them, and every rank refuses.
    const Layout pipe2 = L("pipe 2", 2, 1, 1, W == 4 ? 1 : 0);
    if (W % 2 == 0) {
        LayoutRun c(pipe2, six);
        std::string msg;
        EXPECT_EQ(status_of([&] { c.e->load_checkpoint(dir.c_str(), "a", 0); }, &msg), DS_ERR_FORMAT);
        EXPECT_TRUE(msg.find("missing parameter(s) 'h.4.") != std::string::npos ||
                    msg.find("failed on rank") != std::string::npos)
            << msg;
        ASSERT_EQ(status_of([&] { c.e->load_checkpoint(dir.c_str(), "a", DS_LOAD_NON_STRICT); }, &msg), DS_OK) << msg;
        c.train(2, 3);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (ds_mpi_test::world_rank() == 0) ds_mpi_test::guarded([&] {
        const CkptTensors a = read_ckpt(dir, "a"), b = read_ckpt(dir, "b");
        std::vector<std::string> kept;  // the checkpoint's names but h.2.* and h.3.*, in its order
        for (const std::string& name : a.order)
            if (name.rfind("h.2.", 0) != 0 && name.rfind("h.3.", 0) != 0) kept.push_back(name);
        EXPECT_EQ(b.order, kept);
        for (const std::string& name : kept) {
            ASSERT_TRUE(b.working.count(name)) << name;
            EXPECT_TRUE(a.working.at(name) == b.working.at(name)) << name;
            EXPECT_TRUE(a.optim.at(name) == b.optim.at(name)) << name;
        }
    });
    remove_dir(dir);
}

// A write failing on rank 1 alone (its file size limit: EFBIG) fails the
// save on every rank; nothing is committed (`latest` still names the last
// good tag) and the engines train and save on.
TEST(ParallelCheckpoint, AWriteFailureOnOneRankFailsTheSaveEverywhere) {
    const std::string dir = shared_dir();
    const int rank = ds_mpi_test::world_rank();
    for (const Layout& layout : {pipe_all(), tp_all()}) {
        SCOPED_TRACE(layout.name);
        LayoutRun a(layout, Model{false, 4, 8, 0.0});
        a.train(0, 1);
        ASSERT_EQ(status_of([&] { a.e->save_checkpoint(dir.c_str(), "good", nullptr); }), DS_OK);
        a.train(1, 2);
        struct rlimit old;
        ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
        std::signal(SIGXFSZ, SIG_IGN);
        if (rank == 1) {
            struct rlimit small = old;
            small.rlim_cur = 4096;
            ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
        }
        std::string msg;
        const ds_status_t st = status_of([&] { a.e->save_checkpoint(dir.c_str(), "bad", nullptr); }, &msg);
        if (rank == 1) ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
        EXPECT_EQ(st, DS_ERR_IO) << msg;
        if (rank != 1) EXPECT_NE(msg.find("failed on rank 1"), std::string::npos) << msg;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            std::ifstream latest(dir + "/latest");
            std::string tag((std::istreambuf_iterator<char>(latest)), std::istreambuf_iterator<char>());
            EXPECT_EQ(tag, "good");
            EXPECT_NE(std::system(("test -e " + dir + "/bad").c_str()), 0) << "a failed save left " << dir << "/bad";
            EXPECT_NE(std::system(("ls -d " + dir + "/bad.tmp-* >/dev/null 2>&1").c_str()), 0);
        }
        a.train(2, 3);
        ASSERT_EQ(status_of([&] { a.e->save_checkpoint(dir.c_str(), "after", nullptr); }, &msg), DS_OK) << msg;
        ASSERT_EQ(status_of([&] { a.e->load_checkpoint(dir.c_str(), nullptr, 0); }, &msg), DS_OK) << msg;
        EXPECT_EQ(a.e->counters().global_steps, 3);
    }
    remove_dir(dir);
}

}  // namespace
