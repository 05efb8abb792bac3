// ds_engine_offload_states / ds_engine_reload_states /
// ds_engine_empty_partition_cache (DeepSpeed's offload_states,
// reload_states, empty_partition_cache) in a world of one: training with the
// states moved to NVMe and back around every evaluation is bit-identical to
// training without; the memory report drops by the bytes the disk report
// shows; the calls that would read an offloaded state name the reload; a
// full disk or a failed write leaves every state in memory and usable;
// deleting the swap directory under the engine loses nothing.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "api_test_util.h"
#include "deepspeed_c.h"
#include "nvme_test_util.h"
#include "zero/aio_fault.h"
#include "zero/aio_file.h"

namespace {

using namespace nvme_test;  // TempDir, engine_json, nvme_section, FileSizeLimit, ParamEngine

constexpr auto f32 = &api_test::f32_tensor;
// One parameter over 1 MiB (its buffers are whole pages), two small ones.
const std::vector<int64_t> kSizes = {300000, 7, 1000};

std::string config(const char* precision, const std::string& zero_extra = "") {
    return engine_json(kAdamW, precision, "\"stage\": 0" + zero_extra);
}

struct Trainer : ParamEngine {
    explicit Trainer(const std::string& json) : ParamEngine(json, kSizes) {
        EXPECT_EQ(init_status, DS_OK) << ds_last_error();
    }
    // One micro-batch: gradients from the working weights, backward, step.
    void train_step() {
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (size_t i = 0; i < kSizes.size(); ++i) {
            DLTensor w;
            ASSERT_EQ(ds_engine_param_view(e, name(i).c_str(), &w), DS_OK) << ds_last_error();
            std::vector<float> g(static_cast<size_t>(kSizes[i]));
            for (size_t j = 0; j < g.size(); ++j) g[j] = 0.1f * nd(rng) + 0.01f * static_cast<float>(j % 13);
            int64_t shape = kSizes[i];
            DLTensor t = f32(g.data(), &shape, 1);
            ASSERT_EQ(ds_engine_accumulate_grad(e, name(i).c_str(), &t), DS_OK) << ds_last_error();
        }
        ASSERT_EQ(ds_backward(e, nullptr), DS_OK) << ds_last_error();
        ASSERT_EQ(ds_step(e, nullptr), DS_OK) << ds_last_error();
    }
    // An "evaluation": a checksum of the working weights (what a forward reads).
    double evaluate() {
        double s = 0;
        for (size_t i = 0; i < kSizes.size(); ++i) {
            DLTensor w;
            EXPECT_EQ(ds_engine_param_view(e, name(i).c_str(), &w), DS_OK) << ds_last_error();
            const size_t bytes = static_cast<size_t>(kSizes[i]) * w.dtype.bits / 8;
            const uint8_t* b = static_cast<const uint8_t*>(w.data);
            for (size_t j = 0; j < bytes; ++j) s += b[j] * static_cast<double>(j % 7 + 1);
        }
        return s;
    }
};

// 20 steps, an evaluation every 5; `around_eval` runs before and after each.
std::vector<uint8_t> train_with_evals(const std::string& json, std::vector<double>* evals,
                                      uint32_t offload_which, const std::string& nvme) {
    Trainer t(json);
    for (int s = 1; s <= 20; ++s) {
        t.train_step();
        if (s % 5) continue;
        if (offload_which != 0xffffffffu)
            EXPECT_EQ(ds_engine_offload_states(t.e, offload_which, DS_OFFLOAD_DEVICE_NVME, nvme.c_str()), DS_OK)
                << ds_last_error();
        evals->push_back(t.evaluate());
        if (offload_which != 0xffffffffu) EXPECT_EQ(ds_engine_reload_states(t.e), DS_OK) << ds_last_error();
    }
    return t.snapshot();
}

TEST(OffloadStates, AroundEvaluationBitIdenticalFp32AndBf16) {
    TempDir dir;
    const uint32_t eval_safe = DS_OFFLOAD_OPTIM_STATES | DS_OFFLOAD_HP_PARAMS | DS_OFFLOAD_LP_GRADS;
    for (const char* prec : {kFp32, kBf16}) {
        std::vector<double> ref_evals, off_evals;
        const std::vector<uint8_t> ref = train_with_evals(config(prec), &ref_evals, 0xffffffffu, dir.path);
        const std::vector<uint8_t> off = train_with_evals(config(prec), &off_evals, eval_safe, dir.path);
        ASSERT_EQ(ref.size(), off.size());
        EXPECT_EQ(std::memcmp(ref.data(), off.data(), ref.size()), 0) << (prec[0] ? "bf16" : "fp32");
        EXPECT_EQ(ref_evals, off_evals);
        ASSERT_EQ(ref_evals.size(), 4u);
    }
}

TEST(OffloadStates, EverythingOutThenBackBitIdentical) {
    TempDir dir;
    for (const char* prec : {kFp32, kBf16}) {
        Trainer a(config(prec)), b(config(prec));
        for (int s = 0; s < 6; ++s) {
            a.train_step();
            b.train_step();
            ASSERT_EQ(ds_engine_offload_states(b.e, 0, DS_OFFLOAD_DEVICE_NVME, dir.path.c_str()), DS_OK)
                << ds_last_error();
            ASSERT_EQ(ds_engine_reload_states(b.e), DS_OK) << ds_last_error();
        }
        EXPECT_EQ(a.snapshot(), b.snapshot()) << (prec[0] ? "bf16" : "fp32");
    }
}

TEST(OffloadStates, MemoryReportDropsByTheBytesOnDisk) {
    TempDir dir;
    for (const char* prec : {kFp32, kBf16}) {
        Trainer t(config(prec));
        t.train_step();
        const ds_memory_report_t before = t.memory();
        EXPECT_EQ(t.disk().total_bytes, 0);
        ASSERT_EQ(ds_engine_offload_states(t.e, 0, DS_OFFLOAD_DEVICE_NVME, dir.path.c_str()), DS_OK) << ds_last_error();
        const ds_memory_report_t mem = t.memory(), disk = t.disk();
        // What moved: the moments (2 x 4 bytes per element), the gradients
        // (in the accumulation dtype: bf16 with bf16), the working weights
        // (4 or 2 bytes) and, in bf16, the separate fp32 master. The flat
        // buffers are padded: >= numel.
        int64_t numel = 0;
        for (int64_t n : kSizes) numel += n;
        const bool bf16 = prec[0] != '\0';
        EXPECT_GE(disk.optimizer_state_bytes, 8 * numel);
        EXPECT_GE(disk.grads_bytes, (bf16 ? 2 : 4) * numel);
        EXPECT_GE(disk.params_bytes, (bf16 ? 6 : 4) * numel);
        EXPECT_EQ(disk.total_bytes, disk.params_bytes + disk.grads_bytes + disk.optimizer_state_bytes);
        // Memory: whole pages inside each buffer are released (all of a
        // page-aligned buffer; at most two partial pages less per buffer).
        const int64_t slack = 2 * 4096 * 5;
        for (auto [b, m, d] : {std::tuple{before.params_bytes, mem.params_bytes, disk.params_bytes},
                               std::tuple{before.grads_bytes, mem.grads_bytes, disk.grads_bytes},
                               std::tuple{before.optimizer_state_bytes, mem.optimizer_state_bytes,
                                          disk.optimizer_state_bytes}}) {
            EXPECT_LE(b - m, d);
            EXPECT_GE(b - m, d - slack);
        }
        EXPECT_EQ(mem.total_bytes, before.total_bytes - (before.params_bytes - mem.params_bytes) -
                                       (before.grads_bytes - mem.grads_bytes) -
                                       (before.optimizer_state_bytes - mem.optimizer_state_bytes));
        std::printf("offload_states %s: %lld bytes on disk, memory %lld -> %lld bytes\n", bf16 ? "bf16" : "fp32",
                    static_cast<long long>(disk.total_bytes), static_cast<long long>(before.total_bytes),
                    static_cast<long long>(mem.total_bytes));
        ASSERT_EQ(ds_engine_reload_states(t.e), DS_OK) << ds_last_error();
        EXPECT_EQ(t.memory().total_bytes, before.total_bytes);
        EXPECT_EQ(t.disk().total_bytes, 0);
    }
}

TEST(OffloadStates, CallsThatReadAnOffloadedStateNameTheReload) {
    TempDir dir;
    Trainer t(config(kBf16));
    t.train_step();
    ASSERT_EQ(ds_engine_offload_states(t.e, DS_OFFLOAD_OPTIM_STATES | DS_OFFLOAD_HP_PARAMS, DS_OFFLOAD_DEVICE_NVME,
                                       dir.path.c_str()),
              DS_OK);
    DLTensor w;
    EXPECT_EQ(ds_engine_param_view(t.e, "p0", &w), DS_OK) << "the working weights are still in memory";
    EXPECT_EQ(ds_engine_grad_view(t.e, "p0", &w), DS_OK);
    std::vector<float> g(static_cast<size_t>(kSizes[0]), 0.5f);
    int64_t shape = kSizes[0];
    DLTensor gt = f32(g.data(), &shape, 1);
    auto refused = [&](ds_status_t s, const char* call, const char* what) {
        EXPECT_EQ(s, DS_ERR_INVALID_STATE) << call;
        const std::string msg = ds_last_error();
        EXPECT_NE(msg.find(call), std::string::npos) << msg;
        EXPECT_NE(msg.find(what), std::string::npos) << msg;
        EXPECT_NE(msg.find("ds_engine_reload_states"), std::string::npos) << msg;
    };
    refused(ds_engine_accumulate_grad(t.e, "p0", &gt), "ds_engine_accumulate_grad", "optimizer states");
    refused(ds_backward(t.e, nullptr), "ds_backward", "fp32 master weights");
    refused(ds_step(t.e, nullptr), "ds_step", "optimizer states");
    refused(ds_engine_get_full_fp32_param(t.e, "p0", &gt), "ds_engine_get_full", "fp32 master weights");
    refused(ds_save_checkpoint(t.e, dir.path.c_str(), "t", nullptr), "ds_save_checkpoint", "optimizer states");
    // More states out later: the working weights and gradients too.
    ASSERT_EQ(ds_engine_offload_states(t.e, 0, DS_OFFLOAD_DEVICE_NVME, dir.path.c_str()), DS_OK) << ds_last_error();
    refused(ds_engine_param_view(t.e, "p0", &w), "ds_engine_param_view", "working weights");
    refused(ds_engine_grad_view(t.e, "p0", &w), "ds_engine_grad_view", "gradients");
    const char* names[] = {"p0"};
    refused(ds_engine_gather(t.e, names, 1), "ds_engine_gather", "working weights");
    EXPECT_EQ(ds_engine_release(t.e, nullptr, 0), DS_OK);
    EXPECT_EQ(ds_engine_empty_partition_cache(t.e), DS_OK);
    ASSERT_EQ(ds_engine_reload_states(t.e), DS_OK) << ds_last_error();
    EXPECT_EQ(ds_engine_reload_states(t.e), DS_OK) << "nothing out: a no-op";
    t.train_step();  // usable again
}

// A failure while writing: DS_ERR_IO naming the file; every state stays in
// memory and training goes on exactly as without the attempt.
void expect_failed_offload_changes_nothing(const std::function<void()>& arm, const std::function<void()>& disarm,
                                           const char* what) {
    TempDir dir;
    Trainer a(config(kBf16)), b(config(kBf16));
    for (int s = 0; s < 3; ++s) {
        a.train_step();
        b.train_step();
    }
    const ds_memory_report_t before = b.memory();
    arm();
    const ds_status_t s = ds_engine_offload_states(b.e, 0, DS_OFFLOAD_DEVICE_NVME, dir.path.c_str());
    const std::string msg = ds_last_error();
    disarm();
    EXPECT_EQ(s, DS_ERR_IO) << what;
    EXPECT_NE(msg.find(dir.path + "/ds_swap/offloaded_states-"), std::string::npos) << msg;
    EXPECT_EQ(b.memory().total_bytes, before.total_bytes) << what;
    EXPECT_EQ(b.disk().total_bytes, 0) << what;
    for (int s2 = 0; s2 < 3; ++s2) {
        a.train_step();
        b.train_step();
    }
    EXPECT_EQ(a.snapshot(), b.snapshot()) << what;
}

TEST(OffloadStates, FullDiskLeavesEveryStateInMemory) {
    std::optional<FileSizeLimit> full_disk;
    expect_failed_offload_changes_nothing([&] { full_disk.emplace(64 * 1024); },  // far below the states
                                          [&] { full_disk.reset(); }, "full disk");
}

TEST(OffloadStates, FailedWriteLeavesEveryStateInMemory) {
    expect_failed_offload_changes_nothing([] { ds::zero::aio_fail_nth_write(2); },
                                          [] { ds::zero::aio_fail_nth_write(0); }, "failed write");
}

// A read error while reloading: DS_ERR_IO naming the file; the states stay
// offloaded (training is refused) and the reload can be retried.
TEST(OffloadStates, FailedReloadKeepsThemOutAndCanBeRetried) {
    TempDir dir;
    Trainer a(config(kBf16)), b(config(kBf16));
    a.train_step();
    b.train_step();
    ASSERT_EQ(ds_engine_offload_states(b.e, 0, DS_OFFLOAD_DEVICE_NVME, dir.path.c_str()), DS_OK) << ds_last_error();
    ds::zero::aio_fail_nth_read(1);
    const ds_status_t s = ds_engine_reload_states(b.e);
    const std::string msg = ds_last_error();
    ds::zero::aio_fail_nth_read(0);
    EXPECT_EQ(s, DS_ERR_IO);
    EXPECT_NE(msg.find(dir.path + "/ds_swap/offloaded_states-"), std::string::npos) << msg;
    EXPECT_EQ(ds_step(b.e, nullptr), DS_ERR_INVALID_STATE);
    ASSERT_EQ(ds_engine_reload_states(b.e), DS_OK) << ds_last_error();
    a.train_step();
    b.train_step();
    EXPECT_EQ(a.snapshot(), b.snapshot());
}

TEST(OffloadStates, DeletingTheSwapDirectoryLosesNothing) {
    TempDir dir;
    Trainer a(config(kFp32)), b(config(kFp32));
    a.train_step();
    b.train_step();
    ASSERT_EQ(ds_engine_offload_states(b.e, 0, DS_OFFLOAD_DEVICE_NVME, dir.path.c_str()), DS_OK) << ds_last_error();
    // The file was unlinked at creation: the directory holds nothing to delete.
    ASSERT_EQ(std::system(("rm -rf '" + dir.path + "/ds_swap'").c_str()), 0);
    ASSERT_EQ(ds_engine_reload_states(b.e), DS_OK) << ds_last_error();
    a.train_step();
    b.train_step();
    EXPECT_EQ(a.snapshot(), b.snapshot());
}

TEST(OffloadStates, BadArgumentsAreNamed) {
    TempDir dir;
    Trainer t(config(kFp32));
    auto bad = [&](ds_status_t s, ds_status_t want, const char* needle) {
        EXPECT_EQ(s, want) << needle;
        const std::string msg = ds_last_error();
        EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    };
    bad(ds_engine_offload_states(t.e, 0x40, DS_OFFLOAD_DEVICE_NVME, dir.path.c_str()), DS_ERR_INVALID_ARGUMENT,
        "'which' has unknown bits 0x40");
    bad(ds_engine_offload_states(t.e, 0, 7, dir.path.c_str()), DS_ERR_INVALID_ARGUMENT, "'device' = 7");
    bad(ds_engine_offload_states(t.e, 0, DS_OFFLOAD_DEVICE_NVME, nullptr), DS_ERR_INVALID_ARGUMENT,
        "offload_optimizer.nvme_path");
    const std::string missing = dir.path + "/missing";
    bad(ds_engine_offload_states(t.e, 0, DS_OFFLOAD_DEVICE_NVME, missing.c_str()), DS_ERR_INVALID_ARGUMENT,
        missing.c_str());
    bad(ds_engine_offload_states(nullptr, 0, DS_OFFLOAD_DEVICE_NVME, dir.path.c_str()), DS_ERR_INVALID_HANDLE,
        "engine");
    // CPU: the states already live in host memory; nothing moves.
    const ds_memory_report_t before = t.memory();
    EXPECT_EQ(ds_engine_offload_states(t.e, 0, DS_OFFLOAD_DEVICE_CPU, nullptr), DS_OK);
    EXPECT_EQ(t.memory().total_bytes, before.total_bytes);
    t.train_step();
    // The path from the config when NULL; no reduction buckets in a world of one.
    TempDir nvme;
    Trainer c(config(kFp32, ", \"offload_optimizer\": {\"device\": \"cpu\", \"nvme_path\": \"" + nvme.path + "\"}"));
    EXPECT_EQ(ds_engine_offload_states(c.e, DS_OFFLOAD_CONTIGUOUS_GRAD_BUFFER | DS_OFFLOAD_LP_GRADS,
                                       DS_OFFLOAD_DEVICE_NVME, nullptr),
              DS_OK)
        << ds_last_error();
    EXPECT_GT(c.disk().grads_bytes, 0);
    EXPECT_EQ(ds_engine_reload_states(c.e), DS_OK);
    // Before init.
    ds_engine_t* e = nullptr;
    ASSERT_EQ(ds_engine_create(config(kFp32).c_str(), nullptr, &e), DS_OK);
    bad(ds_engine_offload_states(e, 0, DS_OFFLOAD_DEVICE_NVME, dir.path.c_str()), DS_ERR_INVALID_STATE,
        "before ds_engine_init");
    EXPECT_EQ(ds_engine_reload_states(e), DS_OK);
    EXPECT_EQ(ds_engine_empty_partition_cache(e), DS_OK);
    ds_engine_destroy(e);
}

TEST(OffloadStates, OptimizerStateOnNvmeAlreadyDoesNotMoveAgain) {
    TempDir dir;
    Trainer t(config(kFp32, ", \"offload_optimizer\": " + nvme_section(dir.path)));
    t.train_step();
    const ds_memory_report_t disk0 = t.disk();
    ASSERT_EQ(ds_engine_offload_states(t.e, DS_OFFLOAD_OPTIM_STATES | DS_OFFLOAD_HP_PARAMS, DS_OFFLOAD_DEVICE_NVME,
                                       nullptr),
              DS_OK)
        << ds_last_error();
    EXPECT_EQ(t.disk().total_bytes, disk0.total_bytes) << "nothing of these was in memory";
    t.train_step();  // nothing is out: training goes on
    ASSERT_EQ(ds_engine_offload_states(t.e, DS_OFFLOAD_LP_PARAMS, DS_OFFLOAD_DEVICE_NVME, nullptr), DS_OK);
    EXPECT_GT(t.disk().params_bytes, disk0.params_bytes);
    ASSERT_EQ(ds_engine_reload_states(t.e), DS_OK) << ds_last_error();
    t.train_step();
}

}  // namespace
