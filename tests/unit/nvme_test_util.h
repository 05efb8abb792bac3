// Shared by the unit tests that put engine state on NVMe in a world of one
// (test_offload_param.cpp, test_offload_states.cpp,
// test_zero_nvme_offload.cpp): a temporary swap directory, the config JSON
// around a zero_optimization section, the "nvme" offload section, a file-size
// limit standing in for a full disk, and an engine over a fixed set of
// parameters with its byte snapshot and memory/disk reports. Each test file
// keeps its own training step (what differs between them).
#pragma once

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "api_test_util.h"
#include "deepspeed_c.h"

namespace nvme_test {

// A fresh empty directory (/tmp/<prefix>XXXXXX), removed with what the
// engine left in it at scope exit.
struct TempDir {
    std::string path;
    explicit TempDir(const std::string& prefix = "ds_nvme_test_") {
        std::string t = "/tmp/" + prefix + "XXXXXX";
        path = mkdtemp(t.data());
    }
    ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
};

// Precision sections for engine_json (kFp32: none).
inline constexpr const char* kFp32 = "";
inline constexpr const char* kBf16 = "\"bf16\": {\"enabled\": true}";
inline constexpr const char* kAdamW =
    "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001, \"weight_decay\": 0.01}}";

// {"train_micro_batch_size_per_gpu": 2, "gradient_clipping": 1.0, <optimizer>[, <precision>],
//  "zero_optimization": {<zero>}<tail>}; `optimizer` is the "optimizer" member (and any
// member that must come before it), `tail` members after zero_optimization (", \"aio\": ...").
inline std::string engine_json(const std::string& optimizer, const char* precision, const std::string& zero,
                               const std::string& tail = "") {
    std::string j = "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_clipping\": 1.0, " + optimizer;
    if (precision[0]) j += std::string(", ") + precision;
    j += ", \"zero_optimization\": {" + zero + "}" + tail + "}";
    return j;
}

// An offload_optimizer / offload_param section on NVMe under `dir`;
// `extra` adds members (", \"buffer_count\": 2").
inline std::string nvme_section(const std::string& dir, const std::string& extra = "") {
    return "{\"device\": \"nvme\", \"nvme_path\": \"" + dir + "\"" + extra + "}";
}

// RLIMIT_FSIZE lowered to `bytes` (SIGXFSZ ignored, so a write past it fails
// with EFBIG as on a full disk) until lift() or scope exit.
class FileSizeLimit {
public:
    explicit FileSizeLimit(rlim_t bytes) {
        getrlimit(RLIMIT_FSIZE, &old_);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit small = old_;
        small.rlim_cur = bytes;
        EXPECT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
        active_ = true;
    }
    ~FileSizeLimit() { lift(); }
    void lift() {
        if (!active_) return;
        setrlimit(RLIMIT_FSIZE, &old_);
        signal(SIGXFSZ, SIG_DFL);
        active_ = false;
    }
    FileSizeLimit(const FileSizeLimit&) = delete;
    FileSizeLimit& operator=(const FileSizeLimit&) = delete;

private:
    struct rlimit old_ {};
    bool active_ = false;
};

// ds_engine_create(json), one trainable fp32 parameter "p<i>" of sizes[i]
// elements each (N(0, 1) values from a fixed seed), ds_engine_init.
// init_status keeps what init returned (DS_OK where create already failed);
// rng is for the test's gradients. Destroyed with its scope.
struct ParamEngine {
    ds_engine_t* e = nullptr;
    ds_status_t init_status = DS_OK;
    std::mt19937 rng{42};
    std::vector<int64_t> sizes;

    ParamEngine(const std::string& json, const std::vector<int64_t>& param_sizes) : sizes(param_sizes) {
        EXPECT_EQ(ds_engine_create(json.c_str(), nullptr, &e), DS_OK) << ds_last_error() << "\n" << json;
        if (!e) return;
        std::mt19937 init(7);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (size_t i = 0; i < sizes.size(); ++i) {
            std::vector<float> v(static_cast<size_t>(sizes[i]));
            for (float& x : v) x = nd(init);
            int64_t shape = sizes[i];
            DLTensor t = api_test::f32_tensor(v.data(), &shape, 1);
            EXPECT_EQ(ds_engine_add_param(e, name(i).c_str(), &t, DS_PARAM_TRAINABLE), DS_OK);
        }
        init_status = ds_engine_init(e);
    }
    ~ParamEngine() { ds_engine_destroy(e); }
    ParamEngine(const ParamEngine&) = delete;
    ParamEngine& operator=(const ParamEngine&) = delete;

    static std::string name(size_t i) { return "p" + std::to_string(i); }

    // Every parameter's working weights, fp32 master and the named optimizer
    // states, as bytes (for bit-identity checks). `gather`: each parameter is
    // gathered around reading its working weights (ZeRO-3).
    std::vector<uint8_t> snapshot(const std::vector<const char*>& states = {"exp_avg", "exp_avg_sq"},
                                  bool gather = false) {
        std::vector<uint8_t> out;
        for (size_t i = 0; i < sizes.size(); ++i) {
            const std::string n = name(i);
            const char* names[] = {n.c_str()};
            if (gather) EXPECT_EQ(ds_engine_gather(e, names, 1), DS_OK) << ds_last_error();
            DLTensor w;
            EXPECT_EQ(ds_engine_param_view(e, n.c_str(), &w), DS_OK) << ds_last_error();
            const uint8_t* b = static_cast<const uint8_t*>(w.data);
            out.insert(out.end(), b, b + static_cast<size_t>(sizes[i]) * w.dtype.bits / 8);
            if (gather) EXPECT_EQ(ds_engine_release(e, names, 1), DS_OK);
            std::vector<float> v(static_cast<size_t>(sizes[i]));
            int64_t shape = sizes[i];
            DLTensor t = api_test::f32_tensor(v.data(), &shape, 1);
            auto add = [&] {
                const uint8_t* p = reinterpret_cast<const uint8_t*>(v.data());
                out.insert(out.end(), p, p + v.size() * sizeof(float));
            };
            EXPECT_EQ(ds_engine_get_full_fp32_param(e, n.c_str(), &t), DS_OK) << ds_last_error();
            add();
            for (const char* s : states) {
                EXPECT_EQ(ds_engine_get_full_optimizer_state(e, n.c_str(), s, &t), DS_OK) << s << ds_last_error();
                add();
            }
        }
        return out;
    }

    ds_memory_report_t memory() const { return report(false); }
    ds_memory_report_t disk() const { return report(true); }
    ds_memory_report_t report(bool on_disk) const {
        ds_memory_report_t r{};
        r.struct_size = sizeof r;
        EXPECT_EQ(on_disk ? ds_engine_disk_report(e, &r) : ds_engine_memory_report(e, &r), DS_OK);
        return r;
    }
};

}  // namespace nvme_test
