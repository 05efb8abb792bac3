// Parameters on NVMe (offload_param.device "nvme", max_in_cpu 0: every
// working chunk swapped out between uses) at ZeRO-3 under mpirun, each rank
// its own swap file: 20 steps bit-identical to in-memory ZeRO-3 (fp32 and
// bf16; parameters gathered around each use, or persistent; with the
// optimizer state on NVMe too), and the bytes of working weights in memory
// are the ones in use.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mpi_gtest_main.h"
#include "zero_test_util.h"

namespace {

using namespace ds_zero_test;

// `json` with an offload_param section added to zero_optimization.
std::string with_param_nvme(std::string json, const std::string& path) {
    const std::string key = "\"zero_optimization\": {";
    const size_t at = json.find(key);
    json.insert(at + key.size(), "\"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"" + path +
                                     "\", \"max_in_cpu\": 0, \"buffer_count\": 2}, ");
    return json;
}

void run_case(const char* dtype, int64_t persistence, bool optimizer_nvme) {
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    TempDir dir;
    const bool gather = persistence == 0;
    const std::string opt =
        optimizer_nvme ? "{\"device\": \"nvme\", \"nvme_path\": \"" + dir.path + "\"}" : std::string();
    const std::string json = config(3, dtype, 1, 0.5, false, 700, persistence, opt, optimizer_nvme ? 1024 : 0);
    auto swapped = make(with_param_nvme(json, dir.path), nullptr);
    auto memory = make(json, nullptr);
    for (int s = 0; s < 20; ++s) {
        micro_step(*swapped, static_cast<int64_t>(s) * world + rank, gather);
        micro_step(*memory, static_cast<int64_t>(s) * world + rank, gather);
    }
    for (size_t i = 0; i < kSizes.size(); ++i) {
        const std::string name = "p" + std::to_string(i);
        for (const char* st : {static_cast<const char*>(nullptr), "exp_avg", "exp_avg_sq"}) {
            const ds::FullTensor which = st ? ds::FullTensor::OptimizerState : ds::FullTensor::Param;
            const std::vector<float> a = full(*swapped, which, name, st, kSizes[i]);
            const std::vector<float> b = full(*memory, which, name, st, kSizes[i]);
            ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0)
                << dtype << " persistence " << persistence << " " << name << " " << (st ? st : "master");
        }
        const char* nm = name.c_str();
        swapped->gather(&nm, 1);
        memory->gather(&nm, 1);
        DLTensor va{}, vb{};
        swapped->param_view(nm, &va);
        memory->param_view(nm, &vb);
        ASSERT_EQ(std::memcmp(va.data, vb.data, static_cast<size_t>(kSizes[i]) * va.dtype.bits / 8), 0) << name;
        swapped->release(&nm, 1);
        memory->release(&nm, 1);
    }
    // What left memory was written first (these partitions are a few pages:
    // the unit test OffloadParam.ResidentBytesAreThePagesInUse checks the bound).
    int64_t params_disk = 0, state_disk = 0;
    swapped->disk_bytes(&params_disk, &state_disk);
    const int64_t released = swapped->offloaded_released_bytes(ds::MemCategory::Params);
    EXPECT_LE(released, params_disk);
    if (rank == 0)
        std::printf("offload_param nvme %s persistence %lld%s world %d: bit-identical over 20 steps; rank 0 working "
                    "weights (and NVMe masters) %lld bytes on disk, %lld released from memory\n",
                    dtype, static_cast<long long>(persistence), optimizer_nvme ? " + optimizer nvme" : "", world,
                    static_cast<long long>(params_disk), static_cast<long long>(released));
}

TEST(OffloadParamRanks, BitIdenticalToInMemoryZero3) {
    for (const char* dtype : {"fp32", "bf16"}) {
        run_case(dtype, 0, false);
        run_case(dtype, 100000, false);
    }
    run_case("bf16", 0, true);
}

}  // namespace
