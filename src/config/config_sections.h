// Config sections the engine does not drive (yet): monitors, profiler,
// activation checkpointing, checkpoint I/O, aio, pipeline, autocast, and the
// DeepSpeed sections this library only accepts in their disabled form (amp,
// elasticity, progressive_layer_drop, eigenvalue). Included by config.h;
// keys and defaults are DeepSpeed 0.19.6 (DEEPSPEED_SEMANTICS.md §1.2, §1.5, §11-§13).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace ds::config {

using DType = ds::DType;

struct ActivationCheckpointingConfig {  // §13
    bool partition_activations = false;
    bool cpu_checkpointing = false;
    bool contiguous_memory_optimization = false;
    std::optional<int64_t> number_checkpoints;
    bool synchronize_checkpoint_boundary = false;
    bool profile = false;
};

struct FlopsProfilerConfig {  // §11
    bool enabled = false;
    double recompute_fwd_factor = 0.0;
    int64_t profile_step = 1;
    int64_t module_depth = -1;
    int64_t top_modules = 1;
    bool detailed = true;
    std::optional<std::string> output_file;
};

// `tensorboard` and `csv_monitor` share one shape (§12).
struct FileMonitorConfig {
    bool enabled = false;
    std::string output_path;
    std::string job_name = "DeepSpeedJobName";
};

struct WandbConfig {
    bool enabled = false;
    std::optional<std::string> group;
    std::optional<std::string> team;
    std::string project = "deepspeed";
};

struct CometConfig {
    bool enabled = false;
    int64_t samples_log_interval = 100;
    std::optional<std::string> project;
    std::optional<std::string> workspace;
    std::optional<std::string> api_key;
    std::optional<std::string> experiment_name;
    std::optional<std::string> experiment_key;
    std::optional<bool> online;
    std::optional<std::string> mode;
};

struct CommsLoggerConfig {
    bool enabled = false;
    bool verbose = false;
    bool prof_all = true;
    std::vector<std::string> prof_ops;
    bool debug = false;
};

struct TimersConfig {  // `timers.throughput`
    bool throughput_enabled = true;
    bool throughput_synchronized = true;
};

struct CheckpointWriterConfig {
    std::string type = "FAST";                 // MOCK | PYTHON | FAST (upper-cased)
    bool decoupled = false;
    int64_t io_buffer_size = 64LL * 1024 * 1024;
    bool io_buffer_double = true;
    bool show_statistics = false;
    std::optional<std::string> data_parallel;  // REPLICA | SOCKET | MACHINE (upper-cased)
    int64_t io_multiplier = 1;
};

struct CheckpointConfig {  // §1.5
    std::string tag_validation = "WARN";       // IGNORE | WARN | FAIL (upper-cased)
    bool load_universal = false;
    bool use_node_local_storage = false;
    bool parallel_write_pipeline_stage = false;
    bool checkpoint_serialization = true;
    std::optional<CheckpointWriterConfig> writer;
};

struct AioConfig {
    int64_t block_size = 1048576;
    int64_t queue_depth = 8;
    int64_t intra_op_parallelism = 1;
    bool single_submit = false;
    bool overlap_events = true;
    bool use_gds = false;
};

struct PipelineConfig {
    std::optional<int64_t> stages;             // None => "auto"
    std::string partition = "best";
    bool seed_layers = false;
    int64_t activation_checkpoint_interval = 0;
    bool pipe_partitioned = true;
    bool grad_partitioned = true;
};

// DeepSpeed's AutoTP training section: autotp_size ranks share each layer's
// weights (Megatron's split of the built-in GPT's attention and MLP; docs/PIPELINE.md
// "Tensor parallelism"). preset_model / partition_config choose a split for
// HuggingFace models; the built-in GPT's is fixed, so they are refused.
struct TensorParallelConfig {
    int64_t autotp_size = 0;  // 0 or 1: off
    std::optional<std::string> preset_model;
    bool tp_overlap_comm = false;
};

struct TorchAutocastConfig {
    bool enabled = false;
    std::optional<DType> dtype;
    std::optional<std::vector<std::string>> lower_precision_safe_modules;
};

// Sections accepted only in their disabled default form (parse() reports any
// other value as DS_ERR_UNSUPPORTED); kept typed so to_json shows them.
struct AmpConfig {
    bool enabled = false;
};

struct ElasticityConfig {
    bool enabled = false;
    int64_t max_train_batch_size = 2000;
    std::vector<int64_t> micro_batch_sizes = {2, 4, 6};
    int64_t min_gpus = 1;
    int64_t max_gpus = 10000;
    int64_t num_gpus_per_node = 1;
    int64_t model_parallel_size = 1;
    double min_time = 0.0;
    bool prefer_larger_batch = true;
    bool ignore_non_elastic_batch_info = false;
    double version = 0.2;
};

struct ProgressiveLayerDropConfig {
    bool enabled = false;
    double theta = 1.0;
    double gamma = 0.001;
};

struct EigenvalueConfig {
    bool enabled = false;
    bool verbose = false;
    int64_t max_iter = 100;
    double tol = 1e-2;
    double stability = 1e-6;
    int64_t gas_boundary_resolution = 1;
    std::string layer_name = "bert.encoder.layer";
    int64_t layer_num = 0;
};

struct SectionsConfig {
    ActivationCheckpointingConfig activation_checkpointing;
    FlopsProfilerConfig flops_profiler;
    FileMonitorConfig tensorboard;
    FileMonitorConfig csv_monitor;
    WandbConfig wandb;
    CometConfig comet;
    CommsLoggerConfig comms_logger;
    TimersConfig timers;
    CheckpointConfig checkpoint;
    AioConfig aio;
    PipelineConfig pipeline;
    TensorParallelConfig tensor_parallel;
    TorchAutocastConfig torch_autocast;
    AmpConfig amp;
    ElasticityConfig elasticity;
    ProgressiveLayerDropConfig progressive_layer_drop;
    EigenvalueConfig eigenvalue;
};

}  // namespace ds::config
