// Every default against the reference tables (DEEPSPEED_SEMANTICS.md §1.2-
// §1.5, §3, §11-§13), written out here independently of the parser: both
// the typed structs and the leaves of to_json() must match, and to_json()
// must print no key this table does not know.
#include <cjson/cJSON.h>
#include <gtest/gtest.h>

#include <climits>
#include <map>
#include <string>

#include "config/config.h"

namespace {

using ds::config::Config;
using ds::DType;

// Expected leaves of to_json() for {"train_batch_size": 4}, world size 2.
const std::map<std::string, std::string>& reference_defaults() {
    static const std::map<std::string, std::string> m = {
        {"train_batch_size", "4"}, {"train_micro_batch_size_per_gpu", "2"},
        {"gradient_accumulation_steps", "1"}, {"managed_gradient_accumulation", "true"},
        {"steps_per_print", "null"}, {"wall_clock_breakdown", "false"}, {"memory_breakdown", "false"},
        {"dump_state", "false"}, {"gradient_clipping", "1.0"}, {"prescale_gradients", "false"},
        {"gradient_predivide_factor", "1.0"}, {"gradient_allreduce_op", "\"mean\""},
        {"communication_data_type", "null"}, {"seq_parallel_communication_data_type", "\"fp32\""},
        {"sparse_gradients", "false"}, {"disable_allgather", "false"},
        {"zero_allow_untested_optimizer", "false"}, {"zero_force_ds_cpu_optimizer", "true"},
        {"optimizer", "null"}, {"scheduler", "null"},
        // fp16 / bf16 (§1.3)
        {"fp16.enabled", "false"}, {"fp16.auto_cast", "false"}, {"fp16.loss_scale", "0"},
        {"fp16.initial_scale_power", "16"}, {"fp16.loss_scale_window", "1000"}, {"fp16.hysteresis", "2"},
        {"fp16.consecutive_hysteresis", "false"}, {"fp16.min_loss_scale", "1"},
        {"fp16.fp16_master_weights_and_grads", "false"},
        {"bf16.enabled", "false"}, {"bf16.immediate_grad_update", "false"},
        {"bf16.check_grad_overflow", "true"}, {"bf16.bf16_master_weights_and_grads", "false"},
        {"bf16.bf16_optimizer_states", "false"},
        {"amp.enabled", "false"}, {"torch_autocast.enabled", "false"}, {"torch_autocast.dtype", "null"},
        {"torch_autocast.lower_precision_safe_modules", "null"},
        // zero_optimization (§1.4)
        {"zero_optimization.stage", "0"}, {"zero_optimization.contiguous_gradients", "true"},
        {"zero_optimization.reduce_scatter", "true"}, {"zero_optimization.reduce_bucket_size", "500000000"},
        {"zero_optimization.use_multi_rank_bucket_allreduce", "true"},
        {"zero_optimization.allgather_partitions", "true"},
        {"zero_optimization.allgather_bucket_size", "500000000"}, {"zero_optimization.overlap_comm", "false"},
        {"zero_optimization.load_from_fp32_weights", "true"}, {"zero_optimization.elastic_checkpoint", "false"},
        {"zero_optimization.offload_param", "null"}, {"zero_optimization.offload_optimizer", "null"},
        {"zero_optimization.sub_group_size", "1000000000"},
        {"zero_optimization.prefetch_bucket_size", "50000000"},
        {"zero_optimization.param_persistence_threshold", "100000"},
        {"zero_optimization.model_persistence_threshold", "9223372036854775807"},
        {"zero_optimization.max_live_parameters", "1000000000"},
        {"zero_optimization.max_reuse_distance", "1000000000"},
        {"zero_optimization.gather_16bit_weights_on_model_save", "false"},
        {"zero_optimization.module_granularity_threshold", "0"},
        {"zero_optimization.use_all_reduce_for_fetch_params", "false"},
        {"zero_optimization.allgather_sequential", "false"},
        {"zero_optimization.ignore_unused_parameters", "true"}, {"zero_optimization.legacy_stage1", "false"},
        {"zero_optimization.round_robin_gradients", "false"},
        {"zero_optimization.zero_hpz_partition_size", "1"},
        {"zero_optimization.zero_quantized_weights", "false"},
        {"zero_optimization.zero_quantized_nontrainable_weights", "false"},
        {"zero_optimization.zero_quantized_gradients", "false"}, {"zero_optimization.zeropp_loco_param", "null"},
        {"zero_optimization.mics_shard_size", "-1"},
        {"zero_optimization.mics_hierarchical_params_gather", "false"},
        {"zero_optimization.memory_efficient_linear", "true"},
        {"zero_optimization.pipeline_loading_checkpoint", "false"},
        {"zero_optimization.override_module_apply", "true"},
        {"zero_optimization.log_trace_cache_warnings", "false"},
        {"zero_optimization.enable_sanity_checks", "false"},
        {"zero_optimization.save_muon_momentum_buffer_in_memory", "false"},
        {"zero_optimization.leaf_module", "{}"}, {"zero_optimization.zenflow", "null"},
        // activation_checkpointing (§13)
        {"activation_checkpointing.partition_activations", "false"},
        {"activation_checkpointing.cpu_checkpointing", "false"},
        {"activation_checkpointing.contiguous_memory_optimization", "false"},
        {"activation_checkpointing.number_checkpoints", "null"},
        {"activation_checkpointing.synchronize_checkpoint_boundary", "false"},
        {"activation_checkpointing.profile", "false"},
        // flops_profiler (§11)
        {"flops_profiler.enabled", "false"}, {"flops_profiler.recompute_fwd_factor", "0.0"},
        {"flops_profiler.profile_step", "1"}, {"flops_profiler.module_depth", "-1"},
        {"flops_profiler.top_modules", "1"}, {"flops_profiler.detailed", "true"},
        {"flops_profiler.output_file", "null"},
        // monitors (§12)
        {"tensorboard.enabled", "false"}, {"tensorboard.output_path", "\"\""},
        {"tensorboard.job_name", "\"DeepSpeedJobName\""}, {"csv_monitor.enabled", "false"},
        {"csv_monitor.output_path", "\"\""}, {"csv_monitor.job_name", "\"DeepSpeedJobName\""},
        {"wandb.enabled", "false"}, {"wandb.group", "null"}, {"wandb.team", "null"},
        {"wandb.project", "\"deepspeed\""}, {"comet.enabled", "false"}, {"comet.samples_log_interval", "100"},
        {"comet.project", "null"}, {"comet.workspace", "null"}, {"comet.api_key", "null"},
        {"comet.experiment_name", "null"}, {"comet.experiment_key", "null"}, {"comet.online", "null"},
        {"comet.mode", "null"},
        {"comms_logger.enabled", "false"}, {"comms_logger.verbose", "false"}, {"comms_logger.prof_all", "true"},
        {"comms_logger.prof_ops", "[]"}, {"comms_logger.debug", "false"},
        {"timers.throughput.enabled", "true"}, {"timers.throughput.synchronized", "true"},
        // checkpoint (§1.5)
        {"checkpoint.tag_validation", "\"WARN\""}, {"checkpoint.load_universal", "false"},
        {"checkpoint.use_node_local_storage", "false"}, {"checkpoint.parallel_write.pipeline_stage", "false"},
        {"checkpoint.checkpoint_serialization", "true"}, {"checkpoint.writer", "null"},
        {"data_types.grad_accum_dtype", "null"}, {"data_types.param_dtype", "null"},
        {"data_types.buffer_dtype", "null"},
        {"aio.block_size", "1048576"}, {"aio.queue_depth", "8"}, {"aio.intra_op_parallelism", "1"},
        {"aio.single_submit", "false"}, {"aio.overlap_events", "true"}, {"aio.use_gds", "false"},
        {"pipeline.stages", "\"auto\""}, {"pipeline.partition", "\"best\""}, {"pipeline.seed_layers", "false"},
        {"pipeline.activation_checkpoint_interval", "0"}, {"pipeline.pipe_partitioned", "true"},
        {"pipeline.grad_partitioned", "true"},
        // runtime/tensor_parallel/config.py TPTrainingConfig
        {"tensor_parallel.autotp_size", "0"},
        {"tensor_parallel.preset_model", "null"},
        {"tensor_parallel.tp_overlap_comm", "false"},
        {"dataloader_drop_last", "false"}, {"vocabulary_size", "null"},
        {"elasticity.enabled", "false"}, {"elasticity.max_train_batch_size", "2000"},
        {"elasticity.micro_batch_sizes", "[2, 4, 6]"}, {"elasticity.min_gpus", "1"},
        {"elasticity.max_gpus", "10000"}, {"elasticity.num_gpus_per_node", "1"},
        {"elasticity.model_parallel_size", "1"}, {"elasticity.min_time", "0"},
        {"elasticity.prefer_larger_batch", "true"}, {"elasticity.ignore_non_elastic_batch_info", "false"},
        {"elasticity.version", "0.2"},
        {"progressive_layer_drop.enabled", "false"}, {"progressive_layer_drop.theta", "1.0"},
        {"progressive_layer_drop.gamma", "0.001"},
        {"eigenvalue.enabled", "false"}, {"eigenvalue.verbose", "false"}, {"eigenvalue.max_iter", "100"},
        {"eigenvalue.tol", "1e-2"}, {"eigenvalue.stability", "1e-6"},
        {"eigenvalue.gas_boundary_resolution", "1"}, {"eigenvalue.layer_name", "\"bert.encoder.layer\""},
        {"eigenvalue.layer_num", "0"},
        {"use_data_before_expert_parallelism", "false"}, {"graph_harvesting", "false"}, {"log_level", "null"},
    };
    return m;
}

// Leaves of a JSON object: objects recursed into (non-empty ones), anything
// else (including arrays, null and {}) is a leaf.
void leaves(const cJSON* node, const std::string& path, std::map<std::string, const cJSON*>& out) {
    if (cJSON_IsObject(node) && node->child) {
        for (const cJSON* c = node->child; c; c = c->next)
            leaves(c, path.empty() ? c->string : path + "." + c->string, out);
        return;
    }
    out[path] = node;
}

bool same_json(const cJSON* got, const std::string& expected_text) {
    cJSON* want = cJSON_Parse(expected_text.c_str());
    bool same = want && cJSON_Compare(got, want, 1);
    if (want && cJSON_IsNumber(got) && cJSON_IsNumber(want)) same = got->valuedouble == want->valuedouble;
    cJSON_Delete(want);
    return same;
}

TEST(ConfigDefaults, ToJsonLeavesMatchReferenceExactly) {
    const Config c = ds::config::parse("{\"train_batch_size\": 4}", 2);
    const std::string text = ds::config::to_json(c);
    cJSON* root = cJSON_Parse(text.c_str());
    ASSERT_NE(root, nullptr) << text;
    std::map<std::string, const cJSON*> got;
    leaves(root, "", got);
    for (const auto& [path, want] : reference_defaults()) {
        auto it = got.find(path);
        if (it == got.end()) {
            ADD_FAILURE() << "to_json lacks " << path;
            continue;
        }
        char* printed = cJSON_PrintUnformatted(it->second);
        EXPECT_TRUE(same_json(it->second, want)) << path << ": got " << printed << ", reference " << want;
        cJSON_free(printed);
    }
    for (const auto& [path, node] : got)
        EXPECT_TRUE(reference_defaults().count(path)) << "to_json prints " << path << " not in the reference table";
    cJSON_Delete(root);
}

TEST(ConfigDefaults, TypedStructsMatchReference) {
    const Config c = ds::config::parse("{\"train_micro_batch_size_per_gpu\": 3}", 1);
    EXPECT_EQ(c.train_batch_size, 3);
    EXPECT_EQ(c.train_micro_batch_size_per_gpu, 3);
    EXPECT_EQ(c.gradient_accumulation_steps, 1);
    EXPECT_TRUE(c.managed_gradient_accumulation);
    EXPECT_FALSE(c.steps_per_print.has_value());
    EXPECT_EQ(c.gradient_clipping, 1.0);
    EXPECT_EQ(c.gradient_predivide_factor, 1.0);
    EXPECT_EQ(c.gradient_allreduce_op, "mean");
    EXPECT_FALSE(c.communication_data_type.has_value());
    EXPECT_EQ(c.seq_parallel_communication_data_type, DType::F32);
    EXPECT_TRUE(c.zero_force_ds_cpu_optimizer);
    EXPECT_FALSE(c.optimizer.has_value());
    EXPECT_FALSE(c.scheduler.has_value());
    EXPECT_EQ(c.model_dtype(), DType::F32);
    EXPECT_EQ(c.grad_accum_dtype(), DType::F32);

    EXPECT_FALSE(c.fp16.enabled);
    EXPECT_EQ(c.fp16.loss_scale, 0.0);
    EXPECT_EQ(c.fp16.initial_scale_power, 16);
    EXPECT_EQ(c.fp16.loss_scale_window, 1000);
    EXPECT_EQ(c.fp16.hysteresis, 2);
    EXPECT_FALSE(c.fp16.consecutive_hysteresis);
    EXPECT_EQ(c.fp16.min_loss_scale, 1.0);
    EXPECT_FALSE(c.bf16.immediate_grad_update);
    EXPECT_TRUE(c.bf16.check_grad_overflow);

    const auto& z = c.zero_optimization;
    EXPECT_EQ(z.stage, 0);
    EXPECT_EQ(z.reduce_bucket_size, 500000000);
    EXPECT_EQ(z.allgather_bucket_size, 500000000);
    EXPECT_FALSE(z.overlap_comm);
    EXPECT_EQ(z.sub_group_size, 1000000000);
    EXPECT_EQ(z.prefetch_bucket_size, 50000000);
    EXPECT_EQ(z.param_persistence_threshold, 100000);
    EXPECT_EQ(z.model_persistence_threshold, LLONG_MAX);
    EXPECT_EQ(z.max_live_parameters, 1000000000);
    EXPECT_EQ(z.max_reuse_distance, 1000000000);
    EXPECT_EQ(z.mics_shard_size, -1);
    EXPECT_FALSE(z.offload_param.has_value());
    EXPECT_FALSE(z.offload_optimizer.has_value());

    const auto& s = c.sections;
    EXPECT_EQ(s.flops_profiler.profile_step, 1);
    EXPECT_EQ(s.flops_profiler.module_depth, -1);
    EXPECT_TRUE(s.flops_profiler.detailed);
    EXPECT_EQ(s.tensorboard.job_name, "DeepSpeedJobName");
    EXPECT_EQ(s.wandb.project, "deepspeed");
    EXPECT_EQ(s.comet.samples_log_interval, 100);
    EXPECT_TRUE(s.comms_logger.prof_all);
    EXPECT_TRUE(s.timers.throughput_enabled);
    EXPECT_EQ(s.checkpoint.tag_validation, "WARN");
    EXPECT_EQ(s.aio.block_size, 1048576);
    EXPECT_EQ(s.aio.queue_depth, 8);
    EXPECT_FALSE(s.pipeline.stages.has_value());
    EXPECT_EQ(s.pipeline.partition, "best");
    EXPECT_EQ(s.elasticity.micro_batch_sizes, (std::vector<int64_t>{2, 4, 6}));
    EXPECT_EQ(s.eigenvalue.layer_name, "bert.encoder.layer");
}

TEST(ConfigDefaults, OverlapCommDefaultsTrueOnlyForStage3) {
    for (int stage = 0; stage <= 3; ++stage) {
        const std::string j = "{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": " +
                              std::to_string(stage) + "}}";
        EXPECT_EQ(ds::config::parse(j, 1).zero_optimization.overlap_comm, stage == 3) << stage;
    }
    const auto c = ds::config::parse(
        "{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": 3, \"overlap_comm\": false}}", 1);
    EXPECT_FALSE(c.zero_optimization.overlap_comm);
}

TEST(ConfigDefaults, OffloadSectionDefaults) {
    const auto c = ds::config::parse(
        "{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": 3, \"offload_param\": {}, "
        "\"offload_optimizer\": {}}}", 1);
    const auto& p = *c.zero_optimization.offload_param;
    EXPECT_EQ(p.device, "none");
    EXPECT_FALSE(p.nvme_path.has_value());
    EXPECT_EQ(p.buffer_count, 5);
    EXPECT_EQ(p.buffer_size, 100000000);
    EXPECT_EQ(p.max_in_cpu, 1000000000);
    EXPECT_FALSE(p.pin_memory);  // DeepSpeed's offload_config.py: pin_memory: bool = False
    const auto& o = *c.zero_optimization.offload_optimizer;
    EXPECT_EQ(o.device, "none");
    EXPECT_EQ(o.buffer_count, 4);
    EXPECT_FALSE(o.pin_memory);
    EXPECT_FALSE(o.pipeline_read);
    EXPECT_FALSE(o.pipeline_write);
    EXPECT_FALSE(o.fast_init);
    EXPECT_EQ(o.ratio, 1.0);
    EXPECT_FALSE(o.super_offload);
    EXPECT_EQ(o.cpuadam_cores_perc, 0.8);
}

// Optimizer params per type: DEEPSPEED_SEMANTICS.md §1.7, §2.1-§2.5.
TEST(ConfigDefaults, OptimizerParamDefaultsPerType) {
    auto opt = [](const char* type) {
        return *ds::config::parse(std::string("{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"") + type +
                                      "\"}}", 1).optimizer;
    };
    for (const char* t : {"adam", "adamw", "lamb", "lion"}) {
        const auto o = opt(t);
        EXPECT_EQ(o.lr, 1e-3) << t;
        EXPECT_EQ(o.beta1, 0.9) << t;
        EXPECT_EQ(o.beta2, 0.999) << t;
        EXPECT_EQ(o.weight_decay, 0.0) << t;
    }
    const auto adam = opt("adam");
    EXPECT_EQ(adam.eps, 1e-8);
    EXPECT_TRUE(adam.bias_correction);
    EXPECT_TRUE(adam.adamw_mode);
    EXPECT_FALSE(adam.torch_adam);
    EXPECT_TRUE(adam.fp32_optimizer_states);
    const auto lamb = opt("lamb");
    EXPECT_EQ(lamb.max_coeff, 10.0);
    EXPECT_EQ(lamb.min_coeff, 0.01);
    EXPECT_FALSE(lamb.eps_inside_sqrt);
    const auto sgd = opt("SGD");
    EXPECT_EQ(sgd.momentum, 0.0);
    EXPECT_EQ(sgd.dampening, 0.0);
    EXPECT_FALSE(sgd.nesterov);
    const auto adagrad = opt("adagrad");
    EXPECT_EQ(adagrad.lr, 1e-2);
    EXPECT_EQ(adagrad.eps, 1e-10);
    const auto onebit = opt("onebitlamb");
    EXPECT_EQ(onebit.freeze_step, 100000);
    EXPECT_EQ(onebit.coeff_beta, 0.9);
    EXPECT_EQ(onebit.factor_max, 4.0);
    EXPECT_EQ(onebit.factor_min, 0.5);
    EXPECT_EQ(onebit.factor_threshold, 0.1);
    EXPECT_EQ(onebit.comm_backend_name, "nccl");
    const auto z1 = opt("zerooneadam");
    EXPECT_EQ(z1.var_freeze_step, 100000);
    EXPECT_EQ(z1.var_update_scaler, 16);
    EXPECT_EQ(z1.local_step_scaler, 32678);
    EXPECT_EQ(z1.local_step_clipper, 16);
}

// Scheduler params per type: DEEPSPEED_SEMANTICS.md §3.2-§3.6.
TEST(ConfigDefaults, SchedulerParamDefaultsPerType) {
    auto sch = [](const std::string& type, const std::string& params) {
        return *ds::config::parse("{\"train_batch_size\": 4, \"scheduler\": {\"type\": \"" + type +
                                      "\", \"params\": " + params + "}}", 1).scheduler;
    };
    const auto r = sch("LRRangeTest", "{}");
    EXPECT_EQ(r.lr_range_test_min_lr, 1e-3);
    EXPECT_EQ(r.lr_range_test_step_size, 2000);
    EXPECT_EQ(r.lr_range_test_step_rate, 1.0);
    EXPECT_FALSE(r.lr_range_test_staircase);
    const auto oc = sch("OneCycle", "{\"cycle_min_lr\": 0.01, \"cycle_max_lr\": 0.1}");
    EXPECT_EQ(oc.decay_lr_rate, 0.0);
    EXPECT_EQ(oc.cycle_first_step_size, 2000);
    EXPECT_FALSE(oc.cycle_second_step_size.has_value());
    EXPECT_EQ(oc.cycle_first_stair_count, 0);
    EXPECT_FALSE(oc.cycle_second_stair_count.has_value());
    EXPECT_EQ(oc.decay_step_size, 0);
    EXPECT_TRUE(oc.cycle_momentum);
    EXPECT_EQ(oc.cycle_min_mom, 0.8);
    EXPECT_EQ(oc.cycle_max_mom, 0.9);
    EXPECT_EQ(oc.decay_mom_rate, 0.0);
    const auto w = sch("WarmupLR", "{}");
    EXPECT_EQ(w.warmup_min_lr, 0.0);
    EXPECT_FALSE(w.warmup_max_lr.has_value());  // no optimizer in the config: the client's lr
    EXPECT_EQ(w.warmup_num_steps, 1000);
    EXPECT_EQ(w.warmup_type, "log");
    const auto wd = sch("WarmupDecayLR", "{\"total_num_steps\": 10}");
    EXPECT_EQ(wd.warmup_max_lr, 0.001);
    EXPECT_EQ(wd.total_num_steps, 10);
    const auto wc = sch("WarmupCosineLR", "{\"total_num_steps\": 10}");
    EXPECT_EQ(wc.warmup_min_ratio, 0.0);
    EXPECT_EQ(wc.cos_min_ratio, 0.0001);
    EXPECT_EQ(wc.warmup_num_steps, 1000);
}

}  // namespace
