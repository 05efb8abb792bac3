// The monitors driven by an engine through the C ABI: csv_monitor and
// tensorboard write DeepSpeed's events at each boundary with x =
// global_samples (lr after the schedule's step, loss_scale with fp16);
// wall_clock_breakdown logs the micro-step and per-boundary timer lines and
// adds the elapsed_time_ms_* events; the progress line gains samples/s.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "api_test_util.h"
#include "deepspeed_c.h"

namespace {

namespace fs = std::filesystem;

struct Log {
    std::vector<std::string> lines;
    std::vector<std::string> containing(const std::string& needle) const {
        std::vector<std::string> out;
        for (const auto& l : lines)
            if (l.find(needle) != std::string::npos) out.push_back(l);
        return out;
    }
};

void sink(int32_t, const char* message, void* user) { static_cast<Log*>(user)->lines.emplace_back(message); }

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct Trainer {
    ds_engine_t* e = nullptr;
    Log log;
    explicit Trainer(const std::string& json) {
        ds_engine_options_t o;
        ds_engine_options_init(&o, sizeof o);
        o.log_callback = sink;
        o.log_user_data = &log;
        o.log_level = DS_LOG_INFO;
        EXPECT_EQ(ds_engine_create(json.c_str(), &o, &e), DS_OK) << ds_last_error();
    }
    ~Trainer() { ds_engine_destroy(e); }
    // `micro` ds_step calls with a small gradient each.
    void train(int micro) {
        int64_t shape = 4;
        std::vector<float> w = {0.1f, -0.2f, 0.3f, 0.4f};
        DLTensor t = api_test::f32_tensor(w.data(), &shape, 1);
        ASSERT_EQ(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE), DS_OK) << ds_last_error();
        ASSERT_EQ(ds_engine_init(e), DS_OK) << ds_last_error();
        for (int i = 0; i < micro; ++i) {
            std::vector<float> g = {0.01f, 0.02f, -0.03f, 0.04f};
            t.data = g.data();
            ASSERT_EQ(ds_engine_accumulate_grad(e, "w", &t), DS_OK) << ds_last_error();
            ASSERT_EQ(ds_backward(e, nullptr), DS_OK) << ds_last_error();
            ds_step_info_t info;
            info.struct_size = sizeof info;
            ASSERT_EQ(ds_step(e, &info), DS_OK) << ds_last_error();
        }
    }
};

struct TempDir {
    fs::path path;
    explicit TempDir(const char* tag) : path(fs::temp_directory_path() / (std::string(tag) + std::to_string(getpid()))) {
        fs::remove_all(path);
    }
    ~TempDir() { fs::remove_all(path); }
};

TEST(MonitorEngine, CsvEventsAtEveryBoundaryWithGlobalSamples) {
    TempDir d("ds_mon_eng_");
    {
        // WarmupLR from 0 to 0.1 over 2 steps (linear): the schedule's k-th step (from 0)
        // sets 0.1 * min(k, 2) / 2, so boundaries 1, 2, 3 leave lr 0.0, 0.05, 0.1.
        Trainer r(R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
                  "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
                  "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 0.1,
                                "warmup_num_steps": 2, "warmup_type": "linear"}},
                  "fp16": {"enabled": true, "initial_scale_power": 4},
                  "csv_monitor": {"enabled": true, "output_path": ")" +
              d.path.string() + R"(", "job_name": "job"}})");
        r.train(6);  // 3 boundaries of 4 samples each
    }
    const fs::path dir = d.path / "job";
    EXPECT_EQ(slurp(dir / "Train_Samples_lr.csv"), "step,lr\r\n4,0.0\r\n8,0.05\r\n12,0.1\r\n");
    EXPECT_EQ(slurp(dir / "Train_Samples_loss_scale.csv"), "step,loss_scale\r\n4,16.0\r\n8,16.0\r\n12,16.0\r\n");
    // No built-in model forward: no train_loss; no wall_clock_breakdown: no timer events.
    EXPECT_FALSE(fs::exists(dir / "Train_Samples_train_loss.csv"));
    EXPECT_FALSE(fs::exists(dir / "Train_Samples_elapsed_time_ms_step.csv"));
}

TEST(MonitorEngine, WallClockBreakdownLinesAndEvents) {
    TempDir d("ds_mon_wcb_");
    Log log;
    {
        Trainer r(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2, "steps_per_print": 1,
                  "wall_clock_breakdown": true, "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
                  "csv_monitor": {"enabled": true, "output_path": ")" +
              d.path.string() + R"(", "job_name": "j"}})");
        r.train(4);
        log = r.log;
    }
    // After every ds_step: the micro-step timers; at each boundary: the window's timers.
    const auto micro = log.containing("time (ms) | bwd_microstep: ");
    EXPECT_EQ(micro.size(), 4u);
    const auto global = log.containing("time (ms) | bwd: ");
    ASSERT_EQ(global.size(), 2u);
    EXPECT_NE(global[0].find(" | bwd_inner: "), std::string::npos) << global[0];
    EXPECT_NE(global[0].find(" | bwd_allreduce: "), std::string::npos) << global[0];
    EXPECT_NE(global[0].find(" | step: "), std::string::npos) << global[0];
    EXPECT_EQ(global[0].find("fwd"), std::string::npos) << global[0];  // no forward ran: not listed
    for (const char* n : {"forward", "backward", "backward_inner", "backward_allreduce", "step"}) {
        const std::string text = slurp(d.path / "j" / (std::string("Train_Samples_elapsed_time_ms_") + n + ".csv"));
        EXPECT_EQ(text.rfind(std::string("step,elapsed_time_ms_") + n + "\r\n2,", 0), 0u) << n << ": " << text;
        EXPECT_NE(text.find("\r\n4,"), std::string::npos) << text;
    }
    const auto progress = log.containing("step=2, skipped=0");
    ASSERT_EQ(progress.size(), 1u);
    EXPECT_NE(progress[0].find(", samples/s="), std::string::npos) << progress[0];
}

TEST(MonitorEngine, TensorBoardFileCreatedOnEngineCreate) {
    TempDir d("ds_mon_tb_");
    {
        Trainer r(R"({"train_batch_size": 1, "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
                  "tensorboard": {"enabled": true, "output_path": ")" +
              d.path.string() + R"(", "job_name": "tb"}})");
        r.train(2);
    }
    int files = 0;
    for (const auto& f : fs::directory_iterator(d.path / "tb")) {
        EXPECT_EQ(f.path().filename().string().rfind("events.out.tfevents.", 0), 0u) << f.path();
        EXPECT_GT(fs::file_size(f.path()), 100u);  // version + 2 lr events
        ++files;
    }
    EXPECT_EQ(files, 1);
}

TEST(MonitorEngine, UnusableOutputPathFailsCreateWithIoError) {
    TempDir d("ds_mon_bad_");
    fs::create_directories(d.path);
    { std::ofstream((d.path / "job").string()) << "x"; }
    const std::string json = R"({"train_batch_size": 1, "csv_monitor": {"enabled": true, "output_path": ")" +
                             d.path.string() + R"(", "job_name": "job"}})";
    ds_engine_t* e = nullptr;
    EXPECT_EQ(ds_engine_create(json.c_str(), nullptr, &e), DS_ERR_IO);
    EXPECT_NE(std::string(ds_last_error()).find("csv_monitor"), std::string::npos) << ds_last_error();
    EXPECT_EQ(e, nullptr);
}

TEST(MonitorEngine, WandbAndCometStayRefused) {
    ds_engine_t* e = nullptr;
    EXPECT_EQ(ds_engine_create(R"({"train_batch_size": 1, "wandb": {"enabled": true}})", nullptr, &e),
              DS_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(ds_last_error()).find("wandb.enabled"), std::string::npos) << ds_last_error();
    EXPECT_EQ(ds_engine_create(R"({"train_batch_size": 1, "comet": {"enabled": true}})", nullptr, &e),
              DS_ERR_UNSUPPORTED);
}

}  // namespace
