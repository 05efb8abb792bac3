// Monitoring a built-in model through the C ABI: Train/Samples/train_loss is
// the mean of the window's ds_forward losses; the progress line reports the
// loss, tokens/s and TFLOPS; wall_clock_breakdown times the forward; the
// flops profiler writes DeepSpeed's report for profile_step to output_file,
// with the model's parameter count; a host-driven engine refuses the profiler.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "deepspeed_c.h"
#include "monitor/flops_profiler.h"

namespace {

namespace fs = std::filesystem;

constexpr int B = 2, T = 8, V = 16;

std::vector<std::string> log_lines;
void sink(int32_t, const char* m, void*) { log_lines.emplace_back(m); }

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

DLTensor tensor(void* data, int ndim, int64_t* shape, uint8_t code, uint8_t bits) {
    DLTensor t;
    std::memset(&t, 0, sizeof t);
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = ndim;
    t.dtype = {code, bits, 1};
    t.shape = shape;
    return t;
}

TEST(MonitorModel, TrainLossTokensFlopsAndProfile) {
    const fs::path dir = fs::temp_directory_path() / ("ds_mon_model_" + std::to_string(getpid()));
    fs::remove_all(dir);
    const std::string prof = (dir / "prof" / "flops.txt").string();
    const std::string cfg = R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
        "steps_per_print": 1, "wall_clock_breakdown": true,
        "optimizer": {"type": "adamw", "params": {"lr": 0.01, "weight_decay": 0.0}},
        "csv_monitor": {"enabled": true, "output_path": ")" + dir.string() + R"(", "job_name": "j"},
        "flops_profiler": {"enabled": true, "profile_step": 1, "top_modules": 2, "output_file": ")" + prof + R"("}})";
    ds_model_t* m = nullptr;
    ASSERT_EQ(ds_model_create(R"({"type": "gpt", "vocab_size": 16, "block_size": 8, "n_layer": 2, "n_head": 2,
                                   "n_embd": 16, "dropout": 0.0, "seed": 5})",
                              &m),
              DS_OK)
        << ds_last_error();
    int64_t n_params = 0;
    ASSERT_EQ(ds_model_num_params(m, &n_params), DS_OK);
    ds_engine_options_t o;
    ds_engine_options_init(&o, sizeof o);
    o.log_callback = sink;
    o.log_level = DS_LOG_INFO;
    log_lines.clear();
    ds_engine_t* e = nullptr;
    ASSERT_EQ(ds_engine_create_with_model(cfg.c_str(), m, &o, &e), DS_OK) << ds_last_error();

    int32_t ids[B * T], targets[B * T];
    int64_t shape[2] = {B, T};
    std::vector<double> window_means;
    for (int boundary = 0; boundary < 3; ++boundary) {
        double sum = 0.0;
        for (int micro = 0; micro < 2; ++micro) {
            for (int i = 0; i < B * T; ++i) {
                ids[i] = (i * 7 + 3 + boundary + micro) % V;
                targets[i] = (i * 5 + 1 + micro) % V;
            }
            DLTensor in[2] = {tensor(ids, 2, shape, kDLInt, 32), tensor(targets, 2, shape, kDLInt, 32)};
            float loss = NAN;
            DLTensor out = tensor(&loss, 0, nullptr, kDLFloat, 32);
            ASSERT_EQ(ds_forward(e, in, 2, &out), DS_OK) << ds_last_error();
            sum += loss;
            ASSERT_EQ(ds_backward(e, nullptr), DS_OK) << ds_last_error();
            ASSERT_EQ(ds_step(e, nullptr), DS_OK) << ds_last_error();
        }
        window_means.push_back(sum / 2.0);
    }
    ds_engine_destroy(e);
    ds_model_destroy(m);

    // train_loss: "step,train_loss" then x = global_samples (4 per boundary), the window's mean.
    std::istringstream csv(slurp(dir / "j" / "Train_Samples_train_loss.csv"));
    std::string row;
    ASSERT_TRUE(std::getline(csv, row));
    EXPECT_EQ(row, "step,train_loss\r");
    for (int k = 0; k < 3; ++k) {
        ASSERT_TRUE(std::getline(csv, row));
        const size_t comma = row.find(',');
        EXPECT_EQ(row.substr(0, comma), std::to_string(4 * (k + 1)));
        EXPECT_NEAR(std::strtod(row.c_str() + comma + 1, nullptr), window_means[k], 1e-12) << row;
    }
    EXPECT_TRUE(fs::exists(dir / "j" / "Train_Samples_elapsed_time_ms_forward.csv"));

    int progress = 0;
    for (const std::string& l : log_lines) {
        if (l.find("step=") != 0 && l.find("step=") == std::string::npos) continue;
        if (l.find(", skipped=") == std::string::npos) continue;
        ++progress;
        EXPECT_NE(l.find(", loss="), std::string::npos) << l;
        EXPECT_NE(l.find(", tokens/s="), std::string::npos) << l;
        EXPECT_NE(l.find(", TFLOPS="), std::string::npos) << l;
    }
    EXPECT_EQ(progress, 3);
    bool fwd_timer = false;
    for (const std::string& l : log_lines) fwd_timer = fwd_timer || l.rfind("time (ms) | fwd: ", 0) == 0;
    EXPECT_TRUE(fwd_timer);

    const std::string report = slurp(prof);
    EXPECT_NE(report.find("-------------------------- DeepSpeed Flops Profiler --------------------------"),
              std::string::npos);
    EXPECT_NE(report.find("Profile Summary at step 1:"), std::string::npos);
    std::string params_line = "params per GPU: ";
    params_line += std::string(70 - params_line.size(), ' ') + "  " + ds::monitor::params_to_string(double(n_params));
    EXPECT_NE(report.find(params_line), std::string::npos) << report;
    EXPECT_NE(report.find("bwd latency: "), std::string::npos);  // wall_clock_breakdown times the backward
    EXPECT_NE(report.find("Aggregated Profile per GPU"), std::string::npos);
    EXPECT_NE(report.find(" = 100% Params, "), std::string::npos);
    fs::remove_all(dir);
}

TEST(MonitorModel, HostDrivenEngineRefusesTheFlopsProfiler) {
    ds_engine_t* e = nullptr;
    ASSERT_EQ(ds_engine_create(R"({"train_batch_size": 1, "flops_profiler": {"enabled": true},
                                   "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})",
                               nullptr, &e),
              DS_OK)
        << ds_last_error();
    float w = 1.0f;
    int64_t shape = 1;
    DLTensor t = tensor(&w, 1, &shape, kDLFloat, 32);
    ASSERT_EQ(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE), DS_OK);
    EXPECT_EQ(ds_engine_init(e), DS_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(ds_last_error()).find("flops_profiler.enabled"), std::string::npos) << ds_last_error();
    ds_engine_destroy(e);
}

}  // namespace
