// Parser behaviour: syntax errors with line/column, duplicate keys, case
// sensitivity, integral doubles, "auto" rules, aliases and deprecated forms,
// optimizer/scheduler type resolution, round trip, and the brief's examples.
#include <cjson/cJSON.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "config_test_util.h"
#include "core/error.h"

namespace {

using ds::config::Config;
using ds::DType;
using ds::config::parse;
using config_test::parse_error;
using ds::config::to_json;

std::string batch(const std::string& rest) { return "{\"train_batch_size\": 4, " + rest + "}"; }

// ---------------------------------------------------------------------------
TEST(ConfigSyntax, ErrorsNameLineAndColumn) {
    struct Case {
        std::string text;
        const char* expect;
    };
    const std::vector<Case> cases = {
        {"", "config JSON syntax error at line 1, column 1: empty input"},
        {"{\n  \"train_batch_size\": 4,\n  \"fp16\": }", "config JSON syntax error at line 3, column 11:"},
        {"{\"train_batch_size\": 4,}", "config JSON syntax error at line 1, column 24: trailing comma"},
        {"{} x", "config JSON syntax error at line 1, column 4:"},
        {"{\"a\" 1}", "config JSON syntax error at line 1, column 6:"},
        {"{\n\t\"a\": \"open", "config JSON syntax error at line 2, column 7: unterminated string"},
        {"{\"a\": 01}", "config JSON syntax error at line 1, column 8: leading zeros"},
        {"{\"a\": tru}", "config JSON syntax error at line 1, column 7:"},
        {"// comment\n{}", "config JSON syntax error at line 1, column 1:"},
        {"{\"é\": x}", "config JSON syntax error at line 1, column 7:"},  // columns count characters
        {std::string("{}\0{}", 4), "config JSON syntax error at line 1, column 3:"},
        {"  \n ", "config JSON syntax error at line 2, column 2:"},
    };
    for (const auto& c : cases) {
        const ds::Error e = parse_error(c.text);
        EXPECT_EQ(e.status(), DS_ERR_INVALID_CONFIG) << c.text;
        EXPECT_EQ(std::string(e.what()).rfind(c.expect, 0), 0u) << "for " << c.text << ": " << e.what();
    }
}

TEST(ConfigSyntax, NestingLimitIsAnError) {
    // DeepSpeed configs nest 4 levels; 64 is the cap (issue 8: hostile nesting).
    const std::string deep = "{\"x\": " + std::string(64, '[') + std::string(64, ']') + "}";
    const ds::Error e = parse_error(deep);
    EXPECT_EQ(std::string(e.what()).rfind("config JSON syntax error at line 1, column 70: nesting deeper than 64", 0),
              0u)
        << e.what();
    const std::string ok = "{\"x\": " + std::string(63, '[') + std::string(63, ']') + "}";
    EXPECT_EQ(std::string(parse_error(ok).what()).rfind("x: unknown key", 0), 0u);
}

TEST(ConfigSyntax, TopLevelMustBeAnObject) {
    for (const char* t : {"[]", "4", "\"x\"", "null", "true"}) {
        const ds::Error e = parse_error(t);
        EXPECT_EQ(e.status(), DS_ERR_INVALID_CONFIG) << t;
        EXPECT_NE(std::string(e.what()).find("JSON object"), std::string::npos) << e.what();
    }
}

// ---------------------------------------------------------------------------
TEST(ConfigKeys, DuplicatesAtEveryLevelNameThePath) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"{\"train_batch_size\": 4, \"fp16\": {}, \"fp16\": {}}", "fp16: duplicate key"},
        {batch("\"fp16\": {\"enabled\": true, \"enabled\": false}"), "fp16.enabled: duplicate key"},
        {batch("\"checkpoint\": {\"writer\": {\"type\": \"fast\", \"type\": \"mock\"}}"),
         "checkpoint.writer.type: duplicate key"},
        {batch("\"timers\": {\"throughput\": {\"enabled\": true, \"enabled\": true}}"),
         "timers.throughput.enabled: duplicate key"},
        {batch("\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 1, \"warmup_num_steps\": 2}}"),
         "scheduler.params.warmup_num_steps: duplicate key"},
        {batch("\"optimizer\": {\"type\": \"RMSprop\", \"params\": {\"alpha\": 1, \"alpha\": 2}}"),
         "optimizer.params.alpha: duplicate key"},
        {batch("\"compile\": {\"enabled\": false, \"enabled\": false}"), "compile.enabled: duplicate key"},
        {batch("\"unknown\": [{\"a\": 1}, {\"b\": 1, \"b\": 2}]"), "unknown[1].b: duplicate key"},
    };
    for (const auto& [json, msg] : cases) {
        const ds::Error e = parse_error(json);
        EXPECT_EQ(e.status(), DS_ERR_INVALID_CONFIG);
        EXPECT_EQ(std::string(e.what()), msg);
    }
}

TEST(ConfigKeys, CaseSensitiveWithSuggestion) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"{\"Train_batch_size\": 4}", "Train_batch_size: unknown key; did you mean train_batch_size?"},
        {batch("\"FP16\": {}"), "FP16: unknown key; did you mean fp16?"},
        {batch("\"zero_optimization\": {\"Stage\": 1}"),
         "zero_optimization.Stage: unknown key; did you mean zero_optimization.stage?"},
        {batch("\"optimizer\": {\"Type\": \"adam\"}"), "optimizer.Type: unknown key; did you mean optimizer.type?"},
    };
    for (const auto& [json, msg] : cases) {
        const ds::Error e = parse_error(json);
        EXPECT_EQ(e.status(), DS_ERR_INVALID_CONFIG);
        EXPECT_EQ(std::string(e.what()), msg);
    }
}

TEST(ConfigKeys, UnknownTopLevelKeyReportedBeforeOtherErrors) {
    // The batch keys are fine only after the typo is fixed; the typo is what gets named.
    const ds::Error e = parse_error("{\"train_batch_sise\": 4}");
    EXPECT_STREQ(e.what(), "train_batch_sise: unknown key; did you mean train_batch_size?");
}

// ---------------------------------------------------------------------------
TEST(ConfigNumbers, IntegralDoublesAcceptedFractionsRejected) {
    const Config c = parse(batch("\"zero_optimization\": {\"reduce_bucket_size\": 5e8, \"allgather_bucket_size\": 2e8}"), 1);
    EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 500000000);
    EXPECT_EQ(c.zero_optimization.allgather_bucket_size, 200000000);
    const ds::Error e = parse_error(batch("\"zero_optimization\": {\"reduce_bucket_size\": 5.5}"));
    EXPECT_EQ(e.status(), DS_ERR_INVALID_CONFIG);
    EXPECT_STREQ(e.what(), "zero_optimization.reduce_bucket_size: expected an integer, got 5.5");
    // sys.maxsize prints as 9223372036854775807 and reads back as 2^63 in a double.
    const Config m = parse(batch("\"zero_optimization\": {\"model_persistence_threshold\": 9223372036854775807}"), 1);
    EXPECT_EQ(m.zero_optimization.model_persistence_threshold, INT64_MAX);
    EXPECT_EQ(parse_error(batch("\"zero_optimization\": {\"model_persistence_threshold\": 1e19}")).status(),
              DS_ERR_INVALID_CONFIG);
}

TEST(ConfigNumbers, BooleansAreNeverNumbersAndViceVersa) {
    EXPECT_STREQ(parse_error(batch("\"fp16\": {\"enabled\": 0}")).what(),
                 "fp16.enabled: expected a boolean (true or false), got 0");
    EXPECT_STREQ(parse_error(batch("\"fp16\": {\"initial_scale_power\": true}")).what(),
                 "fp16.initial_scale_power: expected an integer, got true");
    EXPECT_STREQ(parse_error(batch("\"zero_optimization\": {\"stage\": \"2\"}")).what(),
                 "zero_optimization.stage: expected an integer, got \"2\"");
}

// ---------------------------------------------------------------------------
TEST(ConfigAuto, AcceptedWherePydanticDropsIt) {
    const Config c = parse(
        "{\"train_batch_size\": \"auto\", \"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": \"auto\", "
        "\"fp16\": {\"enabled\": \"auto\", \"loss_scale\": \"auto\", \"initial_scale_power\": \"auto\"}, "
        "\"bf16\": {\"enabled\": \"auto\"}, "
        "\"zero_optimization\": {\"stage\": 3, \"reduce_bucket_size\": \"auto\", \"overlap_comm\": \"auto\", "
        "\"stage3_prefetch_bucket_size\": \"auto\", \"stage3_param_persistence_threshold\": \"auto\", "
        "\"offload_optimizer\": {\"device\": \"auto\", \"pin_memory\": \"auto\"}}, "
        "\"tensorboard\": {\"enabled\": \"auto\", \"job_name\": \"auto\"}, \"wandb\": {\"project\": \"auto\"}, "
        "\"comms_logger\": {\"verbose\": \"auto\"}, \"timers\": {\"throughput\": {\"enabled\": \"auto\"}}}",
        1);
    EXPECT_EQ(c.train_batch_size, 2);
    EXPECT_EQ(c.gradient_accumulation_steps, 1);
    EXPECT_FALSE(c.fp16.enabled);
    EXPECT_EQ(c.fp16.loss_scale, 0.0);
    EXPECT_EQ(c.fp16.initial_scale_power, 16);
    EXPECT_FALSE(c.bf16.enabled);
    EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 500000000);
    EXPECT_TRUE(c.zero_optimization.overlap_comm);  // stage 3 default
    EXPECT_EQ(c.zero_optimization.prefetch_bucket_size, 50000000);
    EXPECT_EQ(c.zero_optimization.param_persistence_threshold, 100000);
    EXPECT_EQ(c.zero_optimization.offload_optimizer->device, "none");
    EXPECT_FALSE(c.zero_optimization.offload_optimizer->pin_memory);  // "auto": DeepSpeed's default
    EXPECT_EQ(c.sections.tensorboard.job_name, "DeepSpeedJobName");
    EXPECT_EQ(c.sections.wandb.project, "deepspeed");
    EXPECT_TRUE(c.sections.timers.throughput_enabled);
}

TEST(ConfigAuto, WarmupMaxLrAutoIsTheOptimizerLr) {
    const Config c = parse(batch("\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 3e-4}}, "
                                 "\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"total_num_steps\": 100, "
                                 "\"warmup_max_lr\": \"auto\"}}"),
                           1);
    ASSERT_TRUE(c.scheduler->warmup_max_lr.has_value());
    EXPECT_EQ(*c.scheduler->warmup_max_lr, 3e-4);  // not WarmupDecayLR's 0.001 default
    const Config w = parse(batch("\"optimizer\": {\"type\": \"lion\", \"params\": {\"lr\": 2e-5}}, "
                                 "\"scheduler\": {\"type\": \"WarmupLR\"}"),
                           1);
    EXPECT_EQ(*w.scheduler->warmup_max_lr, 2e-5);  // WarmupLR default None => optimizer lr
    const Config n = parse(batch("\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_max_lr\": \"auto\"}}"), 1);
    EXPECT_FALSE(n.scheduler->warmup_max_lr.has_value());  // client optimizer: its lr at run time
}

TEST(ConfigAuto, RejectedWhereNothingCanBeDerived) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {batch("\"optimizer\": {\"type\": \"adam\", \"params\": {\"lr\": \"auto\"}}"), "optimizer.params.lr"},
        {batch("\"optimizer\": {\"type\": \"adam\", \"params\": {\"betas\": \"auto\"}}"), "optimizer.params.betas"},
        {batch("\"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {\"total_num_steps\": \"auto\"}}"),
         "scheduler.params.total_num_steps"},
        {batch("\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": \"auto\"}}"),
         "scheduler.params.warmup_num_steps"},
        {batch("\"gradient_clipping\": \"auto\""), "gradient_clipping"},
        {batch("\"steps_per_print\": \"auto\""), "steps_per_print"},
        {batch("\"checkpoint\": {\"tag_validation\": \"auto\"}"), "checkpoint.tag_validation"},
        {batch("\"data_types\": {\"grad_accum_dtype\": \"auto\"}"), "data_types.grad_accum_dtype"},
        {batch("\"flops_profiler\": {\"enabled\": \"auto\"}"), "flops_profiler.enabled"},
        {batch("\"optimizer\": \"auto\""), "optimizer"},
    };
    for (const auto& [json, key] : cases) {
        const ds::Error e = parse_error(json);
        EXPECT_EQ(e.status(), DS_ERR_INVALID_CONFIG) << json;
        EXPECT_EQ(std::string(e.what()),
                  key + ": \"auto\" is not accepted here: no value can be derived for this key");
    }
}

// ---------------------------------------------------------------------------
TEST(ConfigAliases, DeprecatedAndAlternativeSpellings) {
    EXPECT_EQ(parse(batch("\"zero_optimization\": true"), 1).zero_optimization.stage, 1);
    EXPECT_EQ(parse(batch("\"zero_optimization\": false"), 1).zero_optimization.stage, 0);
    const Config off = parse(batch("\"zero_optimization\": {\"stage\": 3, \"cpu_offload\": true, \"cpu_offload_param\": true}"), 1);
    EXPECT_EQ(off.zero_optimization.offload_optimizer->device, "cpu");
    EXPECT_EQ(off.zero_optimization.offload_param->device, "cpu");
    EXPECT_FALSE(parse(batch("\"zero_optimization\": {\"cpu_offload\": false}"), 1).zero_optimization.offload_optimizer);
    const Config s3 = parse(batch("\"zero_optimization\": {\"stage3_prefetch_bucket_size\": 7, "
                                  "\"stage3_max_live_parameters\": 8, \"stage3_gather_fp16_weights_on_model_save\": true}"),
                            1);
    EXPECT_EQ(s3.zero_optimization.prefetch_bucket_size, 7);
    EXPECT_EQ(s3.zero_optimization.max_live_parameters, 8);
    EXPECT_TRUE(s3.zero_optimization.gather_16bit_weights_on_model_save);
    const Config bf = parse(batch("\"bfloat16\": {\"enabled\": true}"), 1);
    EXPECT_TRUE(bf.bf16.enabled);
    EXPECT_EQ(bf.model_dtype(), DType::BF16);
}

TEST(ConfigAliases, DtypeNames) {
    const std::vector<std::pair<const char*, DType>> names = {
        {"fp32", DType::F32}, {"float32", DType::F32}, {"torch.float32", DType::F32}, {"float", DType::F32},
        {"fp16", DType::F16}, {"float16", DType::F16}, {"torch.float16", DType::F16}, {"half", DType::F16},
        {"bf16", DType::BF16}, {"bfloat16", DType::BF16}, {"torch.bfloat16", DType::BF16}, {"bfloat", DType::BF16}};
    for (const auto& [name, dt] : names) {
        const Config c = parse(batch(std::string("\"data_types\": {\"param_dtype\": \"") + name + "\"}"), 1);
        EXPECT_EQ(c.data_types.param_dtype, dt) << name;
    }
    EXPECT_EQ(parse(batch("\"communication_data_type\": \"BF16\""), 1).communication_data_type, DType::BF16);
    EXPECT_EQ(parse(batch("\"gradient_allreduce_op\": \"Sum\""), 1).gradient_allreduce_op, "sum");
    EXPECT_STREQ(ds::config::dtype_name(DType::F32), "fp32");
    EXPECT_STREQ(ds::config::dtype_name(DType::F16), "fp16");
    EXPECT_STREQ(ds::config::dtype_name(DType::BF16), "bf16");
    const Config fp16 = parse(batch("\"fp16\": {\"enabled\": true}, \"data_types\": {\"grad_accum_dtype\": \"half\"}"), 1);
    EXPECT_EQ(fp16.grad_accum_dtype(), DType::F16);
}

// ---------------------------------------------------------------------------
TEST(ConfigOptimizer, TypeResolution) {
    auto opt = [](const std::string& o) { return *parse(batch("\"optimizer\": " + o), 1).optimizer; };
    const auto a = opt("{\"type\": \"Adam\"}");
    EXPECT_EQ(a.type, "adam");
    EXPECT_TRUE(a.adamw_mode);  // "Adam" means AdamW unless adam_w_mode false
    EXPECT_FALSE(opt("{\"type\": \"Adam\", \"params\": {\"adam_w_mode\": false}}").adamw_mode);
    EXPECT_TRUE(opt("{\"type\": \"AdamW\", \"params\": {\"adam_w_mode\": false}}").adamw_mode);
    EXPECT_EQ(opt("{\"type\": \"AdamW\"}").type, "adamw");
    EXPECT_EQ(opt("{\"type\": \"ADAGRAD\"}").type, "adagrad");
    EXPECT_EQ(opt("{\"type\": \"OneBitAdam\"}").type, "onebitadam");
    EXPECT_EQ(opt("{\"type\": \"Lion\"}").type, "lion");
    EXPECT_EQ(opt("{\"type\": \"SGD\", \"params\": {\"lr\": 0.1, \"momentum\": 0.9, \"nesterov\": true}}").momentum, 0.9);
    const auto r = opt("{\"type\": \"RMSprop\", \"params\": {\"lr\": 0.01, \"alpha\": 0.99}}");
    EXPECT_EQ(r.type, "RMSprop");
    EXPECT_EQ(r.opaque_params_json, "{\"lr\":0.01,\"alpha\":0.99}");
    const auto b = opt("{\"type\": \"lamb\", \"params\": {\"betas\": [0.8, 0.95], \"max_coeff\": 0.5, \"min_coeff\": 0.1}}");
    EXPECT_EQ(b.beta1, 0.8);
    EXPECT_EQ(b.beta2, 0.95);
    EXPECT_EQ(b.max_coeff, 0.5);
    EXPECT_EQ(parse(batch("\"optimizer\": null"), 1).optimizer.has_value(), false);
}

TEST(ConfigOptimizer, Fp32StatesOffWithBf16OptimizerStates) {
    const Config c = parse(batch("\"optimizer\": {\"type\": \"adam\"}, \"zero_optimization\": {\"stage\": 2}, "
                                 "\"bf16\": {\"enabled\": true, \"bf16_master_weights_and_grads\": true, "
                                 "\"bf16_optimizer_states\": true}"),
                           1);
    EXPECT_FALSE(c.optimizer->fp32_optimizer_states);
}

TEST(ConfigScheduler, TorchSchedulersParseOpaquely) {
    const Config c = parse(batch("\"scheduler\": {\"type\": \"StepLR\", \"params\": {\"step_size\": 10}}"), 1);
    EXPECT_EQ(c.scheduler->type, "StepLR");
    EXPECT_EQ(c.scheduler->opaque_params_json, "{\"step_size\":10}");
}

// ---------------------------------------------------------------------------
TEST(ConfigOutOfScope, DisabledFormsAccepted) {
    for (const char* s : {"\"hybrid_engine\": {\"enabled\": false}", "\"compile\": {}",
                          "\"data_efficiency\": {\"enabled\": false}", "\"amp\": {\"enabled\": false}",
                          "\"progressive_layer_drop\": {\"enabled\": false, \"theta\": 1.0, \"gamma\": 0.001}",
                          "\"elasticity\": {\"enabled\": false, \"micro_batch_sizes\": [2, 4, 6]}",
                          "\"eigenvalue\": {\"enabled\": false}", "\"sequence_parallel_size\": 1",
                          "\"zero_optimization\": {\"zenflow\": null, \"leaf_module\": {}}"}) {
        EXPECT_NO_THROW(parse(batch(s), 1)) << s;
    }
}

// ---------------------------------------------------------------------------
TEST(ConfigRoundTrip, ToJsonParsesBackToTheSameConfig) {
    const std::vector<std::string> configs = {
        "{\"train_batch_size\": 4}",
        "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 3, \"steps_per_print\": 10, "
        "\"gradient_clipping\": 0.5, \"communication_data_type\": \"bf16\", \"vocabulary_size\": 50257, "
        "\"log_level\": \"info\", \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 1.5e-4, \"betas\": [0.8, 0.99], "
        "\"adam_w_mode\": false, \"weight_decay\": 0.01}}, \"scheduler\": {\"type\": \"WarmupLR\"}, "
        "\"bf16\": {\"enabled\": true}}",
        "{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true, \"loss_scale\": 0, \"hysteresis\": 4}, "
        "\"optimizer\": {\"type\": \"lamb\"}, \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 1e-5, "
        "\"cycle_max_lr\": 1e-3, \"cycle_second_step_size\": 100}}}",
        "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"cpu_offload\": true, "
        "\"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"/tmp/nvme\"}, \"zeropp_loco_param\": {\"err_beta\": 0.5}}, "
        "\"optimizer\": {\"type\": \"SGD\", \"params\": {\"momentum\": 0.9}}, \"zero_allow_untested_optimizer\": true, "
        "\"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {\"total_num_steps\": 1000, \"warmup_type\": \"linear\"}}, "
        "\"checkpoint\": {\"tag_validation\": \"fail\", \"writer\": {\"type\": \"python\", \"data_parallel\": \"socket\"}}, "
        "\"pipeline\": {\"stages\": 2, \"partition\": \"type:Linear\"}, \"torch_autocast\": {\"enabled\": true, "
        "\"dtype\": \"torch.bfloat16\", \"lower_precision_safe_modules\": [\"torch.nn.Linear\"]}, "
        "\"comms_logger\": {\"prof_ops\": [\"all_reduce\"]}, \"activation_checkpointing\": {\"number_checkpoints\": 4}}",
        "{\"train_batch_size\": 6, \"optimizer\": {\"type\": \"RMSprop\", \"params\": {\"lr\": 0.01}}, "
        "\"scheduler\": {\"type\": \"StepLR\", \"params\": {\"step_size\": 3, \"gamma\": 0.5}}, "
        "\"tensorboard\": {\"enabled\": true, \"output_path\": \"out\\\\dir \\\"q\\\"\"}}",
    };
    for (const auto& j : configs) {
        const std::string once = to_json(parse(j, 1));
        const std::string twice = to_json(parse(once, 1));
        EXPECT_EQ(once, twice) << j;
        // And the text is valid JSON that cJSON reads.
        cJSON* root = cJSON_Parse(once.c_str());
        EXPECT_NE(root, nullptr);
        cJSON_Delete(root);
    }
}

TEST(ConfigRoundTrip, WorldSizeTwoKeepsTheTriple) {
    const Config c = parse("{\"train_micro_batch_size_per_gpu\": 3, \"gradient_accumulation_steps\": 2}", 2);
    const Config again = parse(to_json(c), 2);
    EXPECT_EQ(again.train_batch_size, 12);
    EXPECT_EQ(to_json(again), to_json(c));
}

// ---------------------------------------------------------------------------
// The three examples of the brief.
TEST(ConfigExamples, BatchKeysMismatch) {
    const ds::Error e = parse_error("{\"train_batch_size\": 8, \"train_micro_batch_size_per_gpu\": 3}");
    EXPECT_EQ(e.status(), DS_ERR_INVALID_CONFIG);
    EXPECT_NE(std::string(e.what()).find("train_batch_size"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("train_micro_batch_size_per_gpu"), std::string::npos);
}

TEST(ConfigExamples, MisspeltSection) {
    const ds::Error e = parse_error("{\"train_batch_size\": 4, \"zero_optimisation\": {\"stage\": 1}}");
    EXPECT_EQ(e.status(), DS_ERR_INVALID_CONFIG);
    EXPECT_STREQ(e.what(), "zero_optimisation: unknown key; did you mean zero_optimization?");
}

TEST(ConfigExamples, ValidConfigShowsDefaultsAndDerivedKeys) {
    const Config c = parse("{\"train_batch_size\": 16, \"train_micro_batch_size_per_gpu\": 4, "
                           "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-4}}, "
                           "\"fp16\": {\"enabled\": true}}",
                           2);
    EXPECT_EQ(c.gradient_accumulation_steps, 2);  // (16 // 4) // 2
    const std::string j = to_json(c);
    cJSON* root = cJSON_Parse(j.c_str());
    ASSERT_NE(root, nullptr);
    auto num = [&](const char* k) { return cJSON_GetObjectItemCaseSensitive(root, k)->valuedouble; };
    EXPECT_EQ(num("gradient_accumulation_steps"), 2);
    EXPECT_EQ(num("gradient_clipping"), 1.0);
    EXPECT_TRUE(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(root, "steps_per_print")));
    const cJSON* params = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "optimizer"), "params");
    EXPECT_EQ(cJSON_GetObjectItemCaseSensitive(params, "lr")->valuedouble, 1e-4);
    EXPECT_EQ(cJSON_GetObjectItemCaseSensitive(params, "eps")->valuedouble, 1e-8);
    EXPECT_TRUE(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(params, "adam_w_mode")));
    const cJSON* fp16 = cJSON_GetObjectItemCaseSensitive(root, "fp16");
    EXPECT_EQ(cJSON_GetObjectItemCaseSensitive(fp16, "loss_scale_window")->valuedouble, 1000);
    EXPECT_EQ(cJSON_GetObjectItemCaseSensitive(fp16, "initial_scale_power")->valuedouble, 16);
    const cJSON* z = cJSON_GetObjectItemCaseSensitive(root, "zero_optimization");
    EXPECT_EQ(cJSON_GetObjectItemCaseSensitive(z, "reduce_bucket_size")->valuedouble, 5e8);
    EXPECT_EQ(cJSON_GetObjectItemCaseSensitive(z, "sub_group_size")->valuedouble, 1e9);
    cJSON_Delete(root);
}

}  // namespace
