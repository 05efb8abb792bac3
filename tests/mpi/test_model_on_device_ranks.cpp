// A built-in GPT on a device-resident engine (host-backed cuda:0,
// tests/unit/host_backed_device.h) under mpirun at ZeRO 0-3: its layers
// compute on the device table, its gradients are reduced across ranks in
// device buckets (engine/engine_device.cpp, make_data_comm) and its updated
// partitions gathered there (ZeRO-3: its weights gathered per layer); and on
// ZeRO-Offload engines at ZeRO 2 and 3 (reduced in host memory, the
// gathered weights copied to the device). Fed the same micro-batches, it must equal the
// same model on CPU engines with the same ranks bit for bit: every loss,
// every fp32 master, and the held-out loss (test_model_zero.cpp compares the
// CPU engines' ZeRO-2 run with one process). Dropout 0.1: each rank draws
// from the same counter-based streams on both engines.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../unit/host_backed_device.h"
#include "engine/engine.h"
#include "engine/engine_model.h"
#include "core/host_streams.h"
#include "engine/grad_pipe.h"
#include "engine/weight_pipe.h"
#include "gpt_batches.h"
#include "mpi_gtest_main.h"
#include "nn/model.h"
#include "zero/flat_strategy.h"

namespace {

using ds_gpt_test::forward_tokens;
const char* kSpec =
    R"({"type": "gpt", "vocab_size": 24, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 16, "seed": 9,)"
    R"( "dropout": 0.1})";

struct Case {
    int stage;
    const char* precision;  // "fp32", "bf16", "fp16"
    int gas;
    int64_t persistence = 100000;  // ZeRO-3's stage3_param_persistence_threshold (0: every weight gathered per layer)
    bool offload = false;          // ZeRO-Offload (offload_optimizer "cpu") instead of device-resident
    // ZeRO-Offload's overlapped copies (engine/grad_pipe.h, DeviceFront::upload_range): 0 as configured;
    // 1: 1024-element step pieces and the smallest gradient ring, copies deferred; 2: the same, run eagerly.
    int overlap = 0;
};

// Sets the overlap test knobs for a case's lifetime.
struct OverlapKnobs {
    explicit OverlapKnobs(int overlap) {
        if (overlap == 0) return;
        ds::zero::FlatStrategy::set_step_piece_for_testing(1024);
        ds::GradPipe::set_min_staging_for_testing(0);
        ds::device_memory::host_streams::set_eager_for_testing(overlap == 2);
    }
    ~OverlapKnobs() {
        ds::zero::FlatStrategy::set_step_piece_for_testing(int64_t{1} << 20);
        ds::GradPipe::set_min_staging_for_testing(size_t{4} << 20);
        ds::device_memory::host_streams::set_eager_for_testing(false);
    }
};

std::string config(const Case& c) {
    std::string prec;
    if (std::string(c.precision) == "bf16") prec = ", \"bf16\": {\"enabled\": true}";
    if (std::string(c.precision) == "fp16") prec = ", \"fp16\": {\"enabled\": true, \"initial_scale_power\": 8}";
    return "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": " + std::to_string(c.gas) +
           ", \"gradient_clipping\": 1.0, \"zero_optimization\": {\"stage\": " + std::to_string(c.stage) +
           ", \"reduce_bucket_size\": 500, \"overlap_comm\": true" +
           (c.stage == 3 ? ", \"stage3_param_persistence_threshold\": " + std::to_string(c.persistence) : "") +
           (c.offload ? ", \"offload_optimizer\": {\"device\": \"cpu\"}" : "") + "}" +
           ", \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001, \"weight_decay\": 0.01}}" + prec + "}";
}

std::unique_ptr<ds::Engine> make(const std::string& json, ds::Device device) {
    return ds_gpt_test::make(json, kSpec, nullptr, device);
}

std::vector<float> master(ds::Engine& e, const ds::Param& p) {
    std::vector<float> v(static_cast<size_t>(p.numel));
    std::vector<int64_t> shape = p.shape;
    DLTensor t{};
    t.data = v.data();
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape.data();
    e.get_full(ds::FullTensor::Param, p.name.c_str(), nullptr, &t);  // collective at ZeRO >= 1
    return v;
}

class ModelOnDeviceRanks : public ::testing::TestWithParam<Case> {};

TEST_P(ModelOnDeviceRanks, EqualsTheCpuEnginesBitForBit) {
    const Case c = GetParam();
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    test_device::HostBackedDevice device;
    const OverlapKnobs knobs(c.overlap);
    auto cpu = make(config(c), ds::Device::cpu());
    auto dev = make(config(c), ds::Device::cuda(0));
    ASSERT_TRUE(dev->device().is_cuda());
    const int steps = 4;
    for (int s = 0; s < steps; ++s)
        for (int m = 0; m < c.gas; ++m) {
            const int64_t k = (static_cast<int64_t>(s) * c.gas + m) * world + rank;
            float losses[2];
            int i = 0;
            for (ds::Engine* e : {cpu.get(), dev.get()}) {
                losses[i++] = forward_tokens(*e, 5, k * 3);
                e->backward(nullptr);
                e->step();
            }
            EXPECT_EQ(0, std::memcmp(&losses[0], &losses[1], sizeof(float)))
                << "step " << s << " micro " << m << ": " << losses[0] << " (cpu) vs " << losses[1] << " (device)";
        }
    EXPECT_EQ(dev->counters().global_steps, steps);
    EXPECT_EQ(dev->counters().skipped_steps, cpu->counters().skipped_steps);
    size_t compared = 0;
    for (const ds::Param& p : cpu->params().all()) {
        const std::vector<float> a = master(*cpu, p), b = master(*dev, dev->params().get(p.name.c_str()));
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << p.name;
        compared += a.size();
    }
    EXPECT_GT(compared, 0u);
    cpu->set_eval(true);
    dev->set_eval(true);
    const float held_cpu = forward_tokens(*cpu, 7, 2), held_dev = forward_tokens(*dev, 7, 2);
    EXPECT_EQ(0, std::memcmp(&held_cpu, &held_dev, sizeof(float))) << held_cpu << " vs " << held_dev;
}

INSTANTIATE_TEST_SUITE_P(Stages, ModelOnDeviceRanks,
                         ::testing::Values(Case{0, "fp32", 1}, Case{1, "bf16", 2}, Case{2, "fp32", 1},
                                           Case{2, "bf16", 2}, Case{2, "fp16", 1}, Case{3, "bf16", 2, 0},
                                           Case{3, "fp32", 1, 0}, Case{3, "fp16", 1, 100000},
                                           Case{3, "bf16", 2, 0, true}, Case{2, "bf16", 1, 100000, true},
                                           Case{2, "bf16", 2, 100000, true, 1}, Case{1, "fp16", 1, 100000, true, 2},
                                           Case{2, "bf16", 1, 100000, true, 2}, Case{3, "bf16", 2, 0, true, 1},
                                           Case{2, "fp32", 1, 100000, true, 1}, Case{1, "fp32", 2, 100000, true, 2},
                                           Case{3, "fp16", 1, 0, true, 2}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                             return "stage" + std::to_string(i.param.stage) + "_" + i.param.precision + "_gas" +
                                    std::to_string(i.param.gas) +
                                    (i.param.stage == 3 ? "_persist" + std::to_string(i.param.persistence) : "") +
                                    (i.param.offload ? "_offload" : "") +
                                    (i.param.overlap ? "_overlap" + std::to_string(i.param.overlap) : "");
                         });

// ZeRO-Offload at ZeRO-3: as a layer enters, the next layer of the pass is
// gathered and its copies to the device queued ahead (ModelBinding::
// prefetch_next): per training micro-step n_layer - 1 layers in the forward
// and n_layer - 1 in the backward; none in an eval forward's last layer.
TEST(ModelOnDeviceRanksStage3, OffloadGathersTheNextLayerAhead) {
    const int rank = ds_mpi_test::world_rank();
    test_device::HostBackedDevice device;
    auto dev = make(config(Case{3, "bf16", 1, 0, true}), ds::Device::cuda(0));
    ASSERT_NE(dev->model_binding(), nullptr);
    const int64_t n_layer = 2;  // kSpec
    for (int k = 0; k < 2; ++k) {
        forward_tokens(*dev, 5, k * 2 + rank);
        dev->backward(nullptr);
        dev->step();
        EXPECT_EQ(dev->model_binding()->layers_prefetched(), 2 * (n_layer - 1) * (k + 1)) << "micro-step " << k;
    }
    dev->set_eval(true);
    forward_tokens(*dev, 7, 2);
    EXPECT_EQ(dev->model_binding()->layers_prefetched(), 2 * (n_layer - 1) * 2 + (n_layer - 1));
}

// ZeRO-Offload at ZeRO-3 with offload_param "cpu" on several ranks: the
// gathered weights cross to the GPU through the weight pipe's staging (here
// at least 8 MiB), page-locked with offload_param.pin_memory, while
// offload_optimizer.pin_memory page-locks only the gradients' side (a few
// KiB here); training equals the CPU engines' bit for bit either way.
TEST(ModelOnDeviceRanksStage3, ParamPinMemoryPinsTheGatheredWeightsStaging) {
    const int rank = ds_mpi_test::world_rank();
    test_device::HostBackedDevice device;
    const size_t ring = size_t{8} << 20;
    ds::WeightPipe::set_min_staging_for_testing(ring);
    const int64_t before = ds::device_memory::pinned_bytes();
    for (const bool param_pin : {true, false}) {
        std::string json = config(Case{3, "bf16", 1, 0, true});
        const std::string opt = "\"offload_optimizer\": {\"device\": \"cpu\"";
        json.replace(json.find(opt), opt.size(),
                     std::string("\"offload_param\": {\"device\": \"cpu\", \"pin_memory\": ") +
                         (param_pin ? "true" : "false") + "}, " + opt + ", \"pin_memory\": " +
                         (param_pin ? "false" : "true"));
        {
            auto cpu = make(json, ds::Device::cpu());
            auto dev = make(json, ds::Device::cuda(0));
            for (int k = 0; k < 2; ++k) {
                float losses[2];
                int i = 0;
                for (ds::Engine* e : {cpu.get(), dev.get()}) {
                    losses[i++] = forward_tokens(*e, 5, k * 2 + rank);
                    e->backward(nullptr);
                    e->step();
                }
                EXPECT_EQ(0, std::memcmp(&losses[0], &losses[1], sizeof(float)))
                    << losses[0] << " (cpu) vs " << losses[1] << " (device), param pin " << param_pin;
            }
            const int64_t pinned = ds::device_memory::pinned_bytes() - before;
            if (param_pin)
                EXPECT_GE(pinned, static_cast<int64_t>(ring));
            else
                EXPECT_GT(pinned, 0);  // the gradients' staging
            if (!param_pin) EXPECT_LT(pinned, static_cast<int64_t>(ring));
        }
        EXPECT_EQ(ds::device_memory::pinned_bytes(), before) << "param pin " << param_pin;
    }
    ds::WeightPipe::set_min_staging_for_testing(size_t{4} << 20);
}

// ZeRO-Offload with fp32 weights on several ranks: each rank's master holds
// its partition, the working weights are a copy of it; the step copies each
// 1024-element piece into the working weights as soon as it is stepped and
// hands it to the device (instead of one copy of the whole buffer after the
// step): at least one copy per whole piece of this rank's partition.
TEST(ModelOnDeviceRanksFp32Step, UploadsItsPartitionPieceByPiece) {
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    test_device::HostBackedDevice device;
    const OverlapKnobs knobs(1);
    auto dev = make(config(Case{2, "fp32", 1, 100000, true}), ds::Device::cuda(0));
    int64_t n = 0;
    for (const ds::Param& p : dev->params().all()) n += p.trainable ? p.numel : 0;
    forward_tokens(*dev, 5, rank);
    dev->backward(nullptr);
    device.reset_counts();
    dev->step();
    const long pieces = static_cast<long>(n / world / 1024);
    ASSERT_GE(pieces, 2) << n << " trainable elements: too few for the test";
    EXPECT_GE(device.copies_to_device(), pieces + 1) << n << " trainable elements over " << world << " ranks";
}

}  // namespace
