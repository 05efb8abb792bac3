// A built-in model (ds_engine_create_with_model) on an engine on cuda:N, run
// on the host-backed device (host_backed_device.h), where the "device"
// kernels are the CPU's: the layers allocate their activations, gradients
// and fp32 weight copies in device memory and call the device's kernel table,
// so a GPT trained by a device-resident or a ZeRO-Offload engine must give a
// CPU engine's losses and fp32 master weights bit for bit. The copies to the
// device are counted: a training micro-step moves its batch (token ids,
// targets, positions) and no weight. The CUDA kernels themselves are checked
// against the references on a GPU (tests/gpu/).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "api_test_util.h"
#include "deepspeed_c.h"
#include "core/host_streams.h"
#include "engine/grad_pipe.h"
#include "zero/aio_file.h"
#include "zero/flat_strategy.h"
#include "host_backed_device.h"

#include <unistd.h>

namespace {

using api_test::fp32_masters;

constexpr int64_t kB = 2, kT = 8, kVocab = 32;
const DLDevice kCuda0{kDLCUDA, 0};
const DLDevice kCpu{kDLCPU, 0};

struct Case {
    const char* dtype;    // "fp32", "bf16", "fp16"
    int stage;
    int gas;
    const char* offload;  // "cpu" or "nvme" (optimizer state in nvme_dir()): ZeRO-Offload; "none": device-resident
    const char* ckpt;     // activation checkpointing: "none", "gpu" (number_checkpoints 1), "cpu" (cpu_checkpointing)
};

void PrintTo(const Case& c, std::ostream* os) {
    *os << c.dtype << " stage " << c.stage << " gas " << c.gas << " offload " << c.offload << " ckpt " << c.ckpt;
}

// A directory for this process's NVMe swap files (each engine names its own file in it).
std::string nvme_dir() {
    const auto p = std::filesystem::temp_directory_path() / ("ds_model_on_device_nvme_" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    return p.string();
}

std::string config(const Case& c) {
    std::string s = "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": " +
                    std::to_string(c.gas) + ", \"gradient_clipping\": 1.0,"
                    " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.1}},"
                    " \"zero_optimization\": {\"stage\": " + std::to_string(c.stage);
    if (std::string(c.offload) == "nvme")  // sub-groups of 1024 elements: a small model steps in several
        s += ", \"sub_group_size\": 1024, \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"" +
             nvme_dir() + "\"}";
    else if (std::string(c.offload) != "none")
        s += std::string(", \"offload_optimizer\": {\"device\": \"") + c.offload + "\"}";
    s += "}";
    if (std::string(c.dtype) == "bf16") s += ", \"bf16\": {\"enabled\": true}";
    if (std::string(c.dtype) == "fp16") s += ", \"fp16\": {\"enabled\": true, \"initial_scale_power\": 8}";
    if (std::string(c.ckpt) == "gpu") s += ", \"activation_checkpointing\": {\"number_checkpoints\": 1}";
    if (std::string(c.ckpt) == "cpu") s += ", \"activation_checkpointing\": {\"cpu_checkpointing\": true}";
    return s + "}";
}

// Two layers, tied embeddings, every dropout on: the masks must be the CPU's.
const char* const kGpt = R"({"type": "gpt", "vocab_size": 32, "block_size": 8, "n_layer": 2, "n_head": 2,
    "n_embd": 16, "dropout": 0.1, "seed": 5})";

// An engine on `device` made with `m` (the caller keeps its reference).
ds_engine_t* create_with(ds_model_t* m, const std::string& json, DLDevice device, ds_status_t* status = nullptr) {
    ds_engine_options_t o;
    ds_engine_options_init(&o, sizeof o);
    o.device = device;
    ds_engine_t* e = nullptr;
    const ds_status_t s = ds_engine_create_with_model(json.c_str(), m, &o, &e);
    if (status) *status = s;
    else EXPECT_EQ(s, DS_OK) << ds_last_error();
    return e;
}

// An engine made with a new model of `spec`, which only the engine references.
ds_engine_t* create_with_model(const std::string& json, DLDevice device, const char* spec = kGpt,
                               ds_status_t* status = nullptr) {
    ds_model_t* m = nullptr;
    EXPECT_EQ(ds_model_create(spec, &m), DS_OK) << ds_last_error();
    ds_engine_t* e = create_with(m, json, device, status);
    ds_model_destroy(m);
    return e;
}

struct EngineGuard {
    ds_engine_t* e;
    ~EngineGuard() { ds_engine_destroy(e); }
};

// Micro-batch k's token ids and targets (int32), distinct per k.
struct Batch {
    std::vector<int32_t> ids, targets;
    std::vector<int64_t> shape{kB, kT};
    explicit Batch(int k) {
        for (int64_t i = 0; i < kB * kT; ++i) {
            ids.push_back(static_cast<int32_t>((i * 5 + 3 * k + 1) % kVocab));
            targets.push_back(static_cast<int32_t>((i * 7 + k + 2) % kVocab));
        }
    }
    // `on`: where the caller says the ids are (a host-backed "device" reads host memory).
    DLTensor ids_on(DLDevice on) { return {ids.data(), on, 2, {kDLInt, 32, 1}, shape.data(), nullptr, 0}; }
    DLTensor targets_on(DLDevice on) { return {targets.data(), on, 2, {kDLInt, 32, 1}, shape.data(), nullptr, 0}; }
};

float train_micro_step(ds_engine_t* e, int k, DLDevice inputs_on) {
    Batch b(k);
    DLTensor in[2] = {b.ids_on(inputs_on), b.targets_on(inputs_on)};
    float loss = 0.0f;
    DLTensor lo{&loss, kCpu, 0, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
    EXPECT_EQ(ds_forward(e, in, 2, &lo), DS_OK) << ds_last_error();
    EXPECT_EQ(ds_backward(e, nullptr), DS_OK) << ds_last_error();
    EXPECT_EQ(ds_step(e, nullptr), DS_OK) << ds_last_error();
    return loss;
}

// The logits of an eval forward (no targets), written to host memory.
std::vector<float> eval_logits(ds_engine_t* e) {
    EXPECT_EQ(ds_engine_eval(e, 1), DS_OK) << ds_last_error();
    Batch b(99);
    DLTensor in = b.ids_on(kCpu);
    std::vector<float> y(static_cast<size_t>(kB * kT * kVocab));
    std::vector<int64_t> ys{kB, kT, kVocab};
    DLTensor out{y.data(), kCpu, 3, {kDLFloat, 32, 1}, ys.data(), nullptr, 0};
    EXPECT_EQ(ds_forward(e, &in, 1, &out), DS_OK) << ds_last_error();
    EXPECT_EQ(ds_engine_eval(e, 0), DS_OK) << ds_last_error();
    return y;
}

class ModelOnDevice : public ::testing::TestWithParam<Case> {};

// `c` trained on the device and on the CPU: the same losses, masters and eval logits.
void expect_trains_alike(const Case& c, const char* spec) {
    test_device::HostBackedDevice device;
    EngineGuard d{create_with_model(config(c), kCuda0, spec)}, h{create_with_model(config(c), kCpu, spec)};
    ASSERT_NE(d.e, nullptr);
    ASSERT_NE(h.e, nullptr);
    for (int k = 0; k < 3 * c.gas; ++k) {
        // Odd micro-steps hand the batch over in device memory.
        const float ld = train_micro_step(d.e, k, k % 2 == 1 ? kCuda0 : kCpu);
        const float lh = train_micro_step(h.e, k, kCpu);
        ASSERT_EQ(std::memcmp(&ld, &lh, sizeof ld), 0) << "micro-step " << k << ": loss " << ld << " vs " << lh;
    }
    const auto md = fp32_masters(d.e), mh = fp32_masters(h.e);
    ASSERT_EQ(md.size(), mh.size());
    for (size_t p = 0; p < md.size(); ++p) EXPECT_EQ(md[p], mh[p]) << "parameter " << p;
    EXPECT_EQ(eval_logits(d.e), eval_logits(h.e));
}

TEST_P(ModelOnDevice, TrainsLikeTheCpuEngine) { expect_trains_alike(GetParam(), kGpt); }

INSTANTIATE_TEST_SUITE_P(Resident, ModelOnDevice,
                         ::testing::Values(Case{"fp32", 0, 1, "none", "none"}, Case{"fp32", 1, 2, "none", "gpu"},
                                           Case{"bf16", 2, 1, "none", "none"}, Case{"bf16", 1, 2, "none", "cpu"},
                                           Case{"fp16", 2, 2, "none", "none"}, Case{"bf16", 3, 2, "none", "gpu"},
                                           Case{"fp32", 3, 1, "none", "none"}));
INSTANTIATE_TEST_SUITE_P(ZeroOffload, ModelOnDevice,
                         ::testing::Values(Case{"fp32", 2, 1, "cpu", "none"}, Case{"bf16", 2, 2, "cpu", "gpu"},
                                           Case{"fp16", 1, 1, "cpu", "cpu"}, Case{"bf16", 3, 1, "cpu", "none"}));

// ZeRO-Offload on a GPU overlaps its copies with compute: the gradients go
// to the host on a copy stream while the backward goes on
// (engine/grad_pipe.h), and the updated weights go to the device piece by
// piece while the CPU steps (DeviceFront::upload_range; 1024-element pieces
// here, so a small model steps in many). The host-backed streams either
// defer each copy to the latest moment a GPU could run it (a source written
// again too early, e.g. a missing fence before a layer's gradient buffer is
// reused, changes the numbers) or run it at once (a copy queued before its
// source was final, e.g. a piece handed over before it was stepped, copies
// old bytes). Four layers, so each half of the layer gradient buffer is
// reused; the smallest ring (twice the largest gradient) wraps inside a
// layer, so the host accumulates while later layers run; the default one
// (4 MiB) holds the whole backward until the drain.
struct Overlap {
    Case c;
    bool smallest_ring;
    bool eager;
};

void PrintTo(const Overlap& o, std::ostream* os) {
    PrintTo(o.c, os);
    *os << (o.smallest_ring ? " smallest ring" : " default ring") << (o.eager ? " eager" : " deferred");
}

class OffloadOverlap : public ::testing::TestWithParam<Overlap> {
protected:
    void TearDown() override {
        ds::GradPipe::set_min_staging_for_testing(size_t{4} << 20);
        ds::zero::FlatStrategy::set_step_piece_for_testing(int64_t{1} << 20);
        ds::device_memory::host_streams::set_eager_for_testing(false);
    }
};

const char* const kGpt4 = R"({"type": "gpt", "vocab_size": 32, "block_size": 8, "n_layer": 4, "n_head": 2,
    "n_embd": 16, "dropout": 0.1, "seed": 9})";

TEST_P(OffloadOverlap, TrainsLikeTheCpuEngine) {
    const Overlap& o = GetParam();
    if (o.smallest_ring) ds::GradPipe::set_min_staging_for_testing(0);
    ds::zero::FlatStrategy::set_step_piece_for_testing(1024);
    ds::device_memory::host_streams::set_eager_for_testing(o.eager);
    expect_trains_alike(o.c, kGpt4);
}

std::vector<Overlap> overlap_cases() {
    std::vector<Overlap> v;
    for (const Case& c : {Case{"fp32", 2, 1, "cpu", "none"}, Case{"bf16", 2, 2, "cpu", "gpu"},
                          Case{"fp16", 1, 2, "cpu", "cpu"}, Case{"bf16", 3, 2, "cpu", "none"},
                          Case{"bf16", 2, 1, "nvme", "none"}, Case{"fp32", 1, 2, "nvme", "none"}})
        for (const auto& [ring, eager] : {std::pair{true, false}, std::pair{false, false}, std::pair{false, true}})
            v.push_back(Overlap{c, ring, eager});
    return v;
}

INSTANTIATE_TEST_SUITE_P(ZeroOffload, OffloadOverlap, ::testing::ValuesIn(overlap_cases()));

// The elements of every parameter of `e` (the GPT's are all trainable).
int64_t param_elements(ds_engine_t* e) {
    int64_t count = 0, n = 0;
    EXPECT_EQ(ds_engine_num_params(e, &count), DS_OK) << ds_last_error();
    for (int64_t i = 0; i < count; ++i) {
        ds_param_info_t info;
        info.struct_size = sizeof info;
        EXPECT_EQ(ds_engine_param_info(e, i, &info), DS_OK) << ds_last_error();
        n += info.numel;
    }
    return n;
}

// The step hands its pieces over as it goes: one copy to the device per
// 1024 elements of the 16-bit weights, instead of one after the step.
TEST(OffloadOverlapCopies, TheStepUploadsPieceByPiece) {
    test_device::HostBackedDevice device;
    ds::zero::FlatStrategy::set_step_piece_for_testing(1024);
    EngineGuard o{create_with_model(config(Case{"bf16", 2, 1, "cpu", "none"}), kCuda0, kGpt4)};
    ASSERT_NE(o.e, nullptr);
    const int64_t n = param_elements(o.e);
    device.reset_counts();
    train_micro_step(o.e, 0, kCpu);
    ds::zero::FlatStrategy::set_step_piece_for_testing(int64_t{1} << 20);
    EXPECT_EQ(device.copies_to_device(), 3 + (n + 1023) / 1024) << n << " trainable elements";
}

// With the optimizer state on NVMe the step streams sub-groups (1024
// elements here) from the swap file and hands each over once its weights
// are written: one copy to the device per sub-group.
TEST(OffloadOverlapCopies, TheNvmeStepUploadsSubGroupBySubGroup) {
    test_device::HostBackedDevice device;
    EngineGuard o{create_with_model(config(Case{"bf16", 2, 1, "nvme", "none"}), kCuda0, kGpt4)};
    ASSERT_NE(o.e, nullptr);
    const int64_t n = param_elements(o.e);
    device.reset_counts();
    train_micro_step(o.e, 0, kCpu);
    EXPECT_EQ(device.copies_to_device(), 3 + (n + 1023) / 1024) << n << " trainable elements";
    std::filesystem::remove_all(nvme_dir());
}

// A step whose swap-file write fails after some sub-groups went to the
// device: the strategy restores the host weights of those sub-groups, and
// the engine copies them to the device again, so the device weights are
// the ones before the step (and the same window, retried, trains on as the
// CPU engine does). Eager copies: a deferred one would read the host
// weights only after they were restored.
TEST(OffloadOverlapCopies, AFailedNvmeStepLeavesTheDeviceWeightsAsTheyWere) {
    test_device::HostBackedDevice device;
    struct Eager {
        Eager() { ds::device_memory::host_streams::set_eager_for_testing(true); }
        ~Eager() { ds::device_memory::host_streams::set_eager_for_testing(false); }
    } eager;
    const std::string json = config(Case{"bf16", 2, 1, "nvme", "none"});
    EngineGuard d{create_with_model(json, kCuda0, kGpt4)}, h{create_with_model(json, kCpu, kGpt4)};
    ASSERT_NE(d.e, nullptr);
    ASSERT_NE(h.e, nullptr);
    train_micro_step(d.e, 0, kCpu);
    train_micro_step(h.e, 0, kCpu);
    int64_t count = 0;
    ASSERT_EQ(ds_engine_num_params(d.e, &count), DS_OK) << ds_last_error();
    auto device_weights = [&] {
        std::vector<std::vector<unsigned char>> all;
        for (int64_t i = 0; i < count; ++i) {
            ds_param_info_t info;
            info.struct_size = sizeof info;
            EXPECT_EQ(ds_engine_param_info(d.e, i, &info), DS_OK) << ds_last_error();
            DLTensor v;
            EXPECT_EQ(ds_engine_param_view(d.e, info.name, &v), DS_OK) << ds_last_error();
            EXPECT_EQ(v.device.device_type, kDLCUDA) << info.name;
            const auto* b = static_cast<const unsigned char*>(v.data) + v.byte_offset;
            all.emplace_back(b, b + info.numel * 2);  // bf16; host-backed: readable here
        }
        return all;
    };
    const auto before = device_weights();
    Batch b(1);
    DLTensor in[2] = {b.ids_on(kCpu), b.targets_on(kCpu)};
    float loss = 0.0f;
    DLTensor lo{&loss, kCpu, 0, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
    ASSERT_EQ(ds_forward(d.e, in, 2, &lo), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_backward(d.e, nullptr), DS_OK) << ds_last_error();
    device.reset_counts();
    ds::zero::aio_fail_nth_write(4);  // a later sub-group's write: earlier ones are on the device by then
    EXPECT_EQ(ds_step(d.e, nullptr), DS_ERR_IO);
    ds::zero::aio_fail_nth_write(0);
    EXPECT_GE(device.copies_to_device(), 2) << "sub-groups went to the device before the failure";
    const auto after = device_weights();
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(after[i] == before[i]) << "parameter " << i;
    ASSERT_EQ(ds_step(d.e, nullptr), DS_OK) << ds_last_error();  // the same window, retried
    const float lh = train_micro_step(h.e, 1, kCpu);
    EXPECT_EQ(loss, lh);
    const float l2d = train_micro_step(d.e, 2, kCpu), l2h = train_micro_step(h.e, 2, kCpu);
    EXPECT_EQ(0, std::memcmp(&l2d, &l2h, sizeof l2d)) << l2d << " vs " << l2h;
    EXPECT_EQ(fp32_masters(d.e), fp32_masters(h.e));
    std::filesystem::remove_all(nvme_dir());
}

// An odd width (15): a bf16 engine's embedding rows are not whole 32-bit
// words, so the device gathers from an fp32 copy of the table instead.
TEST(ModelOnDeviceOddWidth, Bf16EmbeddingGatherFallsBack) {
    expect_trains_alike(Case{"bf16", 1, 1, "none", "none"}, R"({"type": "gpt", "vocab_size": 32, "block_size": 8,
        "n_layer": 1, "n_head": 3, "n_embd": 15, "dropout": 0.1, "seed": 7})");
}

// A checkpoint of a model trained on the device resumes on the CPU, and one
// written on the CPU resumes on the device (weights, optimizer state, the
// dropout stream): the continuations match the uninterrupted run bit for bit.
TEST(ModelOnDeviceCheckpoint, CrossesBetweenDeviceAndCpu) {
    test_device::HostBackedDevice device;
    const std::string json = config(Case{"bf16", 2, 1, "none", "none"});
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("ds_model_on_device_" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(dir);
    EngineGuard d{create_with_model(json, kCuda0)}, h{create_with_model(json, kCpu)};
    ASSERT_NE(d.e, nullptr);
    ASSERT_NE(h.e, nullptr);
    for (int k = 0; k < 2; ++k) {
        train_micro_step(d.e, k, kCpu);
        train_micro_step(h.e, k, kCpu);
    }
    ASSERT_EQ(ds_save_checkpoint(d.e, (dir + "/dev").c_str(), "t", nullptr), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_save_checkpoint(h.e, (dir + "/cpu").c_str(), "t", nullptr), DS_OK) << ds_last_error();
    // The device checkpoint into a fresh CPU engine, the CPU one into a fresh device engine.
    EngineGuard h2{create_with_model(json, kCpu)}, d2{create_with_model(json, kCuda0)};
    ASSERT_EQ(ds_load_checkpoint(h2.e, (dir + "/dev").c_str(), "t", 0, nullptr), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_load_checkpoint(d2.e, (dir + "/cpu").c_str(), "t", 0, nullptr), DS_OK) << ds_last_error();
    for (int k = 2; k < 4; ++k) {
        const float want = train_micro_step(h.e, k, kCpu);
        for (ds_engine_t* e : {d.e, h2.e, d2.e}) {
            const float got = train_micro_step(e, k, kCpu);
            EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0) << "micro-step " << k << ": " << got << " vs " << want;
        }
    }
    const auto want = fp32_masters(h.e);
    for (ds_engine_t* e : {d.e, h2.e, d2.e}) EXPECT_EQ(fp32_masters(e), want);
    std::filesystem::remove_all(dir);
}

// `v` rounded to bf16 (the library's round to nearest even) and widened back.
std::vector<float> through_bf16(std::vector<float> v) {
    std::vector<uint16_t> h(v.size());
    int64_t n = static_cast<int64_t>(v.size());
    DLTensor f = api_test::f32_tensor(v.data(), &n, 1), b = api_test::cpu_tensor(h.data(), &n, 1, {kDLBfloat, 16, 1});
    EXPECT_EQ(ds_convert(&f, &b), DS_OK) << ds_last_error();
    EXPECT_EQ(ds_convert(&b, &f), DS_OK) << ds_last_error();
    return v;
}

// When an engine on a GPU is destroyed the model keeps host fp32 copies of
// its final weights (include/deepspeed_c/model.h): the fp32 masters, or for
// bf16 the working weights (the masters rounded) widened, the promise a CPU
// engine keeps (test_engine_model_memory.cpp,
// Bf16GptGradientsEqualFp32AtTheSameWeights). Read back through a CPU fp32
// engine made with the model, whose masters start as the model's values;
// nothing crosses out of device memory on the way, so they are host copies.
TEST(ModelOnDeviceDestroy, ModelKeepsTheFinalWeightsOnTheHost) {
    test_device::HostBackedDevice device;
    for (const Case& c : {Case{"fp32", 1, 1, "none", "none"}, Case{"bf16", 2, 1, "none", "none"},
                          Case{"bf16", 2, 1, "cpu", "none"}}) {
        SCOPED_TRACE(::testing::PrintToString(c));
        ds_model_t* m = nullptr;
        ASSERT_EQ(ds_model_create(kGpt, &m), DS_OK) << ds_last_error();
        std::vector<std::vector<float>> want;
        {
            EngineGuard d{create_with(m, config(c), kCuda0)};
            ASSERT_NE(d.e, nullptr);
            for (int k = 0; k < 2; ++k) train_micro_step(d.e, k, kCpu);
            want = fp32_masters(d.e);
        }
        if (std::string(c.dtype) == "bf16")
            for (auto& w : want) w = through_bf16(w);
        device.reset_counts();
        EngineGuard h{create_with(m, config(Case{"fp32", 0, 1, "none", "none"}), kCpu)};
        ds_model_destroy(m);
        ASSERT_NE(h.e, nullptr);
        EXPECT_EQ(device.copies_from_device(), 0);
        const auto got = fp32_masters(h.e);
        ASSERT_EQ(got.size(), want.size());
        for (size_t p = 0; p < want.size(); ++p) {
            ASSERT_EQ(got[p].size(), want[p].size()) << "parameter " << p;
            EXPECT_EQ(std::memcmp(got[p].data(), want[p].data(), want[p].size() * sizeof(float)), 0)
                << "parameter " << p;
        }
    }
}

// A device-resident micro-step moves its batch to the device and nothing
// else: the weights, gradients and activations never cross. A ZeRO-Offload
// one adds the refreshed weights (one copy; its gradients come to the host).
TEST(ModelOnDeviceCopies, AMicroStepMovesOnlyItsBatch) {
    test_device::HostBackedDevice device;
    for (const char* dtype : {"fp32", "bf16"}) {
        SCOPED_TRACE(dtype);
        EngineGuard d{create_with_model(config(Case{dtype, 1, 1, "none", "none"}), kCuda0)};
        ASSERT_NE(d.e, nullptr);
        device.reset_counts();
        train_micro_step(d.e, 0, kCpu);
        // ids and targets (int32 [2, 8]) and the positions (int64 [8]).
        EXPECT_EQ(device.copies_to_device(), 3);
        EXPECT_EQ(device.bytes_to_device(), size_t(2 * kB * kT * 4 + kT * 8));
    }
    // ZeRO-Offload: the batch, then the updated working weights in one copy after the step.
    EngineGuard o{create_with_model(config(Case{"bf16", 2, 1, "cpu", "none"}), kCuda0)};
    ASSERT_NE(o.e, nullptr);
    device.reset_counts();
    train_micro_step(o.e, 0, kCpu);
    EXPECT_EQ(device.copies_to_device(), 4);
}

// MoE layers on the device (nn/moe_device.cpp: the gating on the host, the
// dispatch and combine by the device's row kernels) train as on the CPU, bit
// for bit: top-1 with tokens dropped for capacity and random token
// selection, top-2, RSample, the residual MoE, the Jitter gate (its factors
// drawn on the device, the CPU's numbers); fp32 and bf16, device-resident
// and ZeRO-Offload, with activation checkpointing.
TEST(ModelOnDeviceMoe, TrainsLikeTheCpuEngine) {
    const char* top1 = R"({"type": "gpt", "vocab_size": 32, "block_size": 8, "n_layer": 2, "n_head": 2,
        "n_embd": 16, "dropout": 0.1, "seed": 5, "moe": {"num_experts": 4, "every": 1, "capacity_factor": 0.5,
        "min_capacity": 2}})";
    const char* top2 = R"({"type": "gpt", "vocab_size": 32, "block_size": 8, "n_layer": 2, "n_head": 2,
        "n_embd": 16, "dropout": 0.1, "seed": 5, "moe": {"num_experts": 3, "k": 2, "every": 2}})";
    const char* rsample_residual = R"({"type": "gpt", "vocab_size": 32, "block_size": 8, "n_layer": 2,
        "n_head": 2, "n_embd": 16, "dropout": 0.0, "seed": 6, "moe": {"num_experts": 2, "every": 1,
        "noisy_gate_policy": "RSample", "use_residual": true, "use_rts": false}})";
    const char* jitter = R"({"type": "gpt", "vocab_size": 32, "block_size": 8, "n_layer": 2, "n_head": 2,
        "n_embd": 16, "dropout": 0.1, "seed": 7, "moe": {"num_experts": 4, "every": 1, "capacity_factor": 0.5,
        "min_capacity": 2, "noisy_gate_policy": "Jitter"}})";
    const char* jitter_top2_residual = R"({"type": "gpt", "vocab_size": 32, "block_size": 8, "n_layer": 2,
        "n_head": 2, "n_embd": 16, "dropout": 0.0, "seed": 8, "moe": {"num_experts": 3, "k": 2, "every": 1,
        "noisy_gate_policy": "Jitter", "use_residual": true}})";
    for (const char* spec : {top1, top2, rsample_residual, jitter, jitter_top2_residual}) {
        SCOPED_TRACE(spec);
        expect_trains_alike(Case{"fp32", 1, 1, "none", "none"}, spec);
        expect_trains_alike(Case{"bf16", 2, 2, "none", "gpu"}, spec);
        expect_trains_alike(Case{"bf16", 2, 1, "cpu", "none"}, spec);
    }
    // The device path ran (on host-backed memory the CPU path would run too):
    // besides the batch (3 copies), each MoE layer's routes (rows and
    // weights) cross to the device in its forward and the gate's d logits in
    // its backward. Jitter adds no copy: its factors are drawn on the device.
    for (const char* spec : {top1, jitter}) {
        SCOPED_TRACE(spec);
        test_device::HostBackedDevice device;
        EngineGuard d{create_with_model(config(Case{"fp32", 1, 1, "none", "none"}), kCuda0, spec)};
        train_micro_step(d.e, 0, kCpu);
        device.reset_counts();
        train_micro_step(d.e, 1, kCpu);
        EXPECT_EQ(device.copies_to_device(), 3 + 2 * 3);
    }
}

// Inputs on another device, or strided in device memory, are named.
TEST(ModelOnDeviceRefusals, InputsOnAnotherDevice) {
    test_device::HostBackedDevice device;
    EngineGuard d{create_with_model(config(Case{"fp32", 1, 1, "none", "none"}), kCuda0)};
    ASSERT_NE(d.e, nullptr);
    Batch b(0);
    DLTensor in[2] = {b.ids_on(DLDevice{kDLCUDA, 1}), b.targets_on(kCpu)};
    float loss = 0.0f;
    DLTensor lo{&loss, kCpu, 0, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
    EXPECT_EQ(ds_forward(d.e, in, 2, &lo), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(ds_last_error(), "inputs[0]"), nullptr) << ds_last_error();
    int64_t strides[2] = {1, kB};  // column-major
    in[0] = b.ids_on(kCuda0);
    in[0].strides = strides;
    EXPECT_EQ(ds_forward(d.e, in, 2, &lo), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(ds_last_error(), "contiguous"), nullptr) << ds_last_error();
    EXPECT_TRUE(std::isfinite(train_micro_step(d.e, 0, kCpu)));  // nothing was kept from the refused calls
}

}  // namespace
