// ds_engine_offload_states / reload_states at ZeRO-2 and ZeRO-3 under
// mpirun (each rank moves its own partitions to its own file): 20 steps with
// the states moved to NVMe and back around an "evaluation" every 5 steps
// are bit-identical to 20 steps without (fp32 and bf16); the reduction
// buckets are refused by name; ZeRO-3's empty_partition_cache frees every
// gathered copy and training goes on unchanged.
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "mpi_gtest_main.h"
#include "zero_test_util.h"

namespace {

using namespace ds_zero_test;

std::vector<std::string> names() {
    std::vector<std::string> n;
    for (size_t i = 0; i < kSizes.size(); ++i) n.push_back("p" + std::to_string(i));
    return n;
}

// A checksum of every parameter's working weights (gathered at ZeRO-3).
double evaluate(ds::Engine& e) {
    const std::vector<std::string> n = names();
    std::vector<const char*> c;
    for (const std::string& s : n) c.push_back(s.c_str());
    e.gather(c.data(), static_cast<int32_t>(c.size()));
    double sum = 0;
    for (size_t i = 0; i < kSizes.size(); ++i) {
        DLTensor v{};
        e.param_view(c[i], &v);
        for (int64_t j = 0; j < kSizes[i]; ++j) sum += to_f32(v, j) * static_cast<double>(j % 5 + 1);
    }
    e.release(c.data(), static_cast<int32_t>(c.size()));
    return sum;
}

ds_status_t status_of(const std::function<void()>& f, std::string* msg) {
    try {
        f();
    } catch (const ds::Error& err) {
        *msg = err.what();
        return err.status();
    }
    return DS_OK;
}

void run_case(int stage, const char* dtype) {
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    TempDir dir;
    const std::string json = config(stage, dtype, 1, 0.0, stage == 2, 700, /*persistence=*/0);
    auto plain = make(json, nullptr);
    auto off = make(json, nullptr);
    const bool gather = stage == 3;
    const uint32_t which = DS_OFFLOAD_OPTIM_STATES | DS_OFFLOAD_HP_PARAMS | DS_OFFLOAD_LP_GRADS;
    for (int s = 1; s <= 20; ++s) {
        micro_step(*plain, static_cast<int64_t>(s) * world + rank, gather);
        micro_step(*off, static_cast<int64_t>(s) * world + rank, gather);
        if (s % 5) continue;
        const double want = evaluate(*plain);
        off->offload_states(which, DS_OFFLOAD_DEVICE_NVME, dir.path.c_str());
        EXPECT_GT(off->offloaded_disk_bytes(ds::MemCategory::OptimizerState), 0);
        EXPECT_EQ(evaluate(*off), want) << "step " << s;
        std::string msg;
        EXPECT_EQ(status_of([&] { off->step(); }, &msg), DS_ERR_INVALID_STATE);
        EXPECT_NE(msg.find("ds_engine_reload_states"), std::string::npos) << msg;
        off->reload_states();
    }
    // The reduction buckets do not move (named); 0 = everything that can.
    std::string msg;
    EXPECT_EQ(status_of([&] { off->offload_states(DS_OFFLOAD_CONTIGUOUS_GRAD_BUFFER, DS_OFFLOAD_DEVICE_NVME,
                                                  dir.path.c_str()); },
                        &msg),
              DS_ERR_UNSUPPORTED);
    EXPECT_NE(msg.find("DS_OFFLOAD_CONTIGUOUS_GRAD_BUFFER"), std::string::npos) << msg;
    off->offload_states(0, DS_OFFLOAD_DEVICE_NVME, dir.path.c_str());
    off->reload_states();
    for (size_t i = 0; i < kSizes.size(); ++i) {
        const std::string name = "p" + std::to_string(i);
        for (const char* st : {static_cast<const char*>(nullptr), "exp_avg", "exp_avg_sq"}) {
            const ds::FullTensor which_t = st ? ds::FullTensor::OptimizerState : ds::FullTensor::Param;
            const std::vector<float> a = full(*plain, which_t, name, st, kSizes[i]);
            const std::vector<float> b = full(*off, which_t, name, st, kSizes[i]);
            ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0)
                << "stage " << stage << " " << dtype << " " << name << " " << (st ? st : "master");
        }
    }
    if (rank == 0) std::printf("offload_states stage %d %s world %d: bit-identical over 20 steps\n", stage, dtype, world);
}

TEST(OffloadStatesRanks, AroundEvaluationBitIdenticalZero2And3) {
    for (int stage : {2, 3})
        for (const char* dtype : {"fp32", "bf16"}) run_case(stage, dtype);
}

TEST(OffloadStatesRanks, EmptyPartitionCacheFreesGatheredCopies) {
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    const std::string json = config(3, "bf16", 1, 0.0, false, 700, /*persistence=*/0);
    auto ref = make(json, nullptr);
    auto e = make(json, nullptr);
    micro_step(*ref, rank, true);
    micro_step(*e, rank, true);
    const std::vector<std::string> n = names();
    std::vector<const char*> c;
    for (const std::string& s : n) c.push_back(s.c_str());
    const int64_t before = e->allocator().bytes(ds::MemCategory::Params);
    e->gather(c.data(), static_cast<int32_t>(c.size()));
    e->gather(c.data(), static_cast<int32_t>(c.size()));  // nested: two outstanding
    const int64_t gathered = e->allocator().bytes(ds::MemCategory::Params);
    int64_t whole = 0;
    for (int64_t s : kSizes) whole += 2 * ((s + world - 1) / world) * world;  // bf16, padded to chunk x world
    EXPECT_EQ(gathered - before, whole);
    e->empty_partition_cache();
    EXPECT_EQ(e->allocator().bytes(ds::MemCategory::Params), before);
    std::string msg;
    EXPECT_EQ(status_of([&] { e->release(c.data(), 1); }, &msg), DS_ERR_INVALID_STATE);
    EXPECT_NE(msg.find("without a matching ds_engine_gather"), std::string::npos) << msg;
    DLTensor v{};
    EXPECT_NE(status_of([&] { e->param_view(c[0], &v); }, &msg), DS_OK) << "no whole copy after the cache is emptied";
    for (int s = 1; s < 4; ++s) {
        micro_step(*ref, static_cast<int64_t>(s) * world + rank, true);
        micro_step(*e, static_cast<int64_t>(s) * world + rank, true);
    }
    for (size_t i = 0; i < kSizes.size(); ++i) {
        const std::vector<float> a = full(*ref, ds::FullTensor::Param, n[i], nullptr, kSizes[i]);
        const std::vector<float> b = full(*e, ds::FullTensor::Param, n[i], nullptr, kSizes[i]);
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << n[i];
    }
}

}  // namespace
