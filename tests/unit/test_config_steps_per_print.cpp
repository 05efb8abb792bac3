// steps_per_print (DeepSpeed's progress line) and the ignored-settings
// warning, seen through the engine's log callback; the resolved config's
// "ignored" entry and its re-parse; Hugging Face's ZeRO-3 template.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "api_test_util.h"
#include "deepspeed_c.h"

namespace {

struct Log {
    std::vector<std::pair<int32_t, std::string>> lines;
    std::vector<std::string> containing(const std::string& needle) const {
        std::vector<std::string> out;
        for (const auto& l : lines)
            if (l.second.find(needle) != std::string::npos) out.push_back(l.second);
        return out;
    }
};

void sink(int32_t level, const char* message, void* user) {
    static_cast<Log*>(user)->lines.emplace_back(level, message);
}

struct Engine {
    ds_engine_t* e = nullptr;
    Log log;
    Engine(const std::string& json, int32_t level) {
        ds_engine_options_t o;
        ds_engine_options_init(&o, sizeof o);
        o.log_callback = sink;
        o.log_user_data = &log;
        o.log_level = level;
        EXPECT_EQ(ds_engine_create(json.c_str(), &o, &e), DS_OK) << ds_last_error();
    }
    ~Engine() { ds_engine_destroy(e); }
};

DLTensor f32(float* data, int64_t* shape) { return api_test::f32_tensor(data, shape, 1); }

// `boundaries` optimizer steps of 2 micro-steps each; the gradient of
// boundary `inf_at` (1-based) is +inf, so that step is skipped.
void train(Engine& eng, int boundaries, int inf_at) {
    int64_t shape = 4;
    std::vector<float> w = {0.1f, -0.2f, 0.3f, 0.4f};
    DLTensor t = f32(w.data(), &shape);
    ASSERT_EQ(ds_engine_add_param(eng.e, "w", &t, DS_PARAM_TRAINABLE), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_engine_init(eng.e), DS_OK) << ds_last_error();
    for (int b = 1; b <= boundaries; ++b)
        for (int micro = 0; micro < 2; ++micro) {
            std::vector<float> g = {0.01f, 0.02f, -0.03f, 0.04f};
            if (b == inf_at) g[1] = std::numeric_limits<float>::infinity();
            DLTensor gt = f32(g.data(), &shape);
            ASSERT_EQ(ds_engine_accumulate_grad(eng.e, "w", &gt), DS_OK) << ds_last_error();
            ASSERT_EQ(ds_backward(eng.e, nullptr), DS_OK) << ds_last_error();
            ds_step_info_t info;
            info.struct_size = sizeof info;
            ASSERT_EQ(ds_step(eng.e, &info), DS_OK) << ds_last_error();
        }
}

const char* const kAdam =
    R"("train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2,
       "optimizer": {"type": "Adam", "params": {"lr": 0.01, "betas": [0.8, 0.95]}})";

TEST(StepsPerPrint, PrintsDeepSpeedsProgressLineEveryNSteps) {
    Engine eng(std::string("{") + kAdam + R"(, "steps_per_print": 3})", DS_LOG_INFO);
    train(eng, 7, /*inf_at=*/2);
    const std::vector<std::string> got = eng.log.containing("step=");
    ASSERT_EQ(got.size(), 2u);  // after optimizer steps 3 and 6, not at micro-steps
    EXPECT_NE(got[0].find("step=3, skipped=1, lr=[0.01], mom=[(0.8, 0.95)]"), std::string::npos) << got[0];
    EXPECT_NE(got[1].find("step=6, skipped=1, lr=[0.01], mom=[(0.8, 0.95)]"), std::string::npos) << got[1];
    for (const auto& l : eng.log.lines)
        if (l.second.find("step=") != std::string::npos) EXPECT_EQ(l.first, DS_LOG_INFO);
}

TEST(StepsPerPrint, SgdReportsItsMomentum) {
    Engine eng(R"({"train_batch_size": 2, "gradient_accumulation_steps": 2, "steps_per_print": 1,
                   "optimizer": {"type": "SGD", "params": {"lr": 0.5, "momentum": 0.9}}})",
               DS_LOG_INFO);
    train(eng, 1, 0);
    const std::vector<std::string> got = eng.log.containing("step=");
    ASSERT_EQ(got.size(), 1u);
    EXPECT_NE(got[0].find("step=1, skipped=0, lr=[0.5], mom=[0.9]"), std::string::npos) << got[0];
}

TEST(StepsPerPrint, QuietByDefaultAndAtWarnLevel) {
    {  // DeepSpeed 0.19's default is None: no progress line at all.
        Engine eng(std::string("{") + kAdam + "}", DS_LOG_DEBUG);
        train(eng, 4, 0);
        EXPECT_TRUE(eng.log.containing("step=").empty());
    }
    {  // logged at info level (DeepSpeed's logger.info): nothing at the default warn level.
        Engine eng(std::string("{") + kAdam + R"(, "steps_per_print": 1})", DS_LOG_WARN);
        train(eng, 4, 0);
        EXPECT_TRUE(eng.log.containing("step=").empty());
    }
}

TEST(IgnoredSettings, LoggedOnceAtWarnAndListedInResolvedConfig) {
    Engine eng(std::string("{") + kAdam +
                   R"(, "memory_breakdown": true, "zero_optimization": {"stage": 3,
                       "stage3_module_granularity_threshold": 1000, "stage3_max_live_parameters": 1e9}})",
               DS_LOG_WARN);
    const std::vector<std::string> warn = eng.log.containing(" is ignored: ");
    ASSERT_EQ(warn.size(), 2u);  // max_live_parameters 1e9 is the default: not listed
    EXPECT_NE(warn[0].find("config: memory_breakdown = true is ignored: "), std::string::npos) << warn[0];
    EXPECT_NE(warn[1].find("config: zero_optimization.stage3_module_granularity_threshold = 1000 is ignored: no module hooks"),
              std::string::npos)
        << warn[1];
    train(eng, 2, 0);
    EXPECT_EQ(eng.log.containing(" is ignored: ").size(), 2u);  // once, not per step

    const char* json = nullptr;
    ASSERT_EQ(ds_engine_config_json(eng.e, &json), DS_OK);
    const std::string resolved = json;
    EXPECT_NE(resolved.find("\"ignored\": {"), std::string::npos) << resolved;
    EXPECT_NE(resolved.find("\"zero_optimization.stage3_module_granularity_threshold\": \"no module hooks"),
              std::string::npos);
    // The resolved config (with its "ignored" entry) creates an engine whose
    // resolved config is the same text.
    Engine again(resolved, DS_LOG_ERROR);
    const char* json2 = nullptr;
    ASSERT_EQ(ds_engine_config_json(again.e, &json2), DS_OK);
    EXPECT_EQ(resolved, std::string(json2));
}

TEST(IgnoredSettings, IgnoredEntryMustBeStrings) {
    ds_engine_t* e = nullptr;
    EXPECT_EQ(ds_engine_create(R"({"train_batch_size": 1, "ignored": {"x": 1}})", nullptr, &e),
              DS_ERR_INVALID_CONFIG);
    EXPECT_NE(std::string(ds_last_error()).find("ignored.x: expected a string"), std::string::npos) << ds_last_error();
    EXPECT_EQ(ds_engine_create(R"({"train_batch_size": 1, "ignored": []})", nullptr, &e), DS_ERR_INVALID_CONFIG);
}

TEST(HonestConfig, HuggingFaceZero3TemplateCreates) {
    // transformers' ZeRO-3 template as the Trainer hands it to DeepSpeed: the
    // Trainer fills the "auto" values of optimizer, scheduler, batch sizes
    // and gradient_clipping from its arguments (DeepSpeed itself cannot derive
    // them, nor can this library); the "auto" values left in the pydantic
    // sections (fp16/bf16.enabled, zero_optimization) mean "default", as in DeepSpeed.
    const char* hf = R"({
        "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
                 "hysteresis": 2, "min_loss_scale": 1},
        "bf16": {"enabled": "auto"},
        "optimizer": {"type": "AdamW", "params": {"lr": 5e-5, "betas": [0.9, 0.999], "eps": 1e-8,
                                                  "weight_decay": 0.0}},
        "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 5e-5,
                                                     "warmup_num_steps": 10}},
        "zero_optimization": {
            "stage": 3,
            "offload_optimizer": {"device": "none", "pin_memory": true},
            "offload_param": {"device": "none", "pin_memory": true},
            "overlap_comm": true, "contiguous_gradients": true, "sub_group_size": 1e9,
            "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
            "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 1e9,
            "stage3_max_reuse_distance": 1e9, "stage3_gather_16bit_weights_on_model_save": true},
        "gradient_accumulation_steps": 1, "gradient_clipping": 1.0, "steps_per_print": 2000,
        "train_batch_size": 8, "train_micro_batch_size_per_gpu": 8, "wall_clock_breakdown": false})";
    ds_engine_t* e = nullptr;
    ASSERT_EQ(ds_engine_create(hf, nullptr, &e), DS_OK) << ds_last_error();
    const char* json = nullptr;
    ASSERT_EQ(ds_engine_config_json(e, &json), DS_OK);
    EXPECT_EQ(std::string(json).find("\"ignored\""), std::string::npos) << "nothing non-default is ignored";
    ds_engine_destroy(e);
    // The Trainer fills stage3_prefetch_bucket_size with 0.9 * hidden^2: a
    // tuning value the engine's ZeRO-3 prefetch honours (not ignored).
    const std::string filled = std::string(hf).replace(std::string(hf).find("\"stage3_prefetch_bucket_size\": \"auto\""),
                                                       std::strlen("\"stage3_prefetch_bucket_size\": \"auto\""),
                                                       "\"stage3_prefetch_bucket_size\": 943718");
    ASSERT_EQ(ds_engine_create(filled.c_str(), nullptr, &e), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_engine_config_json(e, &json), DS_OK);
    EXPECT_EQ(std::string(json).find("\"ignored\""), std::string::npos) << json;
    ds_engine_destroy(e);
}

}  // namespace
