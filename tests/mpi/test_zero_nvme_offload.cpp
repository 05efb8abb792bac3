// ZeRO 1 and 2 with the optimizer state on NVMe (offload_optimizer.device
// "nvme", each rank its own swap directory) under mpirun: bit-identical to
// the same stage with the state in memory, and against stage 0 in ONE
// process fed the same global batch (bitwise where the summation order is
// the same, test_zero_stages.cpp's tolerances otherwise).
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/factory.h"
#include "engine/engine.h"
#include "mpi_gtest_main.h"

namespace {

const std::vector<int64_t> kSizes = {1, 3, 7, 31, 101, 1009, 4099};

// Deterministic "data": the gradient of micro-batch k for parameter i,
// element j, as a function of the current weight (so errors would compound).
float grad_of(float w, int64_t k, size_t i, int64_t j) {
    uint64_t h = static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ull ^ (i * 0xBF58476D1CE4E5B9ull) ^
                 (static_cast<uint64_t>(j) * 0x94D049BB133111EBull);
    h ^= h >> 31;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 29;
    const float noise = static_cast<float>(h >> 40) / static_cast<float>(1 << 24) - 0.5f;
    return 0.05f * (w - 0.25f) + 0.02f * noise;
}

float to_f32(const DLTensor& v, int64_t j) {
    if (v.dtype.bits == 32) return static_cast<const float*>(v.data)[j];
    const uint16_t h = static_cast<const uint16_t*>(v.data)[j];
    uint32_t bits;
    if (v.dtype.code == kDLBfloat) {
        bits = static_cast<uint32_t>(h) << 16;
    } else {  // fp16, normal and zero values only (the weights here are ~N(0,1))
        const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
        bits = exp == 0 ? sign : sign | ((exp + 112u) << 23) | (man << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

std::string config(int stage, const char* dtype, int gas, int world, double clip, bool overlap,
                   int64_t bucket, int64_t persistence = 100000, const std::string& offload = "") {
    std::string prec;
    if (std::string(dtype) == "fp16") prec = ", \"fp16\": {\"enabled\": true, \"initial_scale_power\": 8}";
    if (std::string(dtype) == "bf16") prec = ", \"bf16\": {\"enabled\": true}";
    return "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": " + std::to_string(gas) +
           ", \"gradient_clipping\": " + std::to_string(clip) + prec +
           ", \"zero_optimization\": {\"stage\": " + std::to_string(stage) +
           ", \"overlap_comm\": " + (overlap ? "true" : "false") +
           ", \"reduce_bucket_size\": " + std::to_string(bucket) +
           ", \"param_persistence_threshold\": " + std::to_string(persistence) +
           ", \"sub_group_size\": 1024" + (offload.empty() ? "" : ", \"offload_optimizer\": " + offload) + "}" +
           ", \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001, \"weight_decay\": 0.01}}" +
           ", \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 5, "
           "\"warmup_type\": \"linear\", \"warmup_max_lr\": 0.001}}}";
    (void)world;
}

std::unique_ptr<ds::Engine> make(const std::string& json, std::shared_ptr<ds::comm::Communicator> comm) {
    ds::EngineOptions o;
    o.log_level = DS_LOG_WARN;
    auto e = std::make_unique<ds::Engine>(json, o, std::move(comm));
    std::vector<std::vector<float>> init(kSizes.size());
    for (size_t i = 0; i < kSizes.size(); ++i) {
        init[i].resize(static_cast<size_t>(kSizes[i]));
        for (int64_t j = 0; j < kSizes[i]; ++j)
            init[i][static_cast<size_t>(j)] = std::sin(static_cast<float>(j * 7 + static_cast<int64_t>(i)));
        int64_t shape = kSizes[i];
        DLTensor t{};
        t.data = init[i].data();
        t.device = {kDLCPU, 0};
        t.ndim = 1;
        t.dtype = {kDLFloat, 32, 1};
        t.shape = &shape;
        e->add_param(("p" + std::to_string(i)).c_str(), &t, DS_PARAM_TRAINABLE);
    }
    float frozen[5] = {1, 2, 3, 4, 5};
    int64_t fshape = 5;
    DLTensor ft{};
    ft.data = frozen;
    ft.device = {kDLCPU, 0};
    ft.ndim = 1;
    ft.dtype = {kDLFloat, 32, 1};
    ft.shape = &fshape;
    e->add_param("frozen", &ft, 0);
    e->init();
    return e;
}

// One micro-step on `e` for global micro-batch index k. With `gather`, the
// parameters are gathered around their use (ZeRO-3's GatheredParameters).
void micro_step(ds::Engine& e, int64_t k, bool gather = false) {
    const float scale = static_cast<float>(e.loss_scale());
    std::vector<std::string> names;
    std::vector<const char*> cnames;
    for (size_t i = 0; i < kSizes.size(); ++i) names.push_back("p" + std::to_string(i));
    for (const std::string& n : names) cnames.push_back(n.c_str());
    if (gather) e.gather(cnames.data(), static_cast<int32_t>(cnames.size()));
    std::vector<std::vector<float>> grads(kSizes.size());
    for (size_t i = 0; i < kSizes.size(); ++i) {
        DLTensor v{};
        e.param_view(names[i].c_str(), &v);
        std::vector<float>& g = grads[i];
        g.resize(static_cast<size_t>(kSizes[i]));
        for (int64_t j = 0; j < kSizes[i]; ++j) g[static_cast<size_t>(j)] = scale * grad_of(to_f32(v, j), k, i, j);
    }
    if (gather) e.release(cnames.data(), static_cast<int32_t>(cnames.size()));
    for (size_t i = 0; i < kSizes.size(); ++i) {
        const std::string& name = names[i];
        std::vector<float>& g = grads[i];
        int64_t shape = kSizes[i];
        DLTensor t{};
        t.data = g.data();
        t.device = {kDLCPU, 0};
        t.ndim = 1;
        t.dtype = {kDLFloat, 32, 1};
        t.shape = &shape;
        e.accumulate_grad(name.c_str(), &t);
    }
    e.backward(nullptr);
    e.step();
}

struct TempDir {
    std::string path;
    TempDir() {
        char t[] = "/tmp/ds_nvme_mpi_XXXXXX";
        path = mkdtemp(t);
    }
    ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

std::vector<float> full(ds::Engine& e, ds::FullTensor which, const std::string& name, const char* state, int64_t n) {
    std::vector<float> out(static_cast<size_t>(n));
    int64_t shape = n;
    DLTensor t{};
    t.data = out.data();
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = &shape;
    e.get_full(which, name.c_str(), state, &t);  // collective
    return out;
}

void run_case(int stage, const char* dtype, int gas, double clip, bool bitwise_vs_one) {
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    TempDir dir;
    const std::string nvme = "{\"device\": \"nvme\", \"nvme_path\": \"" + dir.path +
                             "\", \"pipeline_read\": true, \"pipeline_write\": true}";
    auto off = make(config(stage, dtype, gas, world, clip, stage == 2, 700, 100000, nvme), nullptr);
    auto mem = make(config(stage, dtype, gas, world, clip, stage == 2, 700), nullptr);
    auto one = make(config(0, dtype, gas * world, 1, clip, false, 500000000), ds::comm::make_local(ds::comm::Options{}));
    const int steps = 20;
    for (int s = 0; s < steps; ++s) {
        for (int m = 0; m < gas; ++m) {
            micro_step(*off, (static_cast<int64_t>(s) * gas + m) * world + rank);
            micro_step(*mem, (static_cast<int64_t>(s) * gas + m) * world + rank);
        }
        for (int m = 0; m < gas; ++m)
            for (int r = 0; r < world; ++r) micro_step(*one, (static_cast<int64_t>(s) * gas + m) * world + r);
    }
    EXPECT_EQ(off->counters().skipped_steps, one->counters().skipped_steps);
    const double tol = steps * 1e-3 * (std::string(dtype) == "fp32" ? 1e-4 : 2e-2);
    double worst = 0;
    for (size_t i = 0; i < kSizes.size(); ++i) {
        const std::string name = "p" + std::to_string(i);
        for (const char* st : {static_cast<const char*>(nullptr), "exp_avg", "exp_avg_sq"}) {
            const ds::FullTensor which = st ? ds::FullTensor::OptimizerState : ds::FullTensor::Param;
            const std::vector<float> a = full(*off, which, name, st, kSizes[i]);
            const std::vector<float> b = full(*mem, which, name, st, kSizes[i]);
            ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0)
                << "stage " << stage << " " << dtype << " " << name << " " << (st ? st : "master");
            if (st) continue;
            const std::vector<float> c = full(*one, which, name, st, kSizes[i]);
            if (bitwise_vs_one) ASSERT_EQ(std::memcmp(a.data(), c.data(), a.size() * 4), 0) << name;
            for (size_t j = 0; j < a.size(); ++j)
                worst = std::max(worst, std::fabs(static_cast<double>(a[j]) - c[j]) / std::max(1.0, std::fabs(double(c[j]))));
        }
        DLTensor va{}, vb{};
        off->param_view(name.c_str(), &va);
        mem->param_view(name.c_str(), &vb);
        ASSERT_EQ(std::memcmp(va.data, vb.data, static_cast<size_t>(kSizes[i]) * va.dtype.bits / 8), 0) << name << " working";
    }
    EXPECT_LE(worst, tol);
    if (std::string(dtype) == "fp32") {
        // Checkpoints across the partitions: offloaded -> in memory and back.
        char ck[64] = "/tmp/ds_nvme_mpi_ckpt_XXXXXX";
        if (rank == 0 && !mkdtemp(ck)) ck[0] = '\0';
        MPI_Bcast(ck, sizeof ck, MPI_CHAR, 0, MPI_COMM_WORLD);
        ASSERT_NE(ck[0], '\0');
        off->save_checkpoint(ck, "off", nullptr);
        mem->save_checkpoint(ck, "mem", nullptr);
        auto mem2 = make(config(stage, dtype, gas, world, clip, stage == 2, 700), nullptr);
        auto off2 = make(config(stage, dtype, gas, world, clip, stage == 2, 700, 100000, nvme), nullptr);
        mem2->load_checkpoint(ck, "off", 0);
        off2->load_checkpoint(ck, "mem", 0);
        for (size_t i = 0; i < kSizes.size(); ++i) {
            const std::string name = "p" + std::to_string(i);
            for (const char* st : {static_cast<const char*>(nullptr), "exp_avg", "exp_avg_sq"}) {
                const ds::FullTensor which = st ? ds::FullTensor::OptimizerState : ds::FullTensor::Param;
                const std::vector<float> want = full(*mem, which, name, st, kSizes[i]);
                ASSERT_EQ(std::memcmp(full(*mem2, which, name, st, kSizes[i]).data(), want.data(), want.size() * 4), 0)
                    << name << " loaded from the offloaded engine's checkpoint";
                ASSERT_EQ(std::memcmp(full(*off2, which, name, st, kSizes[i]).data(), want.data(), want.size() * 4), 0)
                    << name << " loaded into an offloaded engine";
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) std::system((std::string("rm -rf '") + ck + "'").c_str());
    }
    if (rank == 0)
        std::printf("nvme offload stage %d %s gas %d world %d: identical to in-memory; vs one process %.3g%s\n", stage,
                    dtype, gas, world, worst, bitwise_vs_one ? " (bitwise)" : "");
}

TEST(ZeroNvmeOffloadRanks, AgainstInMemoryAndOneProcess) {
    const bool two = ds_mpi_test::world_size() == 2;
    for (int stage : {1, 2}) {
        run_case(stage, "fp32", 1, 0.0, two);
        run_case(stage, "bf16", 2, 0.5, false);
        run_case(stage, "fp16", 2, 0.5, false);
    }
}

}  // namespace
