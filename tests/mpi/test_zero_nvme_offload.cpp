// ZeRO 1, 2 and 3 with the optimizer state on NVMe (offload_optimizer.device
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
#include "zero_test_util.h"

namespace {

using namespace ds_zero_test;

void run_case(int stage, const char* dtype, int gas, double clip, bool bitwise_vs_one, int64_t persistence = 100000) {
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    const bool gather = persistence == 0;  // ZeRO-3: parameters gathered around each use
    TempDir dir;
    const std::string nvme = "{\"device\": \"nvme\", \"nvme_path\": \"" + dir.path +
                             "\", \"pipeline_read\": true, \"pipeline_write\": true}";
    auto off = make(config(stage, dtype, gas, clip, stage == 2, 700, persistence, nvme, 1024), nullptr);
    auto mem = make(config(stage, dtype, gas, clip, stage == 2, 700, persistence, "", 1024), nullptr);
    auto one = make(config(0, dtype, gas * world, clip, false, 500000000, 100000, "", 1024), ds::comm::make_local(ds::comm::Options{}));
    const int steps = 20;
    for (int s = 0; s < steps; ++s) {
        for (int m = 0; m < gas; ++m) {
            micro_step(*off, (static_cast<int64_t>(s) * gas + m) * world + rank, gather);
            micro_step(*mem, (static_cast<int64_t>(s) * gas + m) * world + rank, gather);
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
        const char* nm = name.c_str();
        if (gather) {
            off->gather(&nm, 1);
            mem->gather(&nm, 1);
        }
        off->param_view(nm, &va);
        mem->param_view(nm, &vb);
        ASSERT_EQ(std::memcmp(va.data, vb.data, static_cast<size_t>(kSizes[i]) * va.dtype.bits / 8), 0) << name << " working";
        if (gather) {
            off->release(&nm, 1);
            mem->release(&nm, 1);
        }
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
        auto mem2 = make(config(stage, dtype, gas, clip, stage == 2, 700, persistence, "", 1024), nullptr);
        auto off2 = make(config(stage, dtype, gas, clip, stage == 2, 700, persistence, nvme, 1024), nullptr);
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
    if (stage == 3 && std::string(dtype) == "fp32") {
        // set_full_fp32_param writes this rank's master chunks into the swap
        // file and the working chunks in memory: the next gather and step
        // see it, as in memory.
        for (size_t i = 0; i < kSizes.size(); ++i) {
            std::vector<float> v(static_cast<size_t>(kSizes[i]));
            for (size_t j = 0; j < v.size(); ++j) v[j] = 0.5f * std::cos(static_cast<float>(j + 3 * i));
            int64_t shape = kSizes[i];
            DLTensor t{};
            t.data = v.data();
            t.device = {kDLCPU, 0};
            t.ndim = 1;
            t.dtype = {kDLFloat, 32, 1};
            t.shape = &shape;
            const std::string name = "p" + std::to_string(i);
            off->set_full(ds::FullTensor::Param, name.c_str(), nullptr, &t);
            mem->set_full(ds::FullTensor::Param, name.c_str(), nullptr, &t);
        }
        for (size_t i = 0; i < kSizes.size(); ++i) {  // the whole weights gathered from the chunks
            const std::string name = "p" + std::to_string(i);
            const char* nm = name.c_str();
            off->gather(&nm, 1);
            mem->gather(&nm, 1);
            DLTensor va{}, vb{};
            off->param_view(nm, &va);
            mem->param_view(nm, &vb);
            ASSERT_EQ(std::memcmp(va.data, vb.data, static_cast<size_t>(kSizes[i]) * 4), 0) << name << " after set_full";
            off->release(&nm, 1);
            mem->release(&nm, 1);
        }
        micro_step(*off, 1000 + rank, true);
        micro_step(*mem, 1000 + rank, true);
        for (size_t i = 0; i < kSizes.size(); ++i) {
            const std::string name = "p" + std::to_string(i);
            const std::vector<float> a = full(*off, ds::FullTensor::Param, name, nullptr, kSizes[i]);
            const std::vector<float> b = full(*mem, ds::FullTensor::Param, name, nullptr, kSizes[i]);
            ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << name << " after set_full and a step";
        }
    }
    if (rank == 0)
        std::printf("nvme offload stage %d %s gas %d world %d%s: identical to in-memory; vs one process %.3g%s\n", stage,
                    dtype, gas, world, gather ? " (gathered)" : "", worst, bitwise_vs_one ? " (bitwise)" : "");
}

TEST(ZeroNvmeOffloadRanks, AgainstInMemoryAndOneProcess) {
    const bool two = ds_mpi_test::world_size() == 2;
    for (int stage : {1, 2, 3}) {
        run_case(stage, "fp32", 1, 0.0, two);
        run_case(stage, "bf16", 2, 0.5, false);
        run_case(stage, "fp16", 2, 0.5, false);
    }
}

// ZeRO-3 with every parameter partitioned (gathered around each use).
TEST(ZeroNvmeOffloadRanks, Zero3GatheredParameters) {
    const bool two = ds_mpi_test::world_size() == 2;
    run_case(3, "fp32", 1, 0.0, two, /*persistence=*/0);
    run_case(3, "bf16", 2, 0.5, false, /*persistence=*/0);
}

}  // namespace
