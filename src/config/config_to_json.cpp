// to_json(): the fully resolved config, every key DeepSpeed knows in the
// parsed sections with its value or default, in the reference's order
// (§1.2). The output is itself a valid input of parse().
#include "config/config.h"
#include "config/parse_internal.h"

namespace ds::config {

using namespace detail;

namespace {

void write_dtype(JsonWriter& w, const char* key, const std::optional<DType>& d) {
    if (d)
        w.value(key, dtype_name(*d));
    else
        w.null(key);
}

void write_strings(JsonWriter& w, const char* key, const std::vector<std::string>& v) {
    w.begin_array(key);
    for (const auto& s : v) w.value("", s);
    w.end_array();
}

void write_fp16(JsonWriter& w, const Fp16Config& f) {
    w.begin_object("fp16");
    w.value("enabled", f.enabled);
    w.value("auto_cast", f.auto_cast);
    w.value("loss_scale", f.loss_scale);
    w.value("initial_scale_power", f.initial_scale_power);
    w.value("loss_scale_window", f.loss_scale_window);
    w.value("hysteresis", f.hysteresis);
    w.value("consecutive_hysteresis", f.consecutive_hysteresis);
    w.value("min_loss_scale", static_cast<int64_t>(f.min_loss_scale));
    w.value("fp16_master_weights_and_grads", f.fp16_master_weights_and_grads);
    w.end_object();
}

void write_bf16(JsonWriter& w, const Bf16Config& b) {
    w.begin_object("bf16");
    w.value("enabled", b.enabled);
    w.value("immediate_grad_update", b.immediate_grad_update);
    w.value("check_grad_overflow", b.check_grad_overflow);
    w.value("bf16_master_weights_and_grads", b.bf16_master_weights_and_grads);
    w.value("bf16_optimizer_states", b.bf16_optimizer_states);
    w.end_object();
}

void write_offload_param(JsonWriter& w, const std::optional<OffloadParamConfig>& o) {
    if (!o) return w.null("offload_param");
    w.begin_object("offload_param");
    w.value("device", o->device);
    w.optional("nvme_path", o->nvme_path);
    w.value("buffer_count", o->buffer_count);
    w.value("buffer_size", o->buffer_size);
    w.value("max_in_cpu", o->max_in_cpu);
    w.value("pin_memory", o->pin_memory);
    w.end_object();
}

void write_offload_optimizer(JsonWriter& w, const std::optional<OffloadOptimizerConfig>& o) {
    if (!o) return w.null("offload_optimizer");
    w.begin_object("offload_optimizer");
    w.value("device", o->device);
    w.optional("nvme_path", o->nvme_path);
    w.value("buffer_count", o->buffer_count);
    w.value("pin_memory", o->pin_memory);
    w.value("pipeline_read", o->pipeline_read);
    w.value("pipeline_write", o->pipeline_write);
    w.value("fast_init", o->fast_init);
    w.value("ratio", o->ratio);
    w.value("super_offload", o->super_offload);
    w.value("cpuadam_cores_perc", o->cpuadam_cores_perc);
    w.end_object();
}

void write_zero(JsonWriter& w, const ZeroConfig& z) {
    w.begin_object("zero_optimization");
    w.value("stage", z.stage);
    w.value("contiguous_gradients", z.contiguous_gradients);
    w.value("reduce_scatter", z.reduce_scatter);
    w.value("reduce_bucket_size", z.reduce_bucket_size);
    w.value("use_multi_rank_bucket_allreduce", z.use_multi_rank_bucket_allreduce);
    w.value("allgather_partitions", z.allgather_partitions);
    w.value("allgather_bucket_size", z.allgather_bucket_size);
    w.value("overlap_comm", z.overlap_comm);
    w.value("load_from_fp32_weights", z.load_from_fp32_weights);
    w.value("elastic_checkpoint", z.elastic_checkpoint);
    write_offload_param(w, z.offload_param);
    write_offload_optimizer(w, z.offload_optimizer);
    w.value("sub_group_size", z.sub_group_size);
    w.value("prefetch_bucket_size", z.prefetch_bucket_size);
    w.value("param_persistence_threshold", z.param_persistence_threshold);
    w.value("model_persistence_threshold", z.model_persistence_threshold);
    w.value("max_live_parameters", z.max_live_parameters);
    w.value("max_reuse_distance", z.max_reuse_distance);
    w.value("gather_16bit_weights_on_model_save", z.gather_16bit_weights_on_model_save);
    w.value("module_granularity_threshold", z.module_granularity_threshold);
    w.value("use_all_reduce_for_fetch_params", z.use_all_reduce_for_fetch_params);
    w.value("allgather_sequential", z.allgather_sequential);
    w.value("ignore_unused_parameters", z.ignore_unused_parameters);
    w.value("legacy_stage1", false);
    w.value("round_robin_gradients", z.round_robin_gradients);
    w.value("zero_hpz_partition_size", z.zero_hpz_partition_size);
    w.value("zero_quantized_weights", z.zero_quantized_weights);
    w.value("zero_quantized_nontrainable_weights", z.zero_quantized_nontrainable_weights);
    w.value("zero_quantized_gradients", z.zero_quantized_gradients);
    if (z.zeropp_loco_param) {
        w.begin_object("zeropp_loco_param");
        w.value("err_beta", z.zeropp_loco_param->err_beta);
        w.value("reset_T", z.zeropp_loco_param->reset_T);
        w.end_object();
    } else {
        w.null("zeropp_loco_param");
    }
    w.value("mics_shard_size", z.mics_shard_size);
    w.value("mics_hierarchical_params_gather", z.mics_hierarchical_params_gather);
    w.value("memory_efficient_linear", z.memory_efficient_linear);
    w.value("pipeline_loading_checkpoint", z.pipeline_loading_checkpoint);
    w.value("override_module_apply", z.override_module_apply);
    w.value("log_trace_cache_warnings", z.log_trace_cache_warnings);
    w.value("enable_sanity_checks", z.enable_sanity_checks);
    w.value("save_muon_momentum_buffer_in_memory", z.save_muon_momentum_buffer_in_memory);
    w.begin_object("leaf_module");
    w.end_object();
    w.null("zenflow");
    w.end_object();
}

void write_file_monitor(JsonWriter& w, const char* key, const FileMonitorConfig& m) {
    w.begin_object(key);
    w.value("enabled", m.enabled);
    w.value("output_path", m.output_path);
    w.value("job_name", m.job_name);
    w.end_object();
}

}  // namespace

namespace detail {

void write_sections(JsonWriter& w, const SectionsConfig& s) {
    const auto& ac = s.activation_checkpointing;
    w.begin_object("activation_checkpointing");
    w.value("partition_activations", ac.partition_activations);
    w.value("cpu_checkpointing", ac.cpu_checkpointing);
    w.value("contiguous_memory_optimization", ac.contiguous_memory_optimization);
    w.optional("number_checkpoints", ac.number_checkpoints);
    w.value("synchronize_checkpoint_boundary", ac.synchronize_checkpoint_boundary);
    w.value("profile", ac.profile);
    w.end_object();

    const auto& fp = s.flops_profiler;
    w.begin_object("flops_profiler");
    w.value("enabled", fp.enabled);
    w.value("recompute_fwd_factor", fp.recompute_fwd_factor);
    w.value("profile_step", fp.profile_step);
    w.value("module_depth", fp.module_depth);
    w.value("top_modules", fp.top_modules);
    w.value("detailed", fp.detailed);
    w.optional("output_file", fp.output_file);
    w.end_object();

    write_file_monitor(w, "tensorboard", s.tensorboard);
    w.begin_object("wandb");
    w.value("enabled", s.wandb.enabled);
    w.optional("group", s.wandb.group);
    w.optional("team", s.wandb.team);
    w.value("project", s.wandb.project);
    w.end_object();
    write_file_monitor(w, "csv_monitor", s.csv_monitor);
    const auto& cm = s.comet;
    w.begin_object("comet");
    w.value("enabled", cm.enabled);
    w.value("samples_log_interval", cm.samples_log_interval);
    w.optional("project", cm.project);
    w.optional("workspace", cm.workspace);
    w.optional("api_key", cm.api_key);
    w.optional("experiment_name", cm.experiment_name);
    w.optional("experiment_key", cm.experiment_key);
    w.optional("online", cm.online);
    w.optional("mode", cm.mode);
    w.end_object();

    w.begin_object("comms_logger");
    w.value("enabled", s.comms_logger.enabled);
    w.value("verbose", s.comms_logger.verbose);
    w.value("prof_all", s.comms_logger.prof_all);
    write_strings(w, "prof_ops", s.comms_logger.prof_ops);
    w.value("debug", s.comms_logger.debug);
    w.end_object();

    w.begin_object("timers");
    w.begin_object("throughput");
    w.value("enabled", s.timers.throughput_enabled);
    w.value("synchronized", s.timers.throughput_synchronized);
    w.end_object();
    w.end_object();

    const auto& ck = s.checkpoint;
    w.begin_object("checkpoint");
    w.value("tag_validation", ck.tag_validation);
    w.value("load_universal", ck.load_universal);
    w.value("use_node_local_storage", ck.use_node_local_storage);
    w.begin_object("parallel_write");
    w.value("pipeline_stage", ck.parallel_write_pipeline_stage);
    w.end_object();
    w.value("checkpoint_serialization", ck.checkpoint_serialization);
    if (ck.writer) {
        w.begin_object("writer");
        w.value("type", ck.writer->type);
        w.value("decoupled", ck.writer->decoupled);
        w.value("io_buffer_size", ck.writer->io_buffer_size);
        w.value("io_buffer_double", ck.writer->io_buffer_double);
        w.value("show_statistics", ck.writer->show_statistics);
        w.optional("data_parallel", ck.writer->data_parallel);
        w.value("io_multiplier", ck.writer->io_multiplier);
        w.end_object();
    } else {
        w.null("writer");
    }
    w.end_object();
}

}  // namespace detail

std::string to_json(const Config& c) {
    const SectionsConfig& s = c.sections;
    JsonWriter w;
    w.begin_object();
    w.value("train_batch_size", c.train_batch_size);
    w.value("train_micro_batch_size_per_gpu", c.train_micro_batch_size_per_gpu);
    w.value("gradient_accumulation_steps", c.gradient_accumulation_steps);
    w.value("managed_gradient_accumulation", c.managed_gradient_accumulation);
    w.optional("steps_per_print", c.steps_per_print);
    w.value("wall_clock_breakdown", c.wall_clock_breakdown);
    w.value("memory_breakdown", c.memory_breakdown);
    w.value("dump_state", c.dump_state);
    w.value("gradient_clipping", c.gradient_clipping);
    w.value("prescale_gradients", c.prescale_gradients);
    w.value("gradient_predivide_factor", c.gradient_predivide_factor);
    w.value("gradient_allreduce_op", c.gradient_allreduce_op);
    write_dtype(w, "communication_data_type", c.communication_data_type);
    w.value("seq_parallel_communication_data_type", dtype_name(c.seq_parallel_communication_data_type));
    w.value("sparse_gradients", c.sparse_gradients);
    w.value("disable_allgather", c.disable_allgather);
    w.value("zero_allow_untested_optimizer", c.zero_allow_untested_optimizer);
    w.value("zero_force_ds_cpu_optimizer", c.zero_force_ds_cpu_optimizer);
    write_optimizer(w, "optimizer", c.optimizer);
    write_scheduler(w, "scheduler", c.scheduler);
    write_fp16(w, c.fp16);
    write_bf16(w, c.bf16);
    w.begin_object("amp");
    w.value("enabled", s.amp.enabled);
    w.end_object();
    w.begin_object("torch_autocast");
    w.value("enabled", s.torch_autocast.enabled);
    write_dtype(w, "dtype", s.torch_autocast.dtype);
    if (s.torch_autocast.lower_precision_safe_modules)
        write_strings(w, "lower_precision_safe_modules", *s.torch_autocast.lower_precision_safe_modules);
    else
        w.null("lower_precision_safe_modules");
    w.end_object();
    write_zero(w, c.zero_optimization);
    write_sections(w, s);

    w.begin_object("data_types");
    write_dtype(w, "grad_accum_dtype", c.data_types.grad_accum_dtype);
    write_dtype(w, "param_dtype", c.data_types.param_dtype);
    write_dtype(w, "buffer_dtype", c.data_types.buffer_dtype);
    w.end_object();

    w.begin_object("aio");
    w.value("block_size", s.aio.block_size);
    w.value("queue_depth", s.aio.queue_depth);
    w.value("intra_op_parallelism", s.aio.intra_op_parallelism);
    w.value("single_submit", s.aio.single_submit);
    w.value("overlap_events", s.aio.overlap_events);
    w.value("use_gds", s.aio.use_gds);
    w.end_object();

    const auto& p = s.pipeline;
    w.begin_object("pipeline");
    if (p.stages)
        w.value("stages", *p.stages);
    else
        w.value("stages", "auto");
    w.value("partition", p.partition);
    w.value("seed_layers", p.seed_layers);
    w.value("activation_checkpoint_interval", p.activation_checkpoint_interval);
    w.value("pipe_partitioned", p.pipe_partitioned);
    w.value("grad_partitioned", p.grad_partitioned);
    w.end_object();

    w.value("dataloader_drop_last", c.dataloader_drop_last);
    w.optional("vocabulary_size", c.vocabulary_size);

    const auto& e = s.elasticity;
    w.begin_object("elasticity");
    w.value("enabled", e.enabled);
    w.value("max_train_batch_size", e.max_train_batch_size);
    w.begin_array("micro_batch_sizes");
    for (int64_t m : e.micro_batch_sizes) w.value("", m);
    w.end_array();
    w.value("min_gpus", e.min_gpus);
    w.value("max_gpus", e.max_gpus);
    w.value("num_gpus_per_node", e.num_gpus_per_node);
    w.value("model_parallel_size", e.model_parallel_size);
    w.value("min_time", e.min_time);
    w.value("prefer_larger_batch", e.prefer_larger_batch);
    w.value("ignore_non_elastic_batch_info", e.ignore_non_elastic_batch_info);
    w.value("version", e.version);
    w.end_object();

    w.begin_object("progressive_layer_drop");
    w.value("enabled", s.progressive_layer_drop.enabled);
    w.value("theta", s.progressive_layer_drop.theta);
    w.value("gamma", s.progressive_layer_drop.gamma);
    w.end_object();

    const auto& ev = s.eigenvalue;
    w.begin_object("eigenvalue");
    w.value("enabled", ev.enabled);
    w.value("verbose", ev.verbose);
    w.value("max_iter", ev.max_iter);
    w.value("tol", ev.tol);
    w.value("stability", ev.stability);
    w.value("gas_boundary_resolution", ev.gas_boundary_resolution);
    w.value("layer_name", ev.layer_name);
    w.value("layer_num", ev.layer_num);
    w.end_object();

    w.value("use_data_before_expert_parallelism", c.use_data_before_expert_parallelism);
    w.value("graph_harvesting", c.graph_harvesting);
    w.optional("log_level", c.log_level);
    // Settings accepted with no effect here, with the reason (only when there
    // are any). parse() accepts this entry back and drops it: the keys listed
    // are also above with their values, so a re-parse lists them again.
    const std::vector<IgnoredSetting> ignored = ignored_settings(c);
    if (!ignored.empty()) {
        w.begin_object("ignored");
        for (const IgnoredSetting& i : ignored) w.value(i.key.c_str(), i.why);
        w.end_object();
    }
    w.end_object();
    return w.str();
}

}  // namespace ds::config
