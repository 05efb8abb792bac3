// Table-driven invalid configs: each must fail with the stated status and a
// message that starts with the dotted key path (plus any other fragments,
// e.g. the "did you mean" suggestion).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "core/error.h"

namespace {

struct Bad {
    const char* name;
    const char* json;
    ds_status_t status;
    const char* prefix;                 // the message starts with this key path
    std::vector<const char*> contains;  // and contains these
};

const std::vector<Bad>& bad_configs() {
    static const std::vector<Bad> v = {
        // --- unknown keys, with suggestions --------------------------------------
        {"typo_top", "{\"train_batch_size\": 4, \"zero_optimisation\": {\"stage\": 1}}",
         DS_ERR_INVALID_CONFIG, "zero_optimisation", {"unknown key", "did you mean zero_optimization?"}},
        {"typo_nested", "{\"train_batch_size\": 4, \"zero_optimization\": {\"reduce_bucket_sise\": 5}}",
         DS_ERR_INVALID_CONFIG, "zero_optimization.reduce_bucket_sise",
         {"did you mean zero_optimization.reduce_bucket_size?"}},
        {"case_top", "{\"Train_batch_size\": 4}", DS_ERR_INVALID_CONFIG, "Train_batch_size",
         {"did you mean train_batch_size?"}},
        {"unknown_no_suggestion", "{\"train_batch_size\": 4, \"completely_unrelated\": 1}",
         DS_ERR_INVALID_CONFIG, "completely_unrelated", {"unknown key"}},
        {"typo_fp16", "{\"train_batch_size\": 4, \"fp16\": {\"enabled\": true, \"loss_scale_windw\": 5}}",
         DS_ERR_INVALID_CONFIG, "fp16.loss_scale_windw", {"did you mean fp16.loss_scale_window?"}},
        {"typo_offload", "{\"train_batch_size\": 4, \"zero_optimization\": {\"offload_optimizer\": {\"devise\": \"cpu\"}}}",
         DS_ERR_INVALID_CONFIG, "zero_optimization.offload_optimizer.devise",
         {"did you mean zero_optimization.offload_optimizer.device?"}},
        {"optimizer_param_typo",
         "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"adam\", \"params\": {\"weight_decy\": 0.1}}}",
         DS_ERR_INVALID_CONFIG, "optimizer.params.weight_decy", {"did you mean optimizer.params.weight_decay?"}},
        {"optimizer_param_of_other_type",
         "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"lion\", \"params\": {\"eps\": 1e-8}}}",
         DS_ERR_INVALID_CONFIG, "optimizer.params.eps", {"unknown key"}},
        {"scheduler_param_typo",
         "{\"train_batch_size\": 4, \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_step\": 10}}}",
         DS_ERR_INVALID_CONFIG, "scheduler.params.warmup_num_step",
         {"did you mean scheduler.params.warmup_num_steps?"}},
        {"scheduler_param_of_other_type",
         "{\"train_batch_size\": 4, \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"total_num_steps\": 10}}}",
         DS_ERR_INVALID_CONFIG, "scheduler.params.total_num_steps", {"unknown key"}},
        {"typo_activation_ckpt",
         "{\"train_batch_size\": 4, \"activation_checkpointing\": {\"partition_activation\": true}}",
         DS_ERR_INVALID_CONFIG, "activation_checkpointing.partition_activation",
         {"did you mean activation_checkpointing.partition_activations?"}},
        {"typo_timers", "{\"train_batch_size\": 4, \"timers\": {\"throughput\": {\"enable\": true}}}",
         DS_ERR_INVALID_CONFIG, "timers.throughput.enable", {"did you mean timers.throughput.enabled?"}},
        // --- duplicates ------------------------------------------------------------
        {"dup_top", "{\"train_batch_size\": 4, \"train_batch_size\": 4}", DS_ERR_INVALID_CONFIG,
         "train_batch_size", {"duplicate key"}},
        {"dup_nested", "{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": 0, \"stage\": 1}}",
         DS_ERR_INVALID_CONFIG, "zero_optimization.stage", {"duplicate key"}},
        {"dup_params", "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"adam\", \"params\": {\"lr\": 1, \"lr\": 2}}}",
         DS_ERR_INVALID_CONFIG, "optimizer.params.lr", {"duplicate key"}},
        // --- types -------------------------------------------------------------------
        {"string_for_int", "{\"train_batch_size\": \"4\"}", DS_ERR_INVALID_CONFIG, "train_batch_size",
         {"expected an integer"}},
        {"fraction_for_int", "{\"train_batch_size\": 4, \"gradient_accumulation_steps\": 5.5}",
         DS_ERR_INVALID_CONFIG, "gradient_accumulation_steps", {"expected an integer", "5.5"}},
        {"int_for_bool", "{\"train_batch_size\": 4, \"fp16\": {\"enabled\": 1}}", DS_ERR_INVALID_CONFIG,
         "fp16.enabled", {"expected a boolean"}},
        {"bool_for_number", "{\"train_batch_size\": 4, \"gradient_clipping\": true}", DS_ERR_INVALID_CONFIG,
         "gradient_clipping", {"expected a number", "true"}},
        {"bool_for_loss_scale", "{\"train_batch_size\": 4, \"fp16\": {\"loss_scale\": false}}",
         DS_ERR_INVALID_CONFIG, "fp16.loss_scale", {"expected a number"}},
        {"section_not_object", "{\"train_batch_size\": 4, \"fp16\": true}", DS_ERR_INVALID_CONFIG, "fp16",
         {"expected an object"}},
        {"betas_shape", "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"adam\", \"params\": {\"betas\": [0.9]}}}",
         DS_ERR_INVALID_CONFIG, "optimizer.params.betas", {"two numbers"}},
        // --- ranges ---------------------------------------------------------------------
        {"stage_4", "{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": 4}}", DS_ERR_INVALID_CONFIG,
         "zero_optimization.stage", {"[0, 3]", "4"}},
        {"negative_bucket", "{\"train_batch_size\": 4, \"zero_optimization\": {\"reduce_bucket_size\": -1}}",
         DS_ERR_INVALID_CONFIG, "zero_optimization.reduce_bucket_size", {">= 0"}},
        {"negative_loss_scale", "{\"train_batch_size\": 4, \"fp16\": {\"loss_scale\": -1}}", DS_ERR_INVALID_CONFIG,
         "fp16.loss_scale", {">= 0"}},
        {"infinite_loss_scale", "{\"train_batch_size\": 4, \"fp16\": {\"loss_scale\": 1e999}}",
         DS_ERR_INVALID_CONFIG, "fp16.loss_scale", {"finite"}},
        {"ratio_above_1",
         "{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"ratio\": 1.5}}}",
         DS_ERR_INVALID_CONFIG, "zero_optimization.offload_optimizer.ratio", {"[0.0, 1.0]"}},
        {"partial_offload_needs_stage3",
         "{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"ratio\": 0.5}}}",
         DS_ERR_INVALID_CONFIG, "zero_optimization.offload_optimizer.ratio", {"stage 3"}},
        {"offload_device_value",
         "{\"train_batch_size\": 4, \"zero_optimization\": {\"offload_param\": {\"device\": \"gpu\"}}}",
         DS_ERR_INVALID_CONFIG, "zero_optimization.offload_param.device", {"\"gpu\""}},
        {"odd_allgather_bucket", "{\"train_batch_size\": 4, \"zero_optimization\": {\"allgather_bucket_size\": 3}}",
         DS_ERR_INVALID_CONFIG, "zero_optimization.allgather_bucket_size", {"multiple of 2"}},
        {"dynamic_window_zero",
         "{\"train_batch_size\": 4, \"fp16\": {\"enabled\": true, \"loss_scale_window\": 0}}",
         DS_ERR_INVALID_CONFIG, "fp16.loss_scale_window", {"> 0"}},
        {"beta_is_one", "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"adam\", \"params\": {\"betas\": [0.9, 1.0]}}}",
         DS_ERR_INVALID_CONFIG, "optimizer.params.betas[1]", {"< 1"}},
        {"negative_lr", "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"adamw\", \"params\": {\"lr\": -0.1}}}",
         DS_ERR_INVALID_CONFIG, "optimizer.params.lr", {">= 0"}},
        {"steps_per_print_zero", "{\"train_batch_size\": 4, \"steps_per_print\": 0}", DS_ERR_INVALID_CONFIG,
         "steps_per_print", {">= 1"}},
        // --- enumerations --------------------------------------------------------------
        {"allreduce_op", "{\"train_batch_size\": 4, \"gradient_allreduce_op\": \"avg\"}", DS_ERR_INVALID_CONFIG,
         "gradient_allreduce_op", {"\"mean\" or \"sum\""}},
        {"comm_dtype", "{\"train_batch_size\": 4, \"communication_data_type\": \"float16\"}",
         DS_ERR_INVALID_CONFIG, "communication_data_type", {"\"fp32\", \"fp16\" or \"bf16\""}},
        {"data_types_alias", "{\"train_batch_size\": 4, \"data_types\": {\"grad_accum_dtype\": \"fp23\"}}",
         DS_ERR_INVALID_CONFIG, "data_types.grad_accum_dtype", {"unknown dtype", "did you mean"}},
        {"tag_validation", "{\"train_batch_size\": 4, \"checkpoint\": {\"tag_validation\": \"maybe\"}}",
         DS_ERR_INVALID_CONFIG, "checkpoint.tag_validation", {"IGNORE, WARN, FAIL"}},
        {"warmup_type", "{\"train_batch_size\": 4, \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_type\": \"cosine\"}}}",
         DS_ERR_INVALID_CONFIG, "scheduler.params.warmup_type", {"\"log\" or \"linear\""}},
        // --- optimizer ---------------------------------------------------------------------
        {"optimizer_unknown_type", "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"sgdd\"}}",
         DS_ERR_INVALID_CONFIG, "optimizer.type", {"unknown optimizer", "did you mean \"SGD\"?"}},
        {"torch_name_wrong_case", "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"rmsprop\"}}",
         DS_ERR_INVALID_CONFIG, "optimizer.type", {"did you mean \"RMSprop\"?"}},
        {"optimizer_missing_type", "{\"train_batch_size\": 4, \"optimizer\": {\"params\": {}}}",
         DS_ERR_INVALID_CONFIG, "optimizer.type", {"required"}},
        {"max_grad_norm", "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"adam\", \"params\": {\"max_grad_norm\": 1.0}}}",
         DS_ERR_INVALID_CONFIG, "optimizer.params.max_grad_norm", {"gradient_clipping"}},
        {"max_grad_norm_lamb", "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"Lamb\", \"params\": {\"max_grad_norm\": 0}}}",
         DS_ERR_INVALID_CONFIG, "optimizer.params.max_grad_norm", {}},
        {"amsgrad", "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"adam\", \"params\": {\"amsgrad\": true}}}",
         DS_ERR_INVALID_CONFIG, "optimizer.params.amsgrad", {"true is not accepted"}},
        {"lamb_static_scale",
         "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"lamb\"}, \"fp16\": {\"enabled\": true, \"loss_scale\": 128}}",
         DS_ERR_INVALID_CONFIG, "fp16.loss_scale", {"lamb", "dynamic"}},
        {"untested_optimizer_with_zero",
         "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"lamb\"}, \"zero_optimization\": {\"stage\": 2}}",
         DS_ERR_INVALID_CONFIG, "optimizer.type", {"zero_allow_untested_optimizer"}},
        {"onebit_with_zero",
         "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"OneBitAdam\"}, \"zero_optimization\": {\"stage\": 1}, "
         "\"zero_allow_untested_optimizer\": true}",
         DS_ERR_INVALID_CONFIG, "optimizer.type", {"onebitadam", "incompatible with ZeRO"}},
        {"sgd_nesterov", "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"SGD\", \"params\": {\"nesterov\": true}}}",
         DS_ERR_INVALID_CONFIG, "optimizer.params.nesterov", {"momentum"}},
        // --- scheduler ---------------------------------------------------------------------
        {"scheduler_case", "{\"train_batch_size\": 4, \"scheduler\": {\"type\": \"warmuplr\"}}", DS_ERR_INVALID_CONFIG,
         "scheduler.type", {"did you mean \"WarmupLR\"?"}},
        {"warmup_steps_zero", "{\"train_batch_size\": 4, \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 0}}}",
         DS_ERR_INVALID_CONFIG, "scheduler.params.warmup_num_steps", {">= 1"}},
        {"warmup_steps_fraction", "{\"train_batch_size\": 4, \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 2.5}}}",
         DS_ERR_INVALID_CONFIG, "scheduler.params.warmup_num_steps", {"expected an integer"}},
        {"decay_needs_total", "{\"train_batch_size\": 4, \"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {}}}",
         DS_ERR_INVALID_CONFIG, "scheduler.params.total_num_steps", {"required", "WarmupDecayLR"}},
        {"cosine_needs_total", "{\"train_batch_size\": 4, \"scheduler\": {\"type\": \"WarmupCosineLR\"}}",
         DS_ERR_INVALID_CONFIG, "scheduler.params.total_num_steps", {"required", "WarmupCosineLR"}},
        {"onecycle_needs_min", "{\"train_batch_size\": 4, \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_max_lr\": 0.1}}}",
         DS_ERR_INVALID_CONFIG, "scheduler.params.cycle_min_lr", {"required"}},
        {"onecycle_needs_max", "{\"train_batch_size\": 4, \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 0.1}}}",
         DS_ERR_INVALID_CONFIG, "scheduler.params.cycle_max_lr", {"required"}},
        {"onecycle_first_step_zero",
         "{\"train_batch_size\": 4, \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 0, "
         "\"cycle_max_lr\": 1, \"cycle_first_step_size\": 0}}}",
         DS_ERR_INVALID_CONFIG, "scheduler.params.cycle_first_step_size", {">= 1"}},
        {"per_group_lr_list",
         "{\"train_batch_size\": 4, \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_min_lr\": [0, 0]}}}",
         DS_ERR_UNSUPPORTED, "scheduler.params.warmup_min_lr", {"per-parameter-group"}},
        // --- "auto" where nothing can be derived ----------------------------------------------
        {"auto_lr", "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"adam\", \"params\": {\"lr\": \"auto\"}}}",
         DS_ERR_INVALID_CONFIG, "optimizer.params.lr", {"no value can be derived"}},
        {"auto_total_steps",
         "{\"train_batch_size\": 4, \"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"total_num_steps\": \"auto\"}}}",
         DS_ERR_INVALID_CONFIG, "scheduler.params.total_num_steps", {"no value can be derived"}},
        {"auto_gradient_clipping", "{\"train_batch_size\": 4, \"gradient_clipping\": \"auto\"}",
         DS_ERR_INVALID_CONFIG, "gradient_clipping", {"no value can be derived"}},
        {"auto_activation_ckpt", "{\"train_batch_size\": 4, \"activation_checkpointing\": {\"profile\": \"auto\"}}",
         DS_ERR_INVALID_CONFIG, "activation_checkpointing.profile", {"no value can be derived"}},
        // --- consistency ----------------------------------------------------------------------
        {"fp16_and_bf16", "{\"train_batch_size\": 4, \"fp16\": {\"enabled\": true}, \"bf16\": {\"enabled\": true}}",
         DS_ERR_INVALID_CONFIG, "fp16.enabled / bf16.enabled", {"both"}},
        {"bf16_and_bfloat16", "{\"train_batch_size\": 4, \"bf16\": {}, \"bfloat16\": {}}", DS_ERR_INVALID_CONFIG,
         "bfloat16", {"only one"}},
        {"bf16_states_need_master", "{\"train_batch_size\": 4, \"bf16\": {\"enabled\": true, \"bf16_optimizer_states\": true}}",
         DS_ERR_INVALID_CONFIG, "bf16.bf16_optimizer_states", {"bf16_master_weights_and_grads"}},
        {"sum_with_stage3", "{\"train_batch_size\": 4, \"gradient_allreduce_op\": \"SUM\", \"zero_optimization\": {\"stage\": 3}}",
         DS_ERR_INVALID_CONFIG, "gradient_allreduce_op", {"stage 3"}},
        {"deprecated_and_replacement",
         "{\"train_batch_size\": 4, \"zero_optimization\": {\"cpu_offload\": true, \"offload_optimizer\": {\"device\": \"cpu\"}}}",
         DS_ERR_INVALID_CONFIG, "zero_optimization.cpu_offload", {"zero_optimization.offload_optimizer"}},
        {"deprecated_gather_and_replacement",
         "{\"train_batch_size\": 4, \"zero_optimization\": {\"stage3_gather_fp16_weights_on_model_save\": true, "
         "\"gather_16bit_weights_on_model_save\": true}}",
         DS_ERR_INVALID_CONFIG, "zero_optimization.stage3_gather_fp16_weights_on_model_save",
         {"zero_optimization.gather_16bit_weights_on_model_save"}},
        {"alias_and_name",
         "{\"train_batch_size\": 4, \"zero_optimization\": {\"stage3_prefetch_bucket_size\": 1, \"prefetch_bucket_size\": 2}}",
         DS_ERR_INVALID_CONFIG, "zero_optimization.stage3_prefetch_bucket_size", {"give only one"}},
        {"legacy_stage1", "{\"train_batch_size\": 4, \"zero_optimization\": {\"legacy_stage1\": true}}",
         DS_ERR_INVALID_CONFIG, "zero_optimization.legacy_stage1", {}},
        {"contiguous_needs_partition",
         "{\"train_batch_size\": 4, \"activation_checkpointing\": {\"contiguous_memory_optimization\": true}}",
         DS_ERR_INVALID_CONFIG, "activation_checkpointing.contiguous_memory_optimization", {"partition_activations"}},
        {"bf16_fp32_accum_stage0",
         "{\"train_batch_size\": 4, \"bf16\": {\"enabled\": true}, \"data_types\": {\"grad_accum_dtype\": \"fp32\"}}",
         DS_ERR_INVALID_CONFIG, "data_types.grad_accum_dtype", {"stage 0"}},
        {"nvme_without_path",
         "{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\"}}}",
         DS_ERR_INVALID_CONFIG, "zero_optimization.offload_param.nvme_path", {"nvme"}},
        // --- batch keys -----------------------------------------------------------------------
        {"batch_mismatch", "{\"train_batch_size\": 8, \"train_micro_batch_size_per_gpu\": 3}", DS_ERR_INVALID_CONFIG,
         "train_batch_size", {"train_micro_batch_size_per_gpu 3", "gradient_accumulation_steps 2", "world_size 1"}},
        {"batch_none", "{}", DS_ERR_INVALID_CONFIG, "train_batch_size / train_micro_batch_size_per_gpu",
         {"at least one is required"}},
        // --- out of scope (UNSUPPORTED) ---------------------------------------------------------
        {"hybrid_engine", "{\"train_batch_size\": 4, \"hybrid_engine\": {\"enabled\": true}}", DS_ERR_UNSUPPORTED,
         "hybrid_engine", {"outside this library's scope"}},
        {"compile_keys", "{\"train_batch_size\": 4, \"compile\": {\"deepcompile\": true}}", DS_ERR_UNSUPPORTED,
         "compile", {}},
        {"sparse_attention", "{\"train_batch_size\": 4, \"sparse_attention\": {\"mode\": \"fixed\"}}",
         DS_ERR_UNSUPPORTED, "sparse_attention", {}},
        {"amp_enabled", "{\"train_batch_size\": 4, \"amp\": {\"enabled\": true}}", DS_ERR_UNSUPPORTED, "amp.enabled",
         {"Apex AMP"}},
        {"amp_opt_level", "{\"train_batch_size\": 4, \"amp\": {\"enabled\": false, \"opt_level\": \"O1\"}}",
         DS_ERR_UNSUPPORTED, "amp.opt_level", {}},
        {"elasticity_enabled", "{\"train_batch_size\": 4, \"elasticity\": {\"enabled\": true}}", DS_ERR_UNSUPPORTED,
         "elasticity.enabled", {}},
        {"pld_non_default", "{\"train_batch_size\": 4, \"progressive_layer_drop\": {\"enabled\": false, \"theta\": 0.5}}",
         DS_ERR_UNSUPPORTED, "progressive_layer_drop.theta", {"disabled default"}},
        {"eigenvalue_enabled", "{\"train_batch_size\": 4, \"eigenvalue\": {\"enabled\": true}}", DS_ERR_UNSUPPORTED,
         "eigenvalue.enabled", {}},
        {"eigenvalue_typo_is_invalid", "{\"train_batch_size\": 4, \"eigenvalue\": {\"max_iters\": 3}}",
         DS_ERR_INVALID_CONFIG, "eigenvalue.max_iters", {"did you mean eigenvalue.max_iter?"}},
        {"zenflow", "{\"train_batch_size\": 4, \"zero_optimization\": {\"zenflow\": {\"topk_ratio\": 0.1}}}",
         DS_ERR_UNSUPPORTED, "zero_optimization.zenflow", {}},
        {"sequence_parallel", "{\"train_batch_size\": 4, \"sequence_parallel_size\": 2}", DS_ERR_UNSUPPORTED,
         "sequence_parallel_size", {}},
        // --- document shape ---------------------------------------------------------------------
        {"top_level_array", "[1, 2]", DS_ERR_INVALID_CONFIG, "config", {"JSON object"}},
    };
    return v;
}

void PrintTo(const Bad& b, std::ostream* os) { *os << b.json; }

class ConfigInvalid : public ::testing::TestWithParam<Bad> {};

TEST_P(ConfigInvalid, FailsNamingTheKey) {
    const Bad& b = GetParam();
    try {
        ds::config::parse(b.json, 1);
        FAIL() << "accepted: " << b.json;
    } catch (const ds::Error& e) {
        const std::string msg = e.what();
        EXPECT_EQ(e.status(), b.status) << msg;
        EXPECT_EQ(msg.rfind(std::string(b.prefix) + ":", 0), 0u)
            << "message does not start with '" << b.prefix << ":': " << msg;
        for (const char* frag : b.contains)
            EXPECT_NE(msg.find(frag), std::string::npos) << "missing '" << frag << "' in: " << msg;
    }
}

INSTANTIATE_TEST_SUITE_P(Config, ConfigInvalid, ::testing::ValuesIn(bad_configs()),
                         [](const ::testing::TestParamInfo<Bad>& i) { return std::string(i.param.name); });

TEST(ConfigInvalidTable, HasAtLeastFortyRows) { EXPECT_GE(bad_configs().size(), 40u); }

}  // namespace
