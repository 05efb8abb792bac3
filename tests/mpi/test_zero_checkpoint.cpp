// Checkpoints across ranks: an engine on 2 ranks (ZeRO stages 1-3) saves;
// ds-to-fp32's consolidation rebuilds every fp32 parameter from both ranks'
// fragments;
// engines on 1 rank and on every rank of the job (2 or 3) load it with any
// stage — the fp32 master weights and the optimizer state match the saver's
// bit for bit — and continue training; the continuation matches a world-of-
// one engine that loaded the same checkpoint and is fed the same global
// batch, within the stage-0 tolerance of test_zero_stages.cpp (fp32:
// 1e-4 x steps x lr).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fstream>
#include <iterator>

#include "ckpt/consolidate.h"
#include "ckpt/safetensors.h"
#include "comm/factory.h"
#include "engine/engine.h"
#include "mpi_gtest_main.h"

namespace {

const std::vector<int64_t> kSizes = {3, 31, 101, 1009, 4099};

float grad_of(float w, int64_t k, size_t i, int64_t j) {
    uint64_t h = static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ull ^ (i * 0xBF58476D1CE4E5B9ull) ^
                 (static_cast<uint64_t>(j) * 0x94D049BB133111EBull);
    h ^= h >> 31;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 29;
    return 0.05f * (w - 0.25f) + 0.02f * (static_cast<float>(h >> 40) / static_cast<float>(1 << 24) - 0.5f);
}

std::string config(int stage) {
    return "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 1,"
           " \"zero_optimization\": {\"stage\": " + std::to_string(stage) +
           ", \"param_persistence_threshold\": 0, \"stage3_gather_16bit_weights_on_model_save\": true},"
           " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001, \"weight_decay\": 0.01}},"
           " \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 5,"
           " \"warmup_type\": \"linear\", \"warmup_max_lr\": 0.001}}}";
}

DLTensor f32(float* d, int64_t* shape) {
    DLTensor t{};
    t.data = d;
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
    return t;
}

std::unique_ptr<ds::Engine> make(int stage, std::shared_ptr<ds::comm::Communicator> comm) {
    ds::EngineOptions o;
    o.log_level = DS_LOG_WARN;
    auto e = std::make_unique<ds::Engine>(config(stage), o, std::move(comm));
    for (size_t i = 0; i < kSizes.size(); ++i) {
        std::vector<float> init(static_cast<size_t>(kSizes[i]));
        for (int64_t j = 0; j < kSizes[i]; ++j) init[static_cast<size_t>(j)] = std::cos(static_cast<float>(j + 3 * i));
        int64_t shape = kSizes[i];
        DLTensor t = f32(init.data(), &shape);
        e->add_param(("p" + std::to_string(i)).c_str(), &t, DS_PARAM_TRAINABLE);
    }
    e->init();
    return e;
}

// One global step: this engine's ranks take micro-batches k*world + rank.
void train_step(ds::Engine& e, int64_t step, int world_of_data) {
    const int world = e.world_size(), rank = e.rank();
    const int per_rank = world_of_data / world;  // micro-batches per rank for the same global batch
    std::vector<std::string> names;
    std::vector<const char*> cn;
    for (size_t i = 0; i < kSizes.size(); ++i) names.push_back("p" + std::to_string(i));
    for (auto& n : names) cn.push_back(n.c_str());
    for (int m = 0; m < per_rank; ++m) {
        const int64_t k = step * world_of_data + static_cast<int64_t>(rank) * per_rank + m;
        e.gather(cn.data(), static_cast<int32_t>(cn.size()));
        std::vector<std::vector<float>> g(kSizes.size());
        for (size_t i = 0; i < kSizes.size(); ++i) {
            DLTensor v{};
            e.param_view(cn[i], &v);
            g[i].resize(static_cast<size_t>(kSizes[i]));
            for (int64_t j = 0; j < kSizes[i]; ++j)
                g[i][static_cast<size_t>(j)] = grad_of(static_cast<const float*>(v.data)[j], k, i, j) / static_cast<float>(per_rank);
        }
        e.release(cn.data(), static_cast<int32_t>(cn.size()));
        for (size_t i = 0; i < kSizes.size(); ++i) {
            int64_t shape = kSizes[i];
            DLTensor t = f32(g[i].data(), &shape);
            e.accumulate_grad(cn[i], &t);
        }
        e.backward(nullptr);
    }
    e.set_gradient_accumulation_boundary(true);
    e.step();
}

std::vector<float> full(ds::Engine& e, ds::FullTensor which, size_t i, const char* key) {
    std::vector<float> out(static_cast<size_t>(kSizes[i]));
    int64_t shape = kSizes[i];
    DLTensor t = f32(out.data(), &shape);
    e.get_full(which, ("p" + std::to_string(i)).c_str(), key, &t);
    return out;
}

// A directory every rank of `comm` agrees on.
std::string shared_dir(ds::comm::Communicator& comm) {
    char path[64] = "/tmp/ds_zero_ckptXXXXXX";
    if (comm.rank() == 0 && !mkdtemp(path)) std::abort();
    comm.broadcast(path, sizeof path, ds::DType::U8, 0);
    return path;
}

TEST(ZeroCheckpoint, SaveOnTwoRanksLoadOnOneAndOnAllAndContinue) {
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    // The saver: ranks 0 and 1 of the job.
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &pair);
    auto world_comm = ds::comm::make_world(ds::comm::Options{});
    const std::string dir = shared_dir(*world_comm);
    for (int stage : {1, 2, 3}) {
        std::vector<std::vector<float>> master, m, v;
        if (rank < 2) {
            auto saver = make(stage, ds::comm::make_from_mpi(MPI_Comm_c2f(pair), ds::comm::Options{}));
            for (int s = 0; s < 6; ++s) train_step(*saver, s, 2);
            saver->save_checkpoint(dir.c_str(), ("stage" + std::to_string(stage)).c_str(), "{\"epoch\": 3}");
            // the 16-bit model file gathers ZeRO-3's partitioned weights (fp32 here)
            saver->save_16bit_model(dir.c_str(), ("weights" + std::to_string(stage) + ".safetensors").c_str());
            for (size_t i = 0; i < kSizes.size(); ++i) {
                master.push_back(full(*saver, ds::FullTensor::Param, i, nullptr));
                m.push_back(full(*saver, ds::FullTensor::OptimizerState, i, "exp_avg"));
                v.push_back(full(*saver, ds::FullTensor::OptimizerState, i, "exp_avg_sq"));
            }
        }
        world_comm->barrier();
        // Rank 0's copy of the saver's state, for every rank to compare with.
        for (size_t i = 0; i < kSizes.size(); ++i) {
            for (auto* vec : {&master, &m, &v}) {
                if (vec->size() <= i) vec->emplace_back(static_cast<size_t>(kSizes[i]));
                world_comm->broadcast((*vec)[i].data(), (*vec)[i].size(), ds::DType::F32, 0);
            }
        }
        const std::string tag = "stage" + std::to_string(stage);
        // ds-to-fp32's consolidation stitches the two ranks' fragments.
        if (rank == 0) {
            const std::string out = dir + "/" + tag + ".fp32.safetensors";
            ds::ckpt::consolidate_fp32(dir, tag, out);
            for (const std::string& file : {out, dir + "/weights" + std::to_string(stage) + ".safetensors"}) {
            std::ifstream f(file, std::ios::binary);
            const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
            const ds::ckpt::StHeader h = ds::ckpt::parse_safetensors(bytes.data(), bytes.size(), file);
            for (size_t i = 0; i < kSizes.size(); ++i) {
                const ds::ckpt::StTensor* t = h.find("p" + std::to_string(i));
                ASSERT_NE(t, nullptr);
                ASSERT_EQ(t->dtype, "F32");
                ASSERT_EQ(t->nbytes(), master[i].size() * 4);
                EXPECT_EQ(std::memcmp(bytes.data() + h.data_start + t->begin, master[i].data(), t->nbytes()), 0)
                    << file << ": p" << i << " (stage " << stage << ")";
            }
            }
        }
        // Load at 1 (every rank on its own) and at the whole job's size, with another stage.
        auto single = make(0, ds::comm::make_local(ds::comm::Options{}));
        single->load_checkpoint(dir.c_str(), tag.c_str(), 0);
        auto all = make(stage == 3 ? 2 : 3, nullptr);
        EXPECT_EQ(all->world_size(), world);
        all->load_checkpoint(dir.c_str(), tag.c_str(), 0);
        for (size_t i = 0; i < kSizes.size(); ++i) {
            for (ds::Engine* e : {single.get(), all.get()}) {
                EXPECT_EQ(full(*e, ds::FullTensor::Param, i, nullptr), master[i]) << "stage " << stage << " p" << i;
                EXPECT_EQ(full(*e, ds::FullTensor::OptimizerState, i, "exp_avg"), m[i]);
                EXPECT_EQ(full(*e, ds::FullTensor::OptimizerState, i, "exp_avg_sq"), v[i]);
            }
        }
        EXPECT_EQ(all->counters().global_steps, 6);
        EXPECT_EQ(all->lr(), single->lr());
        // Continue: the job-wide engine and the single one, same global batch.
        const int global = world * 2;
        for (int s = 6; s < 11; ++s) {
            train_step(*all, s, global);
            // the single engine takes the whole global batch
            for (int k = 0; k < 1; ++k) train_step(*single, s, global);
        }
        double worst = 0;
        for (size_t i = 0; i < kSizes.size(); ++i) {
            std::vector<float> a = full(*all, ds::FullTensor::Param, i, nullptr);
            std::vector<float> b = full(*single, ds::FullTensor::Param, i, nullptr);
            for (size_t j = 0; j < a.size(); ++j) worst = std::max(worst, std::fabs(static_cast<double>(a[j]) - b[j]));
        }
        EXPECT_LE(worst, 5 * 1e-3 * 1e-4) << "stage " << stage;
        if (rank == 0)
            std::printf("saved at 2 ranks (stage %d), loaded at 1 and at %d (stage %d): state identical; after 5 "
                        "more steps max difference %.3g\n",
                        stage, world, stage == 3 ? 2 : 3, worst);
    }
    if (pair != MPI_COMM_NULL) MPI_Comm_free(&pair);
    world_comm->barrier();
    if (rank == 0) {
        const std::string cmd = "rm -rf '" + dir + "'";
        EXPECT_EQ(std::system(cmd.c_str()), 0);
    }
}

}  // namespace
