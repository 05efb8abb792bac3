// Parameters on NVMe (zero_optimization.offload_param.device "nvme", ZeRO-3)
// in a world of one: 20 steps with the working partition swapped out
// between uses (max_in_cpu 0) are bit-identical to the same engine with
// every parameter kept in memory (max_in_cpu covering all) and to the
// in-memory engine, for AdamW in fp32 and bf16, with and without NVMe
// optimizer state; the memory report shows only the pages in use; faults
// name the file and lose nothing; bad settings are named.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "api_test_util.h"
#include "deepspeed_c.h"
#include "nvme_test_util.h"
#include "zero/aio_fault.h"
#include "zero/aio_file.h"

namespace {

using namespace nvme_test;  // TempDir, engine_json, nvme_section, FileSizeLimit, ParamEngine

constexpr auto f32 = &api_test::f32_tensor;
const std::vector<int64_t> kSizes = {70000, 7, 3001, 50000, 1000};

// `param`: the offload_param section ("" = none); `opt`: an
// offload_optimizer section ("" = none).
std::string config(const char* precision, const std::string& param, const std::string& opt = "") {
    std::string zero = "\"stage\": 3, \"param_persistence_threshold\": 0";
    if (!param.empty()) zero += ", \"offload_param\": " + param;
    if (!opt.empty()) zero += ", \"offload_optimizer\": " + opt;
    return engine_json(kAdamW, precision, zero);
}

std::string param_nvme(const std::string& path, int64_t max_in_cpu, int64_t buffer_count = 2) {
    return nvme_section(path, ", \"max_in_cpu\": " + std::to_string(max_in_cpu) +
                                  ", \"buffer_count\": " + std::to_string(buffer_count));
}

struct Trainer : ParamEngine {
    explicit Trainer(const std::string& json) : ParamEngine(json, kSizes) {}
    // One step: each parameter gathered, its gradient computed from its
    // weights, released (the order a forward would use them).
    void train_step() {
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (size_t i = 0; i < kSizes.size(); ++i) {
            const std::string n = name(i);
            const char* names[] = {n.c_str()};
            ASSERT_EQ(ds_engine_gather(e, names, 1), DS_OK) << ds_last_error();
            DLTensor w;
            ASSERT_EQ(ds_engine_param_view(e, n.c_str(), &w), DS_OK) << ds_last_error();
            std::vector<float> g(static_cast<size_t>(kSizes[i]));
            for (size_t j = 0; j < g.size(); ++j) {
                const float wj = w.dtype.bits == 32 ? static_cast<const float*>(w.data)[j]
                                                    : bf16(static_cast<const uint16_t*>(w.data)[j]);
                g[j] = 0.05f * (wj - 0.25f) + 0.02f * nd(rng);
            }
            ASSERT_EQ(ds_engine_release(e, names, 1), DS_OK);
            int64_t shape = kSizes[i];
            DLTensor t = f32(g.data(), &shape, 1);
            ASSERT_EQ(ds_engine_accumulate_grad(e, n.c_str(), &t), DS_OK) << ds_last_error();
        }
        ASSERT_EQ(ds_backward(e, nullptr), DS_OK) << ds_last_error();
        ASSERT_EQ(ds_step(e, nullptr), DS_OK) << ds_last_error();
    }
    static float bf16(uint16_t h) {
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
    }
    // Gathered working weights, fp32 master and both moments, as bytes.
    std::vector<uint8_t> snapshot() { return ParamEngine::snapshot({"exp_avg", "exp_avg_sq"}, /*gather=*/true); }
};

int64_t total_numel() {
    int64_t n = 0;
    for (int64_t s : kSizes) n += s;
    return n;
}

TEST(OffloadParam, SwappedBitIdenticalToResidentAndInMemory) {
    TempDir dir;
    for (const char* prec : {kFp32, kBf16}) {
        for (bool opt_nvme : {false, true}) {
            const std::string opt = opt_nvme ? nvme_section(dir.path) : "";
            Trainer swapped(config(prec, param_nvme(dir.path, 0), opt));
            Trainer resident(config(prec, param_nvme(dir.path, 1000000000), opt));
            Trainer memory(config(prec, "", opt));
            ASSERT_EQ(swapped.init_status, DS_OK) << ds_last_error();
            ASSERT_EQ(resident.init_status, DS_OK) << ds_last_error();
            for (int s = 0; s < 20; ++s) {
                swapped.train_step();
                resident.train_step();
                memory.train_step();
            }
            const std::vector<uint8_t> a = swapped.snapshot(), b = resident.snapshot(), c = memory.snapshot();
            const char* what = prec[0] ? "bf16" : "fp32";
            EXPECT_EQ(a, b) << what << (opt_nvme ? " + optimizer on NVMe" : "");
            EXPECT_EQ(a, c) << what << (opt_nvme ? " + optimizer on NVMe" : "") << " vs the in-memory engine";
        }
    }
}

TEST(OffloadParam, ResidentBytesAreThePagesInUse) {
    TempDir dir;
    for (const char* prec : {kFp32, kBf16}) {
        const int64_t wes = prec[0] ? 2 : 4;
        Trainer swapped(config(prec, param_nvme(dir.path, 0)));
        Trainer memory(config(prec, ""));
        ASSERT_EQ(swapped.init_status, DS_OK) << ds_last_error();
        swapped.train_step();
        memory.train_step();
        const ds_memory_report_t ms = swapped.report(false), mm = memory.report(false), ds = swapped.report(true);
        // The working partition (one chunk per parameter: the whole of it in
        // a world of one) is on disk; in memory only the two partial pages at
        // its ends remain.
        const int64_t working = total_numel() * wes;
        EXPECT_GE(ds.params_bytes, working - 2 * 4096);
        // In memory: the fp32 master (and in fp32 the working copy is now a
        // separate buffer, all but two pages of it out).
        const int64_t in_memory_params = mm.params_bytes + (prec[0] ? 0 : working);  // fp32: a second buffer
        EXPECT_LE(ms.params_bytes, in_memory_params - working + 2 * 4096);
        EXPECT_GE(ms.params_bytes, in_memory_params - working);
        std::printf("offload_param %s: working partition %lld bytes on disk, params in memory %lld bytes (in-memory "
                    "engine %lld)\n",
                    prec[0] ? "bf16" : "fp32", static_cast<long long>(ds.params_bytes),
                    static_cast<long long>(ms.params_bytes), static_cast<long long>(mm.params_bytes));
        // While a parameter is gathered its whole copy exists and its chunk
        // is out again; the chunks of the (buffer_count = 2) parameters that
        // followed it last step may be in memory, prefetched.
        const int64_t prefetch = (kSizes[1] + kSizes[2]) * wes + 4 * 4096;
        const char* names[] = {"p0"};
        ASSERT_EQ(ds_engine_gather(swapped.e, names, 1), DS_OK);
        const int64_t gathered = swapped.report(false).params_bytes;
        EXPECT_GE(gathered, ms.params_bytes + kSizes[0] * wes);
        EXPECT_LE(gathered, ms.params_bytes + kSizes[0] * wes + prefetch);
        ASSERT_EQ(ds_engine_release(swapped.e, names, 1), DS_OK);
        EXPECT_LE(swapped.report(false).params_bytes, ms.params_bytes + prefetch);
        swapped.train_step();  // the step's write-back gives everything back
        EXPECT_EQ(swapped.report(false).params_bytes, ms.params_bytes);
    }
}

TEST(OffloadParam, MaxInCpuKeepsTheFirstParametersResident) {
    TempDir dir;
    // max_in_cpu = p0's elements: p0 stays, the rest (from the first that no longer fits) swap.
    Trainer t(config(kBf16, param_nvme(dir.path, kSizes[0])));
    Trainer all_out(config(kBf16, param_nvme(dir.path, 0)));
    ASSERT_EQ(t.init_status, DS_OK) << ds_last_error();
    t.train_step();
    all_out.train_step();
    const int64_t kept = t.report(false).params_bytes - all_out.report(false).params_bytes;
    EXPECT_GE(kept, 2 * kSizes[0] - 2 * 4096);
    EXPECT_LE(kept, 2 * kSizes[0] + 2 * 4096);
}

TEST(OffloadParam, FailedWriteBackKeepsTheStepAndRecovers) {
    TempDir dir;
    Trainer a(config(kBf16, param_nvme(dir.path, 0))), b(config(kBf16, ""));
    ASSERT_EQ(a.init_status, DS_OK) << ds_last_error();
    a.train_step();
    b.train_step();
    const int64_t out_before = a.report(false).params_bytes;
    // The step's write-back fails: every page stays in memory, nothing is lost.
    ds::zero::aio_fail_nth_write(1);
    a.train_step();
    ds::zero::aio_fail_nth_write(0);
    b.train_step();
    EXPECT_GT(a.report(false).params_bytes, out_before) << "the pages stayed";
    a.train_step();  // the next write-back succeeds: out again
    b.train_step();
    EXPECT_EQ(a.report(false).params_bytes, out_before);
    EXPECT_EQ(a.snapshot(), b.snapshot());
}

// A read error while a gather swaps a chunk in: DS_ERR_IO naming the file;
// the chunk stays on disk and the same gather then works; nothing is lost.
TEST(OffloadParam, FailedReadIsNamedAndTheGatherWorksAgain) {
    TempDir dir;
    Trainer a(config(kBf16, param_nvme(dir.path, 0))), b(config(kBf16, ""));
    ASSERT_EQ(a.init_status, DS_OK) << ds_last_error();
    a.train_step();
    b.train_step();
    const char* names[] = {"p0"};
    ds::zero::aio_fail_nth_read(1);
    const ds_status_t s = ds_engine_gather(a.e, names, 1);
    const std::string msg = ds_last_error();
    ds::zero::aio_fail_nth_read(0);
    EXPECT_EQ(s, DS_ERR_IO);
    EXPECT_NE(msg.find(dir.path + "/ds_swap/params-rank0-"), std::string::npos) << msg;
    ASSERT_EQ(ds_engine_gather(a.e, names, 1), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_engine_release(a.e, names, 1), DS_OK);
    a.train_step();
    b.train_step();
    EXPECT_EQ(a.snapshot(), b.snapshot());
}

TEST(OffloadParam, FullDiskAtInitNamesTheFile) {
    TempDir dir;
    FileSizeLimit full_disk(64 * 1024);
    Trainer t(config(kBf16, param_nvme(dir.path, 0)));
    const std::string msg = ds_last_error();
    full_disk.lift();
    EXPECT_EQ(t.init_status, DS_ERR_IO);
    EXPECT_NE(msg.find(dir.path + "/ds_swap/params-rank0-"), std::string::npos) << msg;
}

TEST(OffloadParam, BadSettingsAreNamed) {
    TempDir dir;
    auto create_status = [](const std::string& json, std::string* msg) {
        ds_engine_t* e = nullptr;
        ds_status_t s = ds_engine_create(json.c_str(), nullptr, &e);
        *msg = ds_last_error();
        ds_engine_destroy(e);
        return s;
    };
    std::string msg;
    std::string below = config(kFp32, param_nvme(dir.path, 0));
    below.replace(below.find("\"stage\": 3"), 10, "\"stage\": 2");
    EXPECT_EQ(create_status(below, &msg), DS_ERR_UNSUPPORTED);
    EXPECT_NE(msg.find("zero_optimization.offload_param.device"), std::string::npos) << msg;
    Trainer small(config(kFp32, nvme_section(dir.path, ", \"max_in_cpu\": 0, \"buffer_size\": 1000")));
    EXPECT_EQ(small.init_status, DS_ERR_INVALID_CONFIG);
    msg = ds_last_error();
    EXPECT_NE(msg.find("zero_optimization.offload_param.buffer_size = 1000"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'p0'"), std::string::npos) << msg;
}

TEST(OffloadParam, CheckpointAndSetFullThroughTheSwap) {
    TempDir dir, ck;
    Trainer a(config(kBf16, param_nvme(dir.path, 0))), b(config(kBf16, ""));
    ASSERT_EQ(a.init_status, DS_OK) << ds_last_error();
    for (int s = 0; s < 3; ++s) {
        a.train_step();
        b.train_step();
    }
    // set_full on a swapped-out parameter: the next gather sees it.
    std::vector<float> v(static_cast<size_t>(kSizes[3]));
    for (size_t j = 0; j < v.size(); ++j) v[j] = 0.001f * static_cast<float>(j % 997);
    int64_t shape = kSizes[3];
    DLTensor t = f32(v.data(), &shape, 1);
    ASSERT_EQ(ds_engine_set_full_fp32_param(a.e, "p3", &t), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_engine_set_full_fp32_param(b.e, "p3", &t), DS_OK) << ds_last_error();
    EXPECT_EQ(a.snapshot(), b.snapshot());
    ASSERT_EQ(ds_save_checkpoint(a.e, ck.path.c_str(), "swapped", nullptr), DS_OK) << ds_last_error();
    Trainer c(config(kBf16, ""));
    ASSERT_EQ(ds_load_checkpoint(c.e, ck.path.c_str(), "swapped", 0, nullptr), DS_OK) << ds_last_error();
    Trainer d(config(kBf16, param_nvme(dir.path, 0)));
    ASSERT_EQ(ds_load_checkpoint(d.e, ck.path.c_str(), "swapped", 0, nullptr), DS_OK) << ds_last_error();
    const std::vector<uint8_t> want = a.snapshot();
    EXPECT_EQ(c.snapshot(), want) << "loaded without parameter swapping";
    EXPECT_EQ(d.snapshot(), want) << "loaded into a swapped engine";
    d.rng = a.rng;  // the same gradients from here on
    a.train_step();
    d.train_step();
    EXPECT_EQ(a.snapshot(), d.snapshot());
}

}  // namespace
