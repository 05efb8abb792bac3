// An engine on cuda:N under mpirun, on a host-backed device
// (tests/unit/host_backed_device.h), in both GPU modes. ZeRO-Offload
// (engine/device_front.h): at ZeRO stages 1 and 2 its gradients are reduced
// across ranks in host memory and its updated weights gathered, as on the CPU
// engine. Device-resident (ResidentEngineRanks): its buffers are reduced and
// gathered in device memory. Either way, with the same gradients each rank's
// device weights and fp32 masters equal a CPU engine's at the same stage bit
// for bit after every micro-step (test_zero_stages.cpp checks the CPU
// engine's stages against stage 0).
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../unit/host_backed_device.h"
#include "core/error.h"
#include "mpi_gtest_main.h"
#include "zero_test_util.h"

namespace {

using namespace ds_zero_test;

struct Case {
    int stage;
    const char* dtype;
    int gas;
};

class EngineOnDeviceRanks : public ::testing::TestWithParam<Case> {};

std::vector<unsigned char> view_bytes(ds::Engine& e, const std::string& name) {
    DLTensor v{};
    e.param_view(name.c_str(), &v);
    size_t n = 1;
    for (int d = 0; d < v.ndim; ++d) n *= static_cast<size_t>(v.shape[d]);
    const auto* p = static_cast<const unsigned char*>(v.data) + v.byte_offset;
    return std::vector<unsigned char>(p, p + n * v.dtype.bits / 8);
}

// `json` trained on a CPU engine and on one on the host-backed cuda:0 with the
// same gradients for 3 steps: after every micro-step each rank's device
// weights equal the CPU engine's bit for bit, and so do the fp32 copies of
// every state in `states` (nullptr: the master; else an optimizer state).
void expect_equal_to_cpu(const std::string& json, int gas, const std::vector<const char*>& states) {
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    test_device::HostBackedDevice device;
    auto cpu = make(json, nullptr);
    auto dev = make(json, nullptr, ds::Device::cuda(0));
    ASSERT_TRUE(dev->device().is_cuda());
    for (int s = 0; s < 3; ++s)
        for (int m = 0; m < gas; ++m) {
            const int64_t k = (static_cast<int64_t>(s) * gas + m) * world + rank;
            micro_step(*cpu, k);
            micro_step(*dev, k);
            for (size_t i = 0; i < kSizes.size(); ++i) {
                const std::string name = "p" + std::to_string(i);
                DLTensor v{};
                dev->param_view(name.c_str(), &v);
                ASSERT_EQ(v.device.device_type, kDLCUDA);
                EXPECT_EQ(view_bytes(*dev, name), view_bytes(*cpu, name)) << name << " step " << s << " micro " << m;
                for (const char* state : states) {
                    const auto which = state ? ds::FullTensor::OptimizerState : ds::FullTensor::Param;
                    const std::vector<float> a = full(*cpu, which, name, state, kSizes[i]);
                    const std::vector<float> b = full(*dev, which, name, state, kSizes[i]);
                    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
                        << name << " " << (state ? state : "master") << " step " << s;
                }
            }
        }
    EXPECT_EQ(dev->counters().optimizer_steps, cpu->counters().optimizer_steps);
    EXPECT_GT(dev->counters().optimizer_steps, 0);
}

TEST_P(EngineOnDeviceRanks, EqualsTheCpuEngineAtTheSameStage) {
    const Case c = GetParam();
    expect_equal_to_cpu(config(c.stage, c.dtype, c.gas, 1.0, c.stage == 2, 700, 100000, "{\"device\": \"cpu\"}"),
                        c.gas, {nullptr});
}

// Without offload_optimizer an engine on cuda:N keeps every buffer on the
// device (zero/flat_device.cpp) and moves them between ranks over its data
// communicator (NCCL on a GPU; on the host-backed device, whose memory is
// host memory, the MPI world itself): gradients all-reduced in device
// buckets, the updated partitions all-gathered in device memory. With the
// same gradients it must equal the CPU engine at the same stage bit for bit.
struct ResidentCase {
    int stage;
    const char* dtype;
    int gas;
    bool overlap;
    int64_t allgather_bucket;  // > 0: the all-gather of the weights in shards of this many elements
};

class ResidentEngineRanks : public ::testing::TestWithParam<ResidentCase> {};

std::string resident_config(const ResidentCase& c) {
    std::string json = config(c.stage, c.dtype, c.gas, 1.0, c.overlap, 700);
    if (c.allgather_bucket > 0) {
        const std::string key = "\"zero_optimization\": {";
        json.insert(json.find(key) + key.size(), "\"allgather_bucket_size\": " + std::to_string(c.allgather_bucket) + ", ");
    }
    return json;
}

TEST_P(ResidentEngineRanks, EqualsTheCpuEngineAtTheSameStage) {
    const ResidentCase c = GetParam();
    expect_equal_to_cpu(resident_config(c), c.gas, {nullptr, "exp_avg_sq"});
}

INSTANTIATE_TEST_SUITE_P(Stages, ResidentEngineRanks,
                         ::testing::Values(ResidentCase{0, "fp32", 1, false, 0}, ResidentCase{0, "bf16", 2, false, 0},
                                           ResidentCase{1, "fp32", 1, false, 0}, ResidentCase{1, "bf16", 2, true, 0},
                                           ResidentCase{2, "fp32", 2, true, 0}, ResidentCase{2, "bf16", 1, false, 0},
                                           ResidentCase{2, "fp16", 2, true, 0}, ResidentCase{2, "bf16", 1, true, 500},
                                           ResidentCase{1, "fp32", 1, false, 300}),
                         [](const ::testing::TestParamInfo<ResidentCase>& i) {
                             return "stage" + std::to_string(i.param.stage) + "_" + i.param.dtype + "_gas" +
                                    std::to_string(i.param.gas) + (i.param.overlap ? "_overlap" : "") +
                                    (i.param.allgather_bucket > 0 ? "_sharded" : "");
                         });

// Every rank must keep its buffers in the same memory: rank 0 on the CPU and
// the others device-resident is refused on every rank, naming both.
TEST(ResidentEngineRanksMixed, DifferentMemoryOnDifferentRanksIsRefused) {
    test_device::HostBackedDevice device;
    const std::string json = config(1, "fp32", 1, 1.0, false, 700);
    ds::EngineOptions o;
    o.device_type = ds_mpi_test::world_rank() == 0 ? kDLCPU : kDLCUDA;
    try {
        ds::Engine e(json, o);
        ADD_FAILURE() << "engines with buffers in host and device memory were created on one world";
    } catch (const ds::Error& err) {
        EXPECT_EQ(err.status(), DS_ERR_INVALID_ARGUMENT) << err.what();
        EXPECT_NE(std::string(err.what()).find("host memory on rank 0"), std::string::npos) << err.what();
        EXPECT_NE(std::string(err.what()).find("GPU memory (device-resident) on rank 1"), std::string::npos)
            << err.what();
    }
    // The world is still usable: a matching pair of engines is created.
    auto a = make(json, nullptr, ds::Device::cuda(0));
    EXPECT_TRUE(a->device().is_cuda());
}

// ZeRO-3 on a GPU is built for a world of one only (there it trains as stage
// 0): with several ranks every rank gets the same refusal, naming it.
TEST(ResidentEngineRanksStage3, SeveralRanksAreRefused) {
    test_device::HostBackedDevice device;
    for (const char* offload : {"", "{\"device\": \"cpu\"}"}) {
        const std::string json = config(3, "bf16", 1, 1.0, false, 700, 100000, offload);
        ds::EngineOptions o;
        o.device_type = kDLCUDA;
        try {
            ds::Engine e(json, o);
            ADD_FAILURE() << "a ZeRO-3 engine on cuda:0 was created with " << ds_mpi_test::world_size() << " ranks";
        } catch (const ds::Error& err) {
            EXPECT_EQ(err.status(), DS_ERR_UNSUPPORTED);
            EXPECT_NE(std::string(err.what()).find("stage = 3 on cuda:0 with"), std::string::npos) << err.what();
        }
    }
}

// A device-resident engine's checkpoint on several ranks resumes on CPU
// engines, and a CPU one on device-resident engines, bit for bit.
TEST(ResidentEngineRanksCheckpoint, CrossesToTheCpuAndBack) {
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    test_device::HostBackedDevice device;
    auto world_comm = ds::comm::make_world(ds::comm::Options{});
    char path[64] = "/tmp/ds_resident_ckptXXXXXX";
    if (rank == 0 && !mkdtemp(path)) std::abort();
    world_comm->broadcast(path, sizeof path, ds::DType::U8, 0);
    const std::string dir = path;
    const std::string json = config(2, "bf16", 1, 1.0, true, 700);
    for (const bool from_device : {true, false}) {
        auto saver = make(json, nullptr, from_device ? ds::Device::cuda(0) : ds::Device::cpu());
        auto loader = make(json, nullptr, from_device ? ds::Device::cpu() : ds::Device::cuda(0));
        for (int s = 0; s < 2; ++s) micro_step(*saver, s * world + rank);
        const std::string tag = from_device ? "from_device" : "from_cpu";
        saver->save_checkpoint(dir.c_str(), tag.c_str(), nullptr);
        loader->load_checkpoint(dir.c_str(), tag.c_str(), 0);
        for (int s = 2; s < 4; ++s) {
            micro_step(*saver, s * world + rank);
            micro_step(*loader, s * world + rank);
        }
        for (size_t i = 0; i < kSizes.size(); ++i) {
            const std::string name = "p" + std::to_string(i);
            EXPECT_EQ(view_bytes(*loader, name), view_bytes(*saver, name)) << name << " " << tag;
            const std::vector<float> a = full(*saver, ds::FullTensor::Param, name, nullptr, kSizes[i]);
            const std::vector<float> b = full(*loader, ds::FullTensor::Param, name, nullptr, kSizes[i]);
            EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << name << " " << tag;
        }
    }
    world_comm->barrier();
    if (rank == 0) std::system(("rm -rf '" + dir + "'").c_str());
}

INSTANTIATE_TEST_SUITE_P(Stages, EngineOnDeviceRanks,
                         ::testing::Values(Case{1, "fp32", 1}, Case{2, "bf16", 2}, Case{2, "fp16", 1},
                                           Case{1, "bf16", 2}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                             return "stage" + std::to_string(i.param.stage) + "_" + i.param.dtype + "_gas" +
                                    std::to_string(i.param.gas);
                         });

}  // namespace
