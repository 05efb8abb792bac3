// The single-slot NVMe swap file (zero_optimization.offload_optimizer.
// dsc_atomic_step false, our extension): bit-identical to the two-slot file
// over 20 steps; the file is half the size; a fault after sub-groups were
// updated in place gives DS_ERR_IO saying so, the engine then refuses to
// train or save (DS_ERR_INVALID_STATE) until a checkpoint is loaded, and
// then trains on exactly as an engine that never failed; a fault before
// any sub-group was touched stays retryable as with two slots.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
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

using nvme_test::TempDir;
const std::vector<int64_t> kSizes = {7, 1000, 3001, 2048, 513};

// The one swap file of the one engine under `nvme`.
std::string swap_file(const std::string& nvme) {
    std::vector<std::string> dirs;
    if (DIR* h = opendir((nvme + "/ds_swap").c_str())) {
        while (const dirent* e = readdir(h))
            if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) dirs.push_back(e->d_name);
        closedir(h);
    }
    return dirs.size() == 1 ? nvme + "/ds_swap/" + dirs[0] + "/optimizer_state.swp" : "";
}

int64_t file_size(const std::string& f) {
    struct stat st {};
    return ::stat(f.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

const char* const kAdamW = "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.1}}";
const char* const kAdam = "\"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0.01, \"adam_w_mode\": false}}";

// `atomic`: "" (the default), "true" or "false"; `extra` more offload_optimizer members.
std::string config(const char* optimizer, const char* precision, const std::string& nvme, const char* atomic,
                   const char* extra = "") {
    std::string members = extra;
    if (atomic[0]) members = std::string(", \"dsc_atomic_step\": ") + atomic + members;
    return nvme_test::engine_json(optimizer, precision,
                                  "\"stage\": 1, \"sub_group_size\": 2048, \"offload_optimizer\": " +
                                      nvme_test::nvme_section(nvme, members),
                                  ", \"aio\": {\"block_size\": 8192, \"queue_depth\": 4}");
}

// An engine over kSizes with N(0, 1) gradients from its rng.
struct Trainer : nvme_test::ParamEngine {
    explicit Trainer(const std::string& json) : ParamEngine(json, kSizes) {
        EXPECT_EQ(init_status, DS_OK) << ds_last_error();
    }
    void grads() {
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (size_t i = 0; i < kSizes.size(); ++i) {
            std::vector<float> g(static_cast<size_t>(kSizes[i]));
            for (float& x : g) x = nd(rng);
            int64_t shape = kSizes[i];
            DLTensor t = api_test::f32_tensor(g.data(), &shape, 1);
            ASSERT_EQ(ds_engine_accumulate_grad(e, name(i).c_str(), &t), DS_OK) << ds_last_error();
        }
        ASSERT_EQ(ds_backward(e, nullptr), DS_OK) << ds_last_error();
    }
    ds_status_t step() {
        ds_step_info_t info;
        info.struct_size = sizeof info;
        return ds_step(e, &info);
    }
};

const char* const kPrecisions[] = {nvme_test::kFp32, nvme_test::kBf16,
                                   "\"fp16\": {\"enabled\": true, \"initial_scale_power\": 8}"};

TEST(NvmeSingleSlot, BitIdenticalToTwoSlotsOver20Steps) {
    for (const char* opt : {kAdamW, kAdam})
        for (const char* prec : kPrecisions)
            for (const char* pipe : {"", ", \"pipeline_read\": true, \"pipeline_write\": true, \"buffer_count\": 3"}) {
                SCOPED_TRACE(std::string(opt) + " " + prec + pipe);
                TempDir d1, d2;
                Trainer two(config(opt, prec, d1.path, "", pipe)), one(config(opt, prec, d2.path, "false", pipe));
                ASSERT_TRUE(two.e && one.e);
                for (int s = 0; s < 20; ++s) {
                    two.grads();
                    one.grads();
                    ASSERT_EQ(two.step(), DS_OK) << ds_last_error();
                    ASSERT_EQ(one.step(), DS_OK) << ds_last_error();
                    ASSERT_EQ(two.snapshot(), one.snapshot()) << "step " << s;
                }
            }
}

TEST(NvmeSingleSlot, FileIsHalfTheSize) {
    TempDir d1, d2, d3;
    Trainer two(config(kAdamW, "", d1.path, "")), two_explicit(config(kAdamW, "", d3.path, "true")),
        one(config(kAdamW, "", d2.path, "false"));
    const int64_t a = file_size(swap_file(d1.path)), b = file_size(swap_file(d2.path));
    ASSERT_GT(a, 0);
    EXPECT_EQ(file_size(swap_file(d3.path)), a);
    EXPECT_EQ(b * 2, a);
    const ds_memory_report_t r1 = two.disk(), r2 = one.disk();
    EXPECT_EQ(r2.params_bytes * 2, r1.params_bytes);
    EXPECT_EQ(r2.optimizer_state_bytes * 2, r1.optimizer_state_bytes);
    EXPECT_EQ(r2.total_bytes, b);
}

// A write fault after sub-groups 0 and 1 were written in place: DS_ERR_IO
// naming the file and what was updated; ds_step, ds_backward and
// ds_save_checkpoint refused until ds_load_checkpoint; then bitwise the
// engine that never failed.
TEST(NvmeSingleSlot, InPlaceFaultRefusesTrainingUntilCheckpointLoad) {
    for (const char* prec : {kPrecisions[0], kPrecisions[1]}) {
        SCOPED_TRACE(prec);
        TempDir d1, d2, ck;
        Trainer ref(config(kAdamW, prec, d1.path, "false")), off(config(kAdamW, prec, d2.path, "false"));
        for (int s = 0; s < 3; ++s) {
            ref.grads();
            off.grads();
            ASSERT_EQ(ref.step(), DS_OK);
            ASSERT_EQ(off.step(), DS_OK);
        }
        ASSERT_EQ(ds_save_checkpoint(off.e, ck.path.c_str(), "t3", nullptr), DS_OK) << ds_last_error();
        off.grads();
        ds::zero::aio_fail_nth_write(7);  // sub-group 2's first request (8 KiB of 24 KiB records)
        EXPECT_EQ(off.step(), DS_ERR_IO);
        const std::string msg = ds_last_error();
        ds::zero::aio_fail_nth_write(0);
        EXPECT_NE(msg.find(swap_file(d2.path)), std::string::npos) << msg;
        EXPECT_NE(msg.find("sub-groups 0..2 of 4 had already been updated in place"), std::string::npos) << msg;
        EXPECT_NE(msg.find("write at byte 49152"), std::string::npos) << msg;  // sub-group 2's record
        EXPECT_EQ(off.step(), DS_ERR_INVALID_STATE);
        EXPECT_NE(std::string(ds_last_error()).find("ds_load_checkpoint"), std::string::npos) << ds_last_error();
        EXPECT_EQ(ds_backward(off.e, nullptr), DS_ERR_INVALID_STATE);
        EXPECT_EQ(ds_save_checkpoint(off.e, ck.path.c_str(), "bad", nullptr), DS_ERR_INVALID_STATE);
        // Without the optimizer states the mix stays: still refused.
        ASSERT_EQ(ds_load_checkpoint(off.e, ck.path.c_str(), "t3", DS_LOAD_NO_OPTIMIZER_STATES, nullptr), DS_OK)
            << ds_last_error();
        EXPECT_EQ(ds_backward(off.e, nullptr), DS_ERR_INVALID_STATE);
        ASSERT_EQ(ds_load_checkpoint(off.e, ck.path.c_str(), "t3", 0, nullptr), DS_OK) << ds_last_error();
        EXPECT_EQ(off.snapshot(), ref.snapshot());
        for (int s = 3; s < 6; ++s) {
            for (Trainer* t : {&ref, &off}) {
                t->rng.seed(static_cast<unsigned>(100 + s));
                t->grads();
                ASSERT_EQ(t->step(), DS_OK) << ds_last_error();
            }
            ASSERT_EQ(off.snapshot(), ref.snapshot()) << "step " << s;
        }
    }
}

// A checkpoint load writes the master and the optimizer state into the swap
// file: a write fault there is DS_ERR_IO (it used to terminate the process:
// the apply step was noexcept), training is refused until a load succeeds,
// and a clean load then gives the checkpoint's state exactly. Both slot modes.
TEST(NvmeSingleSlot, LoadWriteFaultIsAStatusAndTrainingWaitsForAGoodLoad) {
    for (const char* atomic : {"true", "false"}) {
        SCOPED_TRACE(atomic);
        TempDir d1, d2, ck;
        Trainer ref(config(kAdamW, "", d1.path, atomic)), off(config(kAdamW, "", d2.path, atomic));
        for (int s = 0; s < 3; ++s) {
            ref.grads();
            off.grads();
            ASSERT_EQ(ref.step(), DS_OK);
            ASSERT_EQ(off.step(), DS_OK);
        }
        ASSERT_EQ(ds_save_checkpoint(off.e, ck.path.c_str(), "t3", nullptr), DS_OK) << ds_last_error();
        off.grads();
        ASSERT_EQ(off.step(), DS_OK);  // off moves on; the load must bring it back
        ds::zero::aio_fail_nth_write(2);
        EXPECT_EQ(ds_load_checkpoint(off.e, ck.path.c_str(), "t3", 0, nullptr), DS_ERR_IO);
        ds::zero::aio_fail_nth_write(0);
        EXPECT_NE(std::string(ds_last_error()).find(swap_file(d2.path)), std::string::npos) << ds_last_error();
        EXPECT_EQ(ds_backward(off.e, nullptr), DS_ERR_INVALID_STATE);
        const std::string refused = ds_last_error();
        EXPECT_NE(refused.find("ds_load_checkpoint of"), std::string::npos) << refused;
        EXPECT_NE(refused.find("partly the checkpoint's"), std::string::npos) << refused;
        EXPECT_EQ(off.step(), DS_ERR_INVALID_STATE);
        ASSERT_EQ(ds_load_checkpoint(off.e, ck.path.c_str(), "t3", 0, nullptr), DS_OK) << ds_last_error();
        EXPECT_EQ(off.snapshot(), ref.snapshot());
        for (Trainer* t : {&ref, &off}) {
            t->rng.seed(7u);
            t->grads();
            ASSERT_EQ(t->step(), DS_OK) << ds_last_error();
        }
        EXPECT_EQ(off.snapshot(), ref.snapshot());
    }
}

// A read fault on the first sub-group: nothing was updated, so nothing is
// lost: the same window steps again and matches.
TEST(NvmeSingleSlot, FaultBeforeAnyUpdateStaysRetryable) {
    TempDir d1, d2;
    Trainer ref(config(kAdamW, "", d1.path, "false")), off(config(kAdamW, "", d2.path, "false"));
    ref.grads();
    off.grads();
    ds::zero::aio_fail_nth_read(1);
    EXPECT_EQ(off.step(), DS_ERR_IO);
    ds::zero::aio_fail_nth_read(0);
    EXPECT_EQ(std::string(ds_last_error()).find("in place"), std::string::npos) << ds_last_error();
    ASSERT_EQ(off.step(), DS_OK) << ds_last_error();
    ASSERT_EQ(ref.step(), DS_OK);
    EXPECT_EQ(off.snapshot(), ref.snapshot());
}

// A disk too small still fails at ds_engine_init, naming the file, the
// bytes, and (two slots) the single-slot key.
TEST(NvmeSingleSlot, DiskTooSmallFailsAtInit) {
    for (const char* atomic : {"true", "false"}) {
        TempDir dir;
        nvme_test::FileSizeLimit small(8192);  // a full disk
        ds_engine_t* e = nullptr;
        const std::string json = config(kAdamW, "", dir.path, atomic);
        ASSERT_EQ(ds_engine_create(json.c_str(), nullptr, &e), DS_OK);
        std::vector<float> v(100000, 1.0f);
        int64_t shape = 100000;
        DLTensor t = api_test::f32_tensor(v.data(), &shape, 1);
        ASSERT_EQ(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE), DS_OK);
        const ds_status_t s = ds_engine_init(e);
        const std::string msg = ds_last_error();
        small.lift();
        EXPECT_EQ(s, DS_ERR_IO);
        EXPECT_NE(msg.find("optimizer_state.swp"), std::string::npos) << msg;
        EXPECT_NE(msg.find("bytes"), std::string::npos) << msg;
        EXPECT_EQ(msg.find("dsc_atomic_step false needs half") != std::string::npos, std::strcmp(atomic, "true") == 0)
            << msg;
        ds_engine_destroy(e);
    }
}

TEST(NvmeSingleSlot, ConfigKeyIsTypedAndNeighboursStillRejected) {
    TempDir dir;
    ds_engine_t* e = nullptr;
    std::string bad = config(kAdamW, "", dir.path, "1");
    EXPECT_EQ(ds_engine_create(bad.c_str(), nullptr, &e), DS_ERR_INVALID_CONFIG);
    EXPECT_NE(std::string(ds_last_error()).find("dsc_atomic_step"), std::string::npos) << ds_last_error();
    std::string typo = config(kAdamW, "", dir.path, "", ", \"dsc_atomic_steps\": false");
    EXPECT_EQ(ds_engine_create(typo.c_str(), nullptr, &e), DS_ERR_INVALID_CONFIG);
    EXPECT_NE(std::string(ds_last_error()).find("dsc_atomic_steps"), std::string::npos) << ds_last_error();
    EXPECT_EQ(e, nullptr);
}

}  // namespace
