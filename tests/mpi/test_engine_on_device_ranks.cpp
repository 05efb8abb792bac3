// An engine on cuda:N (ZeRO-Offload: engine/device_front.h) under mpirun, on
// a host-backed device (tests/unit/host_backed_device.h): at ZeRO stages 1
// and 2 its gradients are reduced across ranks in host memory and its
// updated weights gathered, as on the CPU engine, so with the same gradients
// each rank's device weights and fp32 masters equal a CPU engine's at the same
// stage bit for bit after every micro-step (test_zero_stages.cpp checks the
// CPU engine's stages against stage 0).
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

TEST_P(EngineOnDeviceRanks, EqualsTheCpuEngineAtTheSameStage) {
    const Case c = GetParam();
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    test_device::HostBackedDevice device;
    const std::string json = config(c.stage, c.dtype, c.gas, 1.0, c.stage == 2, 700, 100000, "{\"device\": \"cpu\"}");
    auto cpu = make(json, nullptr);
    auto dev = make(json, nullptr, ds::Device::cuda(0));
    ASSERT_TRUE(dev->device().is_cuda());
    for (int s = 0; s < 3; ++s)
        for (int m = 0; m < c.gas; ++m) {
            const int64_t k = (static_cast<int64_t>(s) * c.gas + m) * world + rank;
            micro_step(*cpu, k);
            micro_step(*dev, k);
            for (size_t i = 0; i < kSizes.size(); ++i) {
                const std::string name = "p" + std::to_string(i);
                DLTensor v{};
                dev->param_view(name.c_str(), &v);
                ASSERT_EQ(v.device.device_type, kDLCUDA);
                EXPECT_EQ(view_bytes(*dev, name), view_bytes(*cpu, name)) << name << " step " << s << " micro " << m;
                const std::vector<float> a = full(*cpu, ds::FullTensor::Param, name, nullptr, kSizes[i]);
                const std::vector<float> b = full(*dev, ds::FullTensor::Param, name, nullptr, kSizes[i]);
                EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << name << " step " << s;
            }
        }
    EXPECT_GT(dev->counters().optimizer_steps, 0);
}

// Without offload_optimizer an engine on cuda:N keeps every buffer on the
// device, and reducing them across ranks (NCCL) is not built: every rank
// gets the same refusal, naming the way out.
TEST(EngineOnDeviceRanksResident, SeveralRanksAreRefused) {
    test_device::HostBackedDevice device;
    const std::string json = config(1, "fp32", 1, 1.0, false, 700);
    ds::EngineOptions o;
    o.device_type = kDLCUDA;
    try {
        ds::Engine e(json, o);
        ADD_FAILURE() << "a device-resident engine was created with " << ds_mpi_test::world_size() << " ranks";
    } catch (const ds::Error& err) {
        EXPECT_EQ(err.status(), DS_ERR_UNSUPPORTED);
        EXPECT_NE(std::string(err.what()).find("offload_optimizer.device"), std::string::npos) << err.what();
    }
}

INSTANTIATE_TEST_SUITE_P(Stages, EngineOnDeviceRanks,
                         ::testing::Values(Case{1, "fp32", 1}, Case{2, "bf16", 2}, Case{2, "fp16", 1},
                                           Case{1, "bf16", 2}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                             return "stage" + std::to_string(i.param.stage) + "_" + i.param.dtype + "_gas" +
                                    std::to_string(i.param.gas);
                         });

}  // namespace
