// Expert parallelism on a GPU (nn/moe_ep_device.cpp, engine/
// expert_parallel_engine.cpp) under mpirun, on the host-backed device
// (tests/unit/host_backed_device.h: host memory posing as cuda:0, the CPU's
// kernels in the device table, the host communicator standing in for NCCL):
// the built-in MoE GPT split over an expert group (ep_size = the world on 2
// and 3 ranks, 2 expert groups of 2 on 4) trains on engines on cuda:0 —
// device-resident at ZeRO 0 and 1, and ZeRO-Offload — exactly as the same
// layout on CPU engines: every loss, every fp32 master, the held-out loss,
// bit for bit. Top-1 dropping tokens for capacity, top-2, the residual MoE
// and the Jitter gate; dropout 0.1 (the experts' masks are drawn over the
// tokens they receive, on both). Then a checkpoint round trip on the device
// engines.
#include <cstring>
#include <string>
#include <vector>

#include "../unit/host_backed_device.h"
#include "comm/mpi_include.h"
#include "deepspeed_c.h"
#include "mpi_gtest_main.h"
#include "model_rank.h"

namespace {

constexpr int64_t kB = 2, kT = 8, kV = 32;

struct Case {
    const char* name;
    const char* precision;  // "fp32", "bf16"
    int stage;
    int gas;
    bool offload;      // ZeRO-Offload (offload_optimizer "cpu") instead of device-resident
    const char* moe;   // extra members of the spec's moe section
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

int ep_size(int world) { return world % 3 == 0 ? 3 : 2; }

std::string spec(const Case& c, int ep) {
    return std::string("{\"type\": \"gpt\", \"vocab_size\": 32, \"block_size\": 8, \"n_layer\": 2, \"n_head\": 2, "
                       "\"n_embd\": 16, \"seed\": 13, \"dropout\": 0.1, \"moe\": {\"num_experts\": 6, \"every\": 1, "
                       "\"min_capacity\": 1, \"ep_size\": ") +
           std::to_string(ep) + ", " + c.moe + "}}";
}

std::string config(const Case& c) {
    std::string s = "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": " +
                    std::to_string(c.gas) + ", \"gradient_clipping\": 1.0, \"zero_optimization\": {\"stage\": " +
                    std::to_string(c.stage) + (c.offload ? ", \"offload_optimizer\": {\"device\": \"cpu\"}" : "") +
                    "}, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.01}}";
    if (std::string(c.precision) == "bf16")  // expert parallelism accumulates fp32 gradients
        s += ", \"bf16\": {\"enabled\": true}, \"data_types\": {\"grad_accum_dtype\": \"fp32\"}";
    return s + "}";
}

// One rank's engine on `device` over the world.
struct Rank {
    ds_comm_t* world = nullptr;
    ds_model_t* model = nullptr;
    ds_engine_t* e = nullptr;
    Rank(const std::string& spec_json, const std::string& config_json, DLDevice device) {
        EXPECT_EQ(ds_comm_create_world(nullptr, &world), DS_OK) << ds_last_error();
        EXPECT_EQ(ds_model_create(spec_json.c_str(), &model), DS_OK) << ds_last_error();
        ds_engine_options_t o;
        ds_engine_options_init(&o, sizeof o);
        o.comm = world;
        o.device = device;
        o.log_level = DS_LOG_WARN;
        EXPECT_EQ(ds_engine_create_with_model(config_json.c_str(), model, &o, &e), DS_OK) << ds_last_error();
    }
    ~Rank() {
        ds_engine_destroy(e);
        ds_model_destroy(model);
        ds_comm_destroy(world);
    }
    Rank(const Rank&) = delete;
    Rank& operator=(const Rank&) = delete;
};

// Micro-batch k's loss (ids and targets in host memory); a training
// micro-step when `train`.
float micro_step(ds_engine_t* e, int64_t k, bool train) {
    std::vector<int32_t> ids(kB * kT), tg(kB * kT);
    for (int64_t i = 0; i < kB * kT; ++i) {
        ids[size_t(i)] = static_cast<int32_t>((i * 5 + k * 3) % kV);
        tg[size_t(i)] = static_cast<int32_t>((i * 7 + k + 1) % kV);
    }
    int64_t shape[2] = {kB, kT};
    DLTensor in[2] = {{ids.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0},
                      {tg.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0}};
    float loss = 0.0f;
    DLTensor lo{&loss, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
    EXPECT_EQ(ds_forward(e, in, 2, &lo), DS_OK) << ds_last_error();
    if (train) {
        EXPECT_EQ(ds_backward(e, nullptr), DS_OK) << ds_last_error();
        EXPECT_EQ(ds_step(e, nullptr), DS_OK) << ds_last_error();
    }
    return loss;
}

// Every parameter's fp32 master as this rank holds it (its experts, every
// shared parameter), in the engine's order.
std::vector<std::vector<float>> masters(ds_engine_t* e, std::vector<std::string>* names) {
    int64_t n = 0;
    EXPECT_EQ(ds_engine_num_params(e, &n), DS_OK) << ds_last_error();
    std::vector<std::vector<float>> out;
    for (int64_t i = 0; i < n; ++i) {
        ds_param_info_t info;
        info.struct_size = sizeof info;
        EXPECT_EQ(ds_engine_param_info(e, i, &info), DS_OK) << ds_last_error();
        std::vector<float> v(static_cast<size_t>(info.numel));
        std::vector<int64_t> shape(info.shape, info.shape + info.ndim);
        DLTensor t{v.data(), {kDLCPU, 0}, info.ndim, {kDLFloat, 32, 1}, shape.data(), nullptr, 0};
        EXPECT_EQ(ds_engine_get_full_fp32_param(e, info.name, &t), DS_OK) << ds_last_error();
        out.push_back(std::move(v));
        if (names) names->push_back(info.name);
    }
    return out;
}

class MoeEpOnDevice : public ::testing::TestWithParam<Case> {};

TEST_P(MoeEpOnDevice, TrainsAsTheCpuEnginesBitForBit) {
    const Case c = GetParam();
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    test_device::HostBackedDevice device;
    const std::string s = spec(c, ep_size(world)), json = config(c);
    Rank cpu(s, json, {kDLCPU, 0}), dev(s, json, {kDLCUDA, 0});
    ASSERT_NE(cpu.e, nullptr);
    ASSERT_NE(dev.e, nullptr);
    for (int step = 0; step < 3; ++step)
        for (int m = 0; m < c.gas; ++m) {
            const int64_t k = (static_cast<int64_t>(step) * c.gas + m) * world + rank;
            const float lc = micro_step(cpu.e, k, true), ld = micro_step(dev.e, k, true);
            EXPECT_EQ(0, std::memcmp(&lc, &ld, sizeof lc))
                << "step " << step << " micro " << m << ": " << lc << " (cpu) vs " << ld << " (device)";
        }
    std::vector<std::string> names;
    const auto a = masters(cpu.e, &names), b = masters(dev.e, nullptr);
    ASSERT_EQ(a.size(), b.size());
    bool expert_seen = false;
    for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_TRUE(a[i] == b[i]) << names[i];
        expert_seen = expert_seen || names[i].find("deepspeed_experts") != std::string::npos;
    }
    EXPECT_TRUE(expert_seen) << "no expert parameter compared";
    ASSERT_EQ(ds_engine_eval(cpu.e, 1), DS_OK);
    ASSERT_EQ(ds_engine_eval(dev.e, 1), DS_OK);
    const float hc = micro_step(cpu.e, 1000 + rank, false), hd = micro_step(dev.e, 1000 + rank, false);
    EXPECT_EQ(0, std::memcmp(&hc, &hd, sizeof hc)) << hc << " vs " << hd;
    ASSERT_EQ(ds_engine_eval(dev.e, 0), DS_OK);
    ds_mpi_test::checkpoint_round_trip(dev.e, (std::string("moe_ep_device_") + c.name).c_str());
}

// With tensor parallelism too (4 ranks: tensor-parallel groups of 2, expert
// groups of 2) the model is refused on a GPU: the tensor-parallel layers run
// on the CPU only.
TEST(MoeEpOnDeviceRefusals, WithTensorParallelismNamesIt) {
    if (ds_mpi_test::world_size() != 4) GTEST_SKIP() << "needs 4 ranks (autotp_size 2 x ep_size 2)";
    test_device::HostBackedDevice device;
    const Case c{"tp", "fp32", 1, 1, false, "\"k\": 1"};
    std::string json = config(c);
    json.insert(json.size() - 1, ", \"tensor_parallel\": {\"autotp_size\": 2}");
    ds_comm_t* world = nullptr;
    ds_model_t* model = nullptr;
    ds_engine_t* e = nullptr;
    ASSERT_EQ(ds_comm_create_world(nullptr, &world), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_model_create(spec(c, 2).c_str(), &model), DS_OK) << ds_last_error();
    ds_engine_options_t o;
    ds_engine_options_init(&o, sizeof o);
    o.comm = world;
    o.device = {kDLCUDA, 0};
    o.log_level = DS_LOG_WARN;
    EXPECT_EQ(ds_engine_create_with_model(json.c_str(), model, &o, &e), DS_ERR_UNSUPPORTED);
    const std::string msg = ds_last_error();
    EXPECT_NE(msg.find("tensor-parallel model (tensor_parallel.autotp_size > 1) with moe.ep_size > 1"),
              std::string::npos)
        << msg;
    EXPECT_EQ(e, nullptr);
    ds_model_destroy(model);
    ds_comm_destroy(world);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MoeEpOnDevice,
    ::testing::Values(
        Case{"fp32_zero0_top2", "fp32", 0, 1, false,
             "\"k\": 2, \"capacity_factor\": 1.0, \"use_rts\": false, \"top2_2nd_expert_sampling\": false"},
        Case{"bf16_zero1_top1_drops_gas2", "bf16", 1, 2, false, "\"k\": 1, \"capacity_factor\": 0.5"},
        Case{"bf16_zero1_offload_top2_residual", "bf16", 1, 1, true,
             "\"k\": 2, \"capacity_factor\": 1.0, \"use_residual\": true"},
        Case{"fp32_zero0_top1_jitter_residual", "fp32", 0, 1, false,
             "\"k\": 1, \"capacity_factor\": 1.0, \"noisy_gate_policy\": \"Jitter\", \"use_residual\": true"}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
