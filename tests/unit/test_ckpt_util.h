// Helpers for the checkpoint hardening tests: a small engine built through
// the public C API, scratch directories, and file helpers.
#pragma once

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "api_test_util.h"
#include "core/crc32c.h"
#include "ckpt/file_io.h"
#include "deepspeed_c.h"

namespace ckpt_test {

inline const char* kAdamWConfig =
    "{\"train_micro_batch_size_per_gpu\": 1,"
    " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"betas\": [0.8, 0.95]}},"
    " \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_max_lr\": 0.01, \"warmup_num_steps\": 10}}}";

using api_test::f32_tensor;

// An engine with parameters "w" [3, 4] (trainable), "b" [4] (trainable) and
// "frozen" [2] (not), initialised from `seed`.
struct SmallEngine {
    ds_engine_t* e = nullptr;
    explicit SmallEngine(const char* config = kAdamWConfig, float seed = 0.5f, bool init = true) {
        EXPECT_EQ(ds_engine_create(config, nullptr, &e), DS_OK) << ds_last_error();
        if (!e) return;
        add("w", {3, 4}, seed, DS_PARAM_TRAINABLE);
        add("b", {4}, seed + 1, DS_PARAM_TRAINABLE);
        add("frozen", {2}, seed + 2, 0);
        if (init) EXPECT_EQ(ds_engine_init(e), DS_OK) << ds_last_error();
    }
    ~SmallEngine() { ds_engine_destroy(e); }
    SmallEngine(const SmallEngine&) = delete;
    SmallEngine& operator=(const SmallEngine&) = delete;

    void add(const char* name, std::vector<int64_t> shape, float seed, uint32_t flags) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        std::vector<float> v(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = seed + 0.01f * static_cast<float>(i);
        DLTensor t = f32_tensor(v.data(), shape.data(), static_cast<int32_t>(shape.size()));
        ASSERT_EQ(ds_engine_add_param(e, name, &t, flags), DS_OK) << ds_last_error();
    }
    // Sets every element of a parameter's fp32 master (and weights) to base + 0.001 * i.
    ds_status_t set(const char* name, int64_t n, std::vector<int64_t> shape, float base) {
        std::vector<float> v(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = base + 0.001f * static_cast<float>(i);
        DLTensor t = f32_tensor(v.data(), shape.data(), static_cast<int32_t>(shape.size()));
        return ds_engine_set_full_fp32_param(e, name, &t);
    }
    std::vector<float> get(const char* name, std::vector<int64_t> shape) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        std::vector<float> v(static_cast<size_t>(n), -999.0f);
        DLTensor t = f32_tensor(v.data(), shape.data(), static_cast<int32_t>(shape.size()));
        EXPECT_EQ(ds_engine_get_full_fp32_param(e, name, &t), DS_OK) << ds_last_error();
        return v;
    }
    // One optimizer step with constant gradients.
    void step() {
        std::vector<float> g(12, 0.25f);
        int64_t sw[2] = {3, 4}, sb[1] = {4};
        DLTensor tw = f32_tensor(g.data(), sw, 2), tb = f32_tensor(g.data(), sb, 1);
        ASSERT_EQ(ds_engine_accumulate_grad(e, "w", &tw), DS_OK) << ds_last_error();
        ASSERT_EQ(ds_engine_accumulate_grad(e, "b", &tb), DS_OK) << ds_last_error();
        ASSERT_EQ(ds_backward(e, nullptr), DS_OK) << ds_last_error();
        ASSERT_EQ(ds_step(e, nullptr), DS_OK) << ds_last_error();
    }
};

struct TempDir {
    std::string path;
    TempDir() {
        char buf[] = "/tmp/ds_ckpt_h_XXXXXX";
        path = mkdtemp(buf);
    }
    ~TempDir() {
        try {
            ds::ckpt::remove_tree(path);
        } catch (...) {
        }
    }
    std::string operator/(const std::string& name) const { return path + "/" + name; }
};

inline std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

inline void spit(const std::string& path, const std::string& s) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << s;
}

// Re-seals a manifest edited by hand: recomputes "manifest_crc32c" over the
// bytes before its opening quote, as the writer does.
inline std::string reseal(const std::string& text) {
    const size_t pos = text.rfind("\"manifest_crc32c\"");
    EXPECT_NE(pos, std::string::npos);
    const uint32_t crc = ds::crc32c(0, text.data(), pos);
    return text.substr(0, pos) + "\"manifest_crc32c\": " + std::to_string(crc) + "\n}\n";
}

inline bool is_fifo(const std::string& path) {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

}  // namespace ckpt_test
