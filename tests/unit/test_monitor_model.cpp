// Monitoring a built-in model: Train/Samples/train_loss is the mean of the
// window's forward losses; the progress line reports the loss, tokens/s and
// TFLOPS; wall_clock_breakdown times the forward; the flops profiler writes
// DeepSpeed's report for profile_step, with the model's parameter count and
// MACs; a host-driven engine refuses the profiler. One engine runs a tiny
// model built here (elementwise scales, an MSE loss: known params and
// MACs), one a GPT through the C ABI (once its layers are built).
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

#include "api_test_util.h"
#include "deepspeed_c.h"
#include "engine/engine.h"
#include "monitor/flops_profiler.h"
#include "nn/model.h"

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
    return api_test::cpu_tensor(data, shape, ndim, {code, bits, 1});
}


// y = x * w (w: one weight per feature): 4 params, rows*4 MACs.
class Scale : public ds::nn::Module {
public:
    explicit Scale(float init) {
        w_.name = "weight";
        w_.shape = {4};
        w_.value = ds::Tensor::empty({4}, ds::DType::F32, ds::Device::cpu(), ds::Allocator::process(),
                                     ds::MemCategory::Params);
        for (int j = 0; j < 4; ++j) w_.value.data<float>()[j] = init + 0.1f * j;
    }
    const char* type() const override { return "Scale"; }
    std::vector<ds::nn::Param*> own_params() override { return {&w_}; }
    ds::Tensor forward(const ds::Tensor& x, ds::nn::RunContext& ctx) override {
        x_ = x;
        ds::Tensor y = ds::Tensor::empty(x.shape(), ds::DType::F32, ds::Device::cpu(), *ctx.alloc,
                                         ds::MemCategory::Buffers);
        rows_ = x.shape()[0];
        for (int64_t i = 0; i < rows_; ++i)
            for (int j = 0; j < 4; ++j) y.data<float>()[i * 4 + j] = x.data<float>()[i * 4 + j] * w_.value.data<float>()[j];
        return y;
    }
    ds::Tensor backward(const ds::Tensor& dy, ds::nn::RunContext& ctx) override {
        ds::Tensor dx = ds::Tensor::empty(dy.shape(), ds::DType::F32, ds::Device::cpu(), *ctx.alloc,
                                          ds::MemCategory::Buffers);
        for (int64_t i = 0; i < rows_; ++i)
            for (int j = 0; j < 4; ++j) {
                const float g = dy.data<float>()[i * 4 + j];
                w_.grad.data<float>()[j] += g * x_.data<float>()[i * 4 + j];
                dx.data<float>()[i * 4 + j] = g * w_.value.data<float>()[j];
            }
        x_ = ds::Tensor();
        return dx;
    }
    ds::nn::OpCount op_count() const override { return {double(rows_ * 4), double(2 * rows_ * 4)}; }

private:
    ds::nn::Param w_;
    ds::Tensor x_;
    int64_t rows_ = 0;
};

class Pair : public ds::nn::Module {
public:
    Pair() : a(1.0f), b(0.5f) {
        a.set_name("a");
        b.set_name("b");
    }
    const char* type() const override { return "Pair"; }
    std::vector<Module*> children() override { return {&a, &b}; }
    ds::Tensor forward(const ds::Tensor& x, ds::nn::RunContext& ctx) override {
        return ds::nn::call_forward(b, ds::nn::call_forward(a, x, ctx), ctx);
    }
    ds::Tensor backward(const ds::Tensor& dy, ds::nn::RunContext& ctx) override {
        return a.backward(b.backward(dy, ctx), ctx);
    }
    Scale a, b;
};

// Mean squared error over every element.
class Mse : public ds::nn::Loss {
public:
    const char* name() const override { return "mse"; }
    float forward(const ds::Tensor& y, const ds::Tensor& t, ds::nn::RunContext& ctx) override {
        diff_ = ds::Tensor::empty(y.shape(), ds::DType::F32, ds::Device::cpu(), *ctx.alloc, ds::MemCategory::Buffers);
        double sum = 0.0;
        for (int64_t i = 0; i < y.numel(); ++i) {
            const float d = y.data<float>()[i] - t.data<float>()[i];
            diff_.data<float>()[i] = d;
            sum += double(d) * d;
        }
        return float(sum / double(y.numel()));
    }
    ds::Tensor backward(float dloss, ds::nn::RunContext& ctx) override {
        ds::Tensor g = ds::Tensor::empty(diff_.shape(), ds::DType::F32, ds::Device::cpu(), *ctx.alloc,
                                         ds::MemCategory::Buffers);
        for (int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] = 2.0f * diff_.data<float>()[i] / float(g.numel()) * dloss;
        return g;
    }

private:
    ds::Tensor diff_;
};

TEST(MonitorModel, TinyModelTrainLossFlopsAndProfile) {
    const fs::path dir = fs::temp_directory_path() / ("ds_mon_tiny_" + std::to_string(getpid()));
    fs::remove_all(dir);
    ds::nn::ModelSpec spec;
    spec.type = ds::nn::ModelSpec::Type::Sequential;
    ds::nn::IoContract io;
    io.in_width = 4;
    io.out_width = 4;
    io.class_targets = false;
    auto model = std::make_shared<ds::nn::Model>(spec, std::make_unique<Pair>(), std::make_unique<Mse>(), io,
                                                 std::vector<std::unique_ptr<ds::nn::Module>*>{});
    ds::EngineOptions o;
    o.log_callback = sink;
    o.log_level = DS_LOG_INFO;
    log_lines.clear();
    {
        ds::Engine e(R"({"train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 2, "steps_per_print": 2,
                         "wall_clock_breakdown": true, "optimizer": {"type": "SGD", "params": {"lr": 0.01}},
                         "csv_monitor": {"enabled": true, "output_path": ")" + dir.string() + R"(", "job_name": "j"},
                         "flops_profiler": {"enabled": true, "profile_step": 1, "detailed": true}})",
                     o);
        e.attach_model(model);
        float x[12], t[12];
        int64_t shape[2] = {3, 4};
        std::vector<double> means;
        for (int boundary = 0; boundary < 2; ++boundary) {
            double sum = 0.0;
            for (int micro = 0; micro < 2; ++micro) {
                for (int i = 0; i < 12; ++i) {
                    x[i] = 0.1f * float(i - 5 + micro);
                    t[i] = 0.05f * float(i + boundary);
                }
                DLTensor in[2] = {tensor(x, 2, shape, kDLFloat, 32), tensor(t, 2, shape, kDLFloat, 32)};
                float loss = NAN;
                DLTensor out = tensor(&loss, 0, nullptr, kDLFloat, 32);
                e.forward(in, 2, &out);
                sum += loss;
                e.backward(nullptr);
                e.step();
            }
            means.push_back(sum / 2.0);
        }
        std::istringstream csv(slurp(dir / "j" / "Train_Samples_train_loss.csv"));
        std::string row;
        ASSERT_TRUE(std::getline(csv, row));
        EXPECT_EQ(row, "step,train_loss\r");
        for (int k = 0; k < 2; ++k) {
            ASSERT_TRUE(std::getline(csv, row));
            EXPECT_EQ(row.substr(0, row.find(',')), std::to_string(6 * (k + 1)));
            EXPECT_NEAR(std::strtod(row.c_str() + row.find(',') + 1, nullptr), means[k], 1e-12) << row;
        }
    }
    // The profile (global_steps == 1: the second window, printed at both of its ds_steps).
    std::vector<std::string> report;
    for (const std::string& l : log_lines)
        if (l.find("Profile Summary at step 1:") != std::string::npos) report.push_back(l);
    EXPECT_EQ(report.size(), 2u);
    auto has = [&](const std::string& prefix) {
        for (const std::string& l : log_lines)
            if (l.rfind(prefix, 0) == 0) return l;
        return std::string();
    };
    const std::string lbl = "params per GPU: ";
    EXPECT_EQ(has(lbl), lbl + std::string(70 - lbl.size(), ' ') + "  8       ");
    const std::string macs = "fwd MACs per GPU: ";  // two scales over 3 rows x 4 features
    EXPECT_EQ(has(macs), macs + std::string(70 - macs.size(), ' ') + "  24 MACs ");
    EXPECT_FALSE(has("bwd latency: ").empty());
    EXPECT_FALSE(has("  (a): Scale(4 = 50% Params, 12 MACs = 50% MACs, ").empty());
    // Progress line at step 2: the window's mean loss and the TFLOPS from 3 x the counted forward FLOPs.
    const std::string progress = has("step=2, skipped=0");
    EXPECT_NE(progress.find(", loss="), std::string::npos) << progress;
    EXPECT_NE(progress.find(", TFLOPS="), std::string::npos) << progress;
    EXPECT_EQ(progress.find(", tokens/s="), std::string::npos) << progress;  // features, not token ids
    EXPECT_FALSE(has("time (ms) | fwd: ").empty());
    fs::remove_all(dir);
}

// The GPT example: runs once the transformer layer is built (skips before).
TEST(MonitorModel, GptTrainLossTokensFlopsAndProfile) {
    const fs::path dir = fs::temp_directory_path() / ("ds_mon_model_" + std::to_string(getpid()));
    fs::remove_all(dir);
    const std::string prof = (dir / "prof" / "flops.txt").string();
    const std::string cfg = R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
        "steps_per_print": 1, "wall_clock_breakdown": true,
        "optimizer": {"type": "adamw", "params": {"lr": 0.01, "weight_decay": 0.0}},
        "csv_monitor": {"enabled": true, "output_path": ")" + dir.string() + R"(", "job_name": "j"},
        "flops_profiler": {"enabled": true, "profile_step": 1, "top_modules": 2, "output_file": ")" + prof + R"("}})";
    ds_model_t* m = nullptr;
    const ds_status_t made = ds_model_create(R"({"type": "gpt", "vocab_size": 16, "block_size": 8, "n_layer": 2,
                                                 "n_head": 2, "n_embd": 16, "dropout": 0.0, "seed": 5})",
                                             &m);
    if (made == DS_ERR_UNSUPPORTED) GTEST_SKIP() << "the GPT's layers are not built yet: " << ds_last_error();
    ASSERT_EQ(made, DS_OK) << ds_last_error();
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
