// Optimizer state on NVMe (zero_optimization.offload_optimizer.device
// "nvme"): bit-identical to the in-memory engine for every optimizer and
// precision, through each I/O backend and pipeline setting; faults (a
// failed write, a truncated or deleted swap file, a full disk) give
// DS_ERR_IO naming the file and leave the model as it was; swap files are
// removed at destroy and stale ones at the next start.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "api_test_util.h"
#include "deepspeed_c.h"
#include "nvme_test_util.h"
#include "zero/aio_file.h"

namespace {

using namespace nvme_test;  // TempDir, engine_json, nvme_section, FileSizeLimit, ParamEngine

constexpr auto f32 = &api_test::f32_tensor;
const std::vector<int64_t> kSizes = {7, 1000, 3001, 2048, 513};

std::vector<std::string> list_dir(const std::string& d) {
    std::vector<std::string> out;
    if (DIR* h = opendir(d.c_str())) {
        while (const dirent* e = readdir(h))
            if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) out.push_back(e->d_name);
        closedir(h);
    }
    return out;
}

// The one swap file of the one engine under `nvme`.
std::string swap_file(const std::string& nvme) {
    const std::vector<std::string> dirs = list_dir(nvme + "/ds_swap");
    if (dirs.size() != 1) return "";
    return nvme + "/ds_swap/" + dirs[0] + "/optimizer_state.swp";
}

struct Case {
    const char* optimizer;  // the "optimizer" section
    const char* precision;  // "" or an fp16/bf16 section
    const char* states[2];  // optimizer state names (nullptr-terminated)
};

std::string config(const Case& c, const std::string& offload) {
    std::string zero = "\"stage\": 1, \"sub_group_size\": 2048";
    if (!offload.empty()) zero += ", \"offload_optimizer\": " + offload;
    return engine_json(std::string("\"zero_allow_untested_optimizer\": true, \"optimizer\": ") + c.optimizer,
                       c.precision, zero, ", \"aio\": {\"block_size\": 8192, \"queue_depth\": 4}");
}

struct Trainer : ParamEngine {
    explicit Trainer(const std::string& json) : ParamEngine(json, kSizes) {
        EXPECT_EQ(init_status, DS_OK) << ds_last_error();
    }
    // One window's gradients (an Inf at `bad_step` for the overflow skip).
    void grads(int step, int bad_step, float scale) {
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (size_t i = 0; i < kSizes.size(); ++i) {
            std::vector<float> g(static_cast<size_t>(kSizes[i]));
            for (float& x : g) x = scale * nd(rng);
            if (step == bad_step && i == 1) g[3] = INFINITY;
            int64_t shape = kSizes[i];
            DLTensor t = f32(g.data(), &shape, 1);
            ASSERT_EQ(ds_engine_accumulate_grad(e, name(i).c_str(), &t), DS_OK) << ds_last_error();
        }
        ASSERT_EQ(ds_backward(e, nullptr), DS_OK);
    }
    ds_status_t step(ds_step_info_t* info) {
        info->struct_size = sizeof *info;
        return ds_step(e, info);
    }
    // Working weights, fp32 master and every state of c's optimizer, as bytes.
    std::vector<uint8_t> snapshot(const Case& c) {
        std::vector<const char*> states;
        for (const char* st : c.states)
            if (st) states.push_back(st);
        return ParamEngine::snapshot(states);
    }
};

const Case kCases[] = {
    {"{\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.1}}", "", {"exp_avg", "exp_avg_sq"}},
    {"{\"type\": \"Adam\", \"params\": {\"lr\": 0.01, \"adam_w_mode\": false, \"weight_decay\": 0.01}}", "",
     {"exp_avg", "exp_avg_sq"}},
    {"{\"type\": \"Lion\", \"params\": {\"lr\": 0.001}}", "", {"exp_avg", nullptr}},
    {"{\"type\": \"SGD\", \"params\": {\"lr\": 0.1, \"momentum\": 0.9}}", "", {"momentum_buffer", nullptr}},
    {"{\"type\": \"Lamb\", \"params\": {\"lr\": 0.01}}", "", {"exp_avg", "exp_avg_sq"}},
};
const char* const kPrecisions[] = {kFp32, kBf16, "\"fp16\": {\"enabled\": true, \"initial_scale_power\": 8}"};

// 20 steps of the in-memory engine and of the offloaded one, the same
// gradients: every byte of weights, master and state equal after each.
void expect_identical(const Case& c, const char* precision, const std::string& extra, int steps = 20) {
    TempDir dir;
    Case k = c;
    k.precision = precision;
    const bool fp16 = std::strstr(precision, "fp16") != nullptr;
    Trainer ref(config(k, "")), off(config(k, nvme_section(dir.path, extra)));
    ASSERT_TRUE(ref.e && off.e);
    int skipped = 0;
    for (int s = 0; s < steps; ++s) {
        const int bad = fp16 ? 5 : -1;
        ref.grads(s, bad, fp16 ? 256.0f : 1.0f);
        off.grads(s, bad, fp16 ? 256.0f : 1.0f);
        ds_step_info_t a, b;
        ASSERT_EQ(ref.step(&a), DS_OK) << ds_last_error();
        ASSERT_EQ(off.step(&b), DS_OK) << ds_last_error();
        ASSERT_EQ(a.skipped, b.skipped);
        skipped += b.skipped;
        ASSERT_EQ(ref.snapshot(k), off.snapshot(k)) << c.optimizer << " " << precision << " step " << s;
    }
    if (fp16) EXPECT_EQ(skipped, 1);
}

TEST(ZeroNvmeOffload, BitIdenticalForEveryOptimizerAndPrecision) {
    for (const Case& c : kCases)
        for (const char* p : kPrecisions) {
            SCOPED_TRACE(std::string(c.optimizer) + " " + p);
            expect_identical(c, p, "");
        }
}

TEST(ZeroNvmeOffload, PipelinesAndBufferCounts) {
    for (const char* extra : {", \"buffer_count\": 1, \"pipeline_read\": true, \"pipeline_write\": true",
                              ", \"buffer_count\": 2, \"pipeline_read\": true",
                              ", \"buffer_count\": 3, \"pipeline_read\": true, \"pipeline_write\": true",
                              ", \"buffer_count\": 2, \"pipeline_write\": true"}) {
        SCOPED_TRACE(extra);
        expect_identical(kCases[0], kPrecisions[1], extra, 6);
    }
}

TEST(ZeroNvmeOffload, EachIoBackend) {
    for (const char* backend : {"uring", "libaio", "pread"}) {
        std::string why;
        if (!ds::zero::make_aio_backend_named(backend, {}, &why)) {
            std::printf("[  SKIPPED ] I/O backend %s: %s\n", backend, why.c_str());
            continue;
        }
        SCOPED_TRACE(backend);
        setenv("DS_AIO_BACKEND", backend, 1);
        expect_identical(kCases[0], kPrecisions[0], "", 4);
        unsetenv("DS_AIO_BACKEND");
    }
}

TEST(ZeroNvmeOffload, UnavailableForcedBackendIsNamed) {
    TempDir dir;
    setenv("DS_AIO_BACKEND", "floppy", 1);
    ds_engine_t* e = nullptr;
    const std::string json = config(kCases[0], nvme_section(dir.path));
    ASSERT_EQ(ds_engine_create(json.c_str(), nullptr, &e), DS_OK);
    int64_t shape = 4;
    float v[4] = {1, 2, 3, 4};
    DLTensor t = f32(v, &shape, 1);
    ASSERT_EQ(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE), DS_OK);
    EXPECT_EQ(ds_engine_init(e), DS_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(ds_last_error()).find("DS_AIO_BACKEND=floppy"), std::string::npos) << ds_last_error();
    unsetenv("DS_AIO_BACKEND");
    ds_engine_destroy(e);
}

// A write that fails in the middle of a step (sub-groups before it already
// updated): DS_ERR_IO naming the file; weights, master and state as before;
// the same step retried then matches an engine that never failed.
TEST(ZeroNvmeOffload, FailedWriteMidStepLeavesModelAsItWas) {
    for (const char* precision : {kPrecisions[0], kPrecisions[1]}) {
        SCOPED_TRACE(precision);
        TempDir dir;
        Case k = kCases[0];
        k.precision = precision;
        Trainer ref(config(k, "")), off(config(k, nvme_section(dir.path, ", \"pipeline_write\": true, \"pipeline_read\": true")));
        ds_step_info_t info;
        for (int s = 0; s < 3; ++s) {
            ref.grads(s, -1, 1.0f);
            off.grads(s, -1, 1.0f);
            ASSERT_EQ(ref.step(&info), DS_OK);
            ASSERT_EQ(off.step(&info), DS_OK);
        }
        ref.grads(3, -1, 1.0f);
        off.grads(3, -1, 1.0f);
        const std::vector<uint8_t> before = off.snapshot(k);
        ds::zero::aio_fail_nth_write(3);  // the third sub-group's write
        EXPECT_EQ(off.step(&info), DS_ERR_IO);
        const std::string msg = ds_last_error();
        ds::zero::aio_fail_nth_write(0);
        EXPECT_NE(msg.find(swap_file(dir.path)), std::string::npos) << msg;
        EXPECT_EQ(off.snapshot(k), before);
        ASSERT_EQ(off.step(&info), DS_OK) << ds_last_error();  // the same window, retried
        ASSERT_EQ(ref.step(&info), DS_OK);
        EXPECT_EQ(off.snapshot(k), ref.snapshot(k));
    }
}

TEST(ZeroNvmeOffload, TruncatedOrDeletedSwapFileIsNamedAndChangesNothing) {
    for (bool remove : {false, true}) {
        TempDir dir;
        Trainer off(config(kCases[0], nvme_section(dir.path)));
        ds_step_info_t info;
        off.grads(0, -1, 1.0f);
        ASSERT_EQ(off.step(&info), DS_OK);
        off.grads(1, -1, 1.0f);
        const std::vector<uint8_t> before = off.snapshot(kCases[0]);
        const std::string file = swap_file(dir.path);
        ASSERT_FALSE(file.empty());
        if (remove) ASSERT_EQ(unlink(file.c_str()), 0);
        else ASSERT_EQ(truncate(file.c_str(), 4096), 0);
        EXPECT_EQ(off.step(&info), DS_ERR_IO);
        const std::string msg = ds_last_error();
        EXPECT_NE(msg.find(file), std::string::npos) << msg;
        EXPECT_NE(msg.find(remove ? "deleted" : "truncated"), std::string::npos) << msg;
        // Nothing changed: the working weights (the only copy readable now).
        DLTensor view;
        ASSERT_EQ(ds_engine_param_view(off.e, "p1", &view), DS_OK);
        EXPECT_EQ(std::memcmp(view.data, before.data() + 7 * 4 * 4, 1000 * 4), 0);
    }
}

TEST(ZeroNvmeOffload, FullDiskAtCreateNamesFileAndBytes) {
    TempDir dir;
    FileSizeLimit full_disk(8192);  // far below the swap file
    ds_engine_t* e = nullptr;
    const std::string json = config(kCases[0], nvme_section(dir.path));
    ASSERT_EQ(ds_engine_create(json.c_str(), nullptr, &e), DS_OK);
    std::vector<float> v(100000, 1.0f);
    int64_t shape = 100000;
    DLTensor t = f32(v.data(), &shape, 1);
    ASSERT_EQ(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE), DS_OK);
    const ds_status_t s = ds_engine_init(e);
    const std::string msg = ds_last_error();
    full_disk.lift();
    EXPECT_EQ(s, DS_ERR_IO);
    EXPECT_NE(msg.find("optimizer_state.swp"), std::string::npos) << msg;
    ds_engine_destroy(e);
    EXPECT_TRUE(list_dir(dir.path + "/ds_swap").empty());
}

TEST(ZeroNvmeOffload, BadNvmePathNamesKeyAndPath) {
    TempDir dir;
    const std::string file = dir.path + "/plain_file";
    std::ofstream(file) << "x";
    for (const std::string& bad : {dir.path + "/missing", file}) {
        ds_engine_t* e = nullptr;
        const std::string json = config(kCases[0], nvme_section(bad));
        ds_status_t s = ds_engine_create(json.c_str(), nullptr, &e);
        if (s == DS_OK) {
            int64_t shape = 4;
            float v[4] = {1, 2, 3, 4};
            DLTensor t = f32(v, &shape, 1);
            ASSERT_EQ(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE), DS_OK);
            s = ds_engine_init(e);
        }
        EXPECT_EQ(s, DS_ERR_INVALID_CONFIG);
        const std::string msg = ds_last_error();
        EXPECT_NE(msg.find("zero_optimization.offload_optimizer.nvme_path"), std::string::npos) << msg;
        EXPECT_NE(msg.find(bad), std::string::npos) << msg;
        ds_engine_destroy(e);
    }
}

std::string host_name() {
    char h[256] = {0};
    gethostname(h, sizeof h - 1);
    for (char* c = h; *c; ++c)
        if (*c == '/' || *c == '-') *c = '_';
    return h;
}

TEST(ZeroNvmeOffload, SwapFilesRemovedAtDestroyAndStaleOnesAtStart) {
    TempDir dir;
    // A directory left by a process that died (a pid that has exited).
    const pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, nullptr, 0);
    const std::string stale = dir.path + "/ds_swap/" + host_name() + "-" + std::to_string(child) + "-0-rank0";
    ASSERT_EQ(mkdir((dir.path + "/ds_swap").c_str(), 0700), 0);
    ASSERT_EQ(mkdir(stale.c_str(), 0700), 0);
    std::ofstream(stale + "/optimizer_state.swp") << "old";
    // One of a live process (this one's parent) is kept.
    const std::string live = dir.path + "/ds_swap/" + host_name() + "-" + std::to_string(getppid()) + "-0-rank0";
    ASSERT_EQ(mkdir(live.c_str(), 0700), 0);
    {
        Trainer off(config(kCases[0], nvme_section(dir.path)));
        struct stat st {};
        EXPECT_NE(stat(stale.c_str(), &st), 0) << "stale swap directory not removed";
        EXPECT_EQ(stat(live.c_str(), &st), 0);
        EXPECT_EQ(list_dir(dir.path + "/ds_swap").size(), 2u);  // live + this engine's
    }
    const std::vector<std::string> left = list_dir(dir.path + "/ds_swap");
    ASSERT_EQ(left.size(), 1u);
    EXPECT_EQ(dir.path + "/ds_swap/" + left[0], live);
}

// Checkpoints stream from the swap file: one saved with offload loads with
// and without it (and one saved without loads with it), every byte equal
// to the engine that trained throughout, and training on is bitwise the same.
TEST(ZeroNvmeOffload, CheckpointsLoadWithAndWithoutOffload) {
    for (const char* precision : {kPrecisions[0], kPrecisions[1]}) {
        SCOPED_TRACE(precision);
        TempDir dir, ck;
        Case k = kCases[0];
        k.precision = precision;
        Trainer ref(config(k, "")), off(config(k, nvme_section(dir.path)));
        ds_step_info_t info;
        for (int s = 0; s < 3; ++s) {
            ref.grads(s, -1, 1.0f);
            off.grads(s, -1, 1.0f);
            ASSERT_EQ(ref.step(&info), DS_OK);
            ASSERT_EQ(off.step(&info), DS_OK);
        }
        ASSERT_EQ(ds_save_checkpoint(off.e, ck.path.c_str(), "from_nvme", nullptr), DS_OK) << ds_last_error();
        ASSERT_EQ(ds_save_checkpoint(ref.e, ck.path.c_str(), "from_memory", nullptr), DS_OK) << ds_last_error();
        const std::vector<uint8_t> want = ref.snapshot(k);
        Trainer mem2(config(k, "")), off2(config(k, nvme_section(dir.path))), off3(config(k, nvme_section(dir.path)));
        ASSERT_EQ(ds_load_checkpoint(mem2.e, ck.path.c_str(), "from_nvme", 0, nullptr), DS_OK) << ds_last_error();
        ASSERT_EQ(ds_load_checkpoint(off2.e, ck.path.c_str(), "from_nvme", 0, nullptr), DS_OK) << ds_last_error();
        ASSERT_EQ(ds_load_checkpoint(off3.e, ck.path.c_str(), "from_memory", 0, nullptr), DS_OK) << ds_last_error();
        EXPECT_EQ(mem2.snapshot(k), want);
        EXPECT_EQ(off2.snapshot(k), want);
        EXPECT_EQ(off3.snapshot(k), want);
        for (int s = 3; s < 5; ++s) {
            for (Trainer* t : {&ref, &mem2, &off2, &off3}) {
                t->rng.seed(static_cast<unsigned>(100 + s));
                t->grads(s, -1, 1.0f);
                ASSERT_EQ(t->step(&info), DS_OK) << ds_last_error();
            }
        }
        const std::vector<uint8_t> later = ref.snapshot(k);
        EXPECT_EQ(mem2.snapshot(k), later);
        EXPECT_EQ(off2.snapshot(k), later);
        EXPECT_EQ(off3.snapshot(k), later);
    }
}

// Memory for optimizer state is the swap buffers, not the model's state.
TEST(ZeroNvmeOffload, OptimizerStateMemoryIsTheBuffers) {
    TempDir dir;
    Trainer ref(config(kCases[0], "")), off(config(kCases[0], nvme_section(dir.path, ", \"buffer_count\": 2")));
    const ds_memory_report_t a = ref.memory(), b = off.memory();
    int64_t total = 0;
    for (int64_t n : kSizes) total += n;
    EXPECT_GE(a.optimizer_state_bytes, total * 8);  // two fp32 moments in memory
    // Two buffers of one sub-group (2048 elements) x (master + 2 moments), aligned, + alignment slack.
    EXPECT_EQ(b.optimizer_state_bytes, 2 * (3 * 2048 * 4 + 4096));
    // On disk: both slots of every sub-group (4 of 2048 elements), master and two moments.
    const ds_memory_report_t da = ref.disk(), db = off.disk();
    EXPECT_EQ(da.total_bytes, 0);
    const int64_t groups = (total + 2047) / 2048;
    EXPECT_EQ(db.params_bytes, 2 * groups * 2048 * 4);
    EXPECT_EQ(db.optimizer_state_bytes, 2 * groups * 2 * 2048 * 4);
    EXPECT_EQ(db.total_bytes, db.params_bytes + db.optimizer_state_bytes);
    EXPECT_EQ(db.grads_bytes, 0);
}

}  // namespace
