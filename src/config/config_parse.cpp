// parse(): the top level of a DeepSpeed config (reference §1.2), section
// dispatch, cross-section validation and the batch-size triple (§1.6).
#include <cctype>
#include <cstring>

#include "config/config.h"
#include "config/parse_internal.h"
#include "core/error.h"

namespace ds::config {

using namespace detail;

namespace {

// Every top-level key this parser reads (out-of-scope keys are separate).
const char* const kTopLevelKeys[] = {
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
    "managed_gradient_accumulation", "steps_per_print", "wall_clock_breakdown", "memory_breakdown",
    "dump_state", "gradient_clipping", "prescale_gradients", "gradient_predivide_factor",
    "gradient_allreduce_op", "communication_data_type", "seq_parallel_communication_data_type",
    "sparse_gradients", "disable_allgather", "zero_allow_untested_optimizer",
    "zero_force_ds_cpu_optimizer", "optimizer", "scheduler", "fp16", "bf16", "bfloat16", "amp",
    "torch_autocast", "zero_optimization", "activation_checkpointing", "flops_profiler",
    "tensorboard", "wandb", "csv_monitor", "comet", "comms_logger", "timers", "checkpoint",
    "data_types", "aio", "pipeline", "dataloader_drop_last", "vocabulary_size", "elasticity",
    "progressive_layer_drop", "eigenvalue", "use_data_before_expert_parallelism",
    "graph_harvesting", "log_level", "sequence_parallel_size", "ignored"};

constexpr int64_t kMaxBatchSamples = int64_t{1} << 32;

// Python's // (floor division) for b > 0.
int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && (a < 0)) --q;
    return q;
}

std::optional<int64_t> read_batch_key(ObjectReader& top, const char* key) {
    const cJSON* v = top.get_raw(key);
    if (!v || cJSON_IsNull(v) || is_auto(v)) return std::nullopt;  // "auto": derived below
    return as_int(v, key);
}

void require_positive(const char* key, int64_t v) {
    DS_CHECK(v > 0, DS_ERR_INVALID_CONFIG, "%s: must be > 0, got %lld", key, static_cast<long long>(v));
}

void resolve_batch(std::optional<int64_t> T, std::optional<int64_t> M, std::optional<int64_t> G,
                   int64_t W, Config& c) {
    DS_CHECK(T || M, DS_ERR_INVALID_CONFIG,
             "train_batch_size / train_micro_batch_size_per_gpu: at least one is required");
    if (T) require_positive("train_batch_size", *T);
    if (M) require_positive("train_micro_batch_size_per_gpu", *M);
    if (G) require_positive("gradient_accumulation_steps", *G);
    const long long w = static_cast<long long>(W);
    int64_t t = 0, m = 0, g = 0;
    std::string how;
    if (T && M && G) {
        t = *T, m = *M, g = *G;
    } else if (T && M) {
        t = *T, m = *M, g = floor_div(floor_div(t, m), W);
        how = format("train_batch_size %lld // train_micro_batch_size_per_gpu %lld // world_size %lld",
                     (long long)t, (long long)m, w);
    } else if (T && G) {
        t = *T, g = *G, m = floor_div(floor_div(t, W), g);
        how = format("train_batch_size %lld // world_size %lld // gradient_accumulation_steps %lld",
                     (long long)t, w, (long long)g);
    } else if (M && G) {
        m = *M, g = *G;
        DS_CHECK(!__builtin_mul_overflow(m, g, &t) && !__builtin_mul_overflow(t, W, &t),
                 DS_ERR_INVALID_CONFIG,
                 "train_batch_size: train_micro_batch_size_per_gpu * gradient_accumulation_steps * "
                 "world_size overflows");
    } else if (T) {
        t = *T, g = 1, m = floor_div(t, W);
        how = format("train_batch_size %lld // world_size %lld", (long long)t, w);
    } else {
        m = *M, g = 1;
        DS_CHECK(!__builtin_mul_overflow(m, W, &t), DS_ERR_INVALID_CONFIG,
                 "train_batch_size: train_micro_batch_size_per_gpu * world_size overflows");
    }
    if (!M)
        DS_CHECK(m > 0, DS_ERR_INVALID_CONFIG,
                 "train_micro_batch_size_per_gpu: derived value %lld is not > 0 (%s)", (long long)m,
                 how.c_str());
    if (!G)
        DS_CHECK(g > 0, DS_ERR_INVALID_CONFIG,
                 "gradient_accumulation_steps: derived value %lld is not > 0 (%s)", (long long)g,
                 how.c_str());
    int64_t prod = 0;
    const bool overflow = __builtin_mul_overflow(m, g, &prod) || __builtin_mul_overflow(prod, W, &prod);
    DS_CHECK(!overflow && prod == t, DS_ERR_INVALID_CONFIG,
             "train_batch_size: %lld != train_micro_batch_size_per_gpu %lld * "
             "gradient_accumulation_steps %lld * world_size %lld",
             (long long)t, (long long)m, (long long)g, w);
    // global_samples (int64) grows by train_batch_size every step: 2^32
    // samples per step leaves 2^31 steps before it could overflow.
    DS_CHECK(t <= kMaxBatchSamples, DS_ERR_INVALID_CONFIG,
             "train_batch_size: %lld is more than 2^32 samples per step (the int64 sample counter must not "
             "overflow within 2^31 steps)",
             (long long)t);
    c.train_batch_size = t;
    c.train_micro_batch_size_per_gpu = m;
    c.gradient_accumulation_steps = g;
}

void parse_scalars(ObjectReader& top, Config& c) {
    top.read("managed_gradient_accumulation", c.managed_gradient_accumulation);
    top.read("steps_per_print", c.steps_per_print, 1);
    top.read("wall_clock_breakdown", c.wall_clock_breakdown);
    top.read("memory_breakdown", c.memory_breakdown);
    top.read("dump_state", c.dump_state);
    top.read("gradient_clipping", c.gradient_clipping, 0.0);
    top.read("prescale_gradients", c.prescale_gradients);
    if (top.read("gradient_predivide_factor", c.gradient_predivide_factor, 0.0))
        DS_CHECK(c.gradient_predivide_factor > 0.0, DS_ERR_INVALID_CONFIG,
                 "gradient_predivide_factor: must be > 0, got 0");
    if (const cJSON* op = top.get("gradient_allreduce_op")) {
        std::string s = as_string(op, "gradient_allreduce_op");
        for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        DS_CHECK(s == "mean" || s == "sum", DS_ERR_INVALID_CONFIG,
                 "gradient_allreduce_op: must be \"mean\" or \"sum\", got \"%s\"", op->valuestring);
        c.gradient_allreduce_op = s;
    }
    if (const cJSON* d = top.get("communication_data_type"))
        if (!cJSON_IsNull(d)) c.communication_data_type = parse_comm_dtype(d, "communication_data_type");
    if (const cJSON* d = top.get("seq_parallel_communication_data_type"))
        c.seq_parallel_communication_data_type = parse_comm_dtype(d, "seq_parallel_communication_data_type");
    top.read("sparse_gradients", c.sparse_gradients);
    top.read("disable_allgather", c.disable_allgather);
    top.read("zero_allow_untested_optimizer", c.zero_allow_untested_optimizer);
    top.read("zero_force_ds_cpu_optimizer", c.zero_force_ds_cpu_optimizer);
    top.read("dataloader_drop_last", c.dataloader_drop_last);
    top.read("vocabulary_size", c.vocabulary_size, 1);
    top.read("use_data_before_expert_parallelism", c.use_data_before_expert_parallelism);
    top.read("graph_harvesting", c.graph_harvesting);
    top.read("log_level", c.log_level);
    // to_json()'s list of ignored settings: informational, dropped here.
    if (const cJSON* ig = top.get_raw("ignored")) {
        if (!cJSON_IsObject(ig)) fail_type("ignored", "an object of strings (to_json's list of ignored settings)", ig);
        for (const cJSON* e = ig->child; e; e = e->next)
            if (!cJSON_IsString(e)) fail_type(join_path("ignored", short_key(e->string)), "a string", e);
    }
    if (const cJSON* sp = top.get("sequence_parallel_size")) {
        // DeepSpeed divides the world size by it (§1.6); sequence parallelism is out of scope.
        const bool one = cJSON_IsNumber(sp) && sp->valuedouble == 1.0;
        DS_CHECK(one, DS_ERR_UNSUPPORTED,
                 "sequence_parallel_size: %s is not supported (sequence parallelism is outside this "
                 "library's scope; only 1 is accepted)",
                 describe(sp).c_str());
    }
}

void parse_section_keys(ObjectReader& top, Config& c) {
    SectionsConfig& s = c.sections;
    if (const cJSON* v = top.get("optimizer")) c.optimizer = parse_optimizer(v, "optimizer");
    if (const cJSON* v = top.get("scheduler")) c.scheduler = parse_scheduler(v, "scheduler");
    if (const cJSON* v = top.get("fp16")) parse_fp16(v, "fp16", c.fp16);
    const cJSON* bf16 = top.get("bf16");
    const cJSON* bfloat16 = top.get("bfloat16");
    DS_CHECK(!(bf16 && bfloat16), DS_ERR_INVALID_CONFIG,
             "bfloat16: older name of bf16; give only one of bf16 and bfloat16");
    if (bf16) parse_bf16(bf16, "bf16", c.bf16);
    if (bfloat16) parse_bf16(bfloat16, "bfloat16", c.bf16);
    if (const cJSON* v = top.get("zero_optimization")) parse_zero(v, "zero_optimization", c.zero_optimization);
    if (const cJSON* v = top.get("data_types")) parse_data_types(v, "data_types", c.data_types);
    if (const cJSON* v = top.get("activation_checkpointing"))
        parse_activation_checkpointing(v, "activation_checkpointing", s.activation_checkpointing);
    if (const cJSON* v = top.get("flops_profiler")) parse_flops_profiler(v, "flops_profiler", s.flops_profiler);
    if (const cJSON* v = top.get("tensorboard")) parse_file_monitor(v, "tensorboard", s.tensorboard);
    if (const cJSON* v = top.get("csv_monitor")) parse_file_monitor(v, "csv_monitor", s.csv_monitor);
    if (const cJSON* v = top.get("wandb")) parse_wandb(v, "wandb", s.wandb);
    if (const cJSON* v = top.get("comet")) parse_comet(v, "comet", s.comet);
    if (const cJSON* v = top.get("comms_logger")) parse_comms_logger(v, "comms_logger", s.comms_logger);
    if (const cJSON* v = top.get("timers")) parse_timers(v, "timers", s.timers);
    if (const cJSON* v = top.get("checkpoint")) parse_checkpoint(v, "checkpoint", s.checkpoint);
    if (const cJSON* v = top.get("aio")) parse_aio(v, "aio", s.aio);
    if (const cJSON* v = top.get("pipeline")) parse_pipeline(v, "pipeline", s.pipeline);
    if (const cJSON* v = top.get("torch_autocast")) parse_torch_autocast(v, "torch_autocast", s.torch_autocast);
    if (const cJSON* v = top.get("amp")) parse_amp(v, "amp", s.amp);
    if (const cJSON* v = top.get("elasticity")) parse_elasticity(v, "elasticity", s.elasticity);
    if (const cJSON* v = top.get("progressive_layer_drop"))
        parse_progressive_layer_drop(v, "progressive_layer_drop", s.progressive_layer_drop);
    if (const cJSON* v = top.get("eigenvalue")) parse_eigenvalue(v, "eigenvalue", s.eigenvalue);
}

bool zero_supported_optimizer(const std::string& type) {
    // Reference §1.7: the optimizer classes ZeRO accepts without zero_allow_untested_optimizer.
    return type == "adam" || type == "adamw" || type == "adagrad" || type == "lion" || type == "muon";
}

bool is_onebit(const std::string& type) {
    return type == "onebitadam" || type == "zerooneadam" || type == "onebitlamb";
}

void validate_cross(Config& c) {
    const ZeroConfig& z = c.zero_optimization;
    const long long stage = static_cast<long long>(z.stage);
    DS_CHECK(!(c.fp16.enabled && c.bf16.enabled), DS_ERR_INVALID_CONFIG,
             "fp16.enabled / bf16.enabled: both are true; enable at most one");
    DS_CHECK(!(c.gradient_allreduce_op == "sum" && z.stage == 3), DS_ERR_INVALID_CONFIG,
             "gradient_allreduce_op: \"sum\" is not allowed with ZeRO stage 3");
    if (c.fp16.fp16_master_weights_and_grads) {
        DS_CHECK(z.stage >= 1, DS_ERR_INVALID_CONFIG,
                 "fp16.fp16_master_weights_and_grads: requires ZeRO stage 1, 2 or 3, got stage %lld", stage);
        const bool cpu = z.offload_optimizer && z.offload_optimizer->device == "cpu";
        DS_CHECK(z.stage == 3 || cpu, DS_ERR_INVALID_CONFIG,
                 "fp16.fp16_master_weights_and_grads: with ZeRO stage %lld requires "
                 "zero_optimization.offload_optimizer.device \"cpu\"", stage);
    }
    DS_CHECK(!c.bf16.bf16_master_weights_and_grads || z.stage >= 1, DS_ERR_INVALID_CONFIG,
             "bf16.bf16_master_weights_and_grads: requires ZeRO stage 1, 2 or 3, got stage %lld", stage);
    if (c.optimizer) {
        OptimizerConfig& o = *c.optimizer;
        if (z.stage >= 1) {
            DS_CHECK(!is_onebit(o.type), DS_ERR_INVALID_CONFIG,
                     "optimizer.type: %s is incompatible with ZeRO (stage %lld)", o.type.c_str(), stage);
            DS_CHECK(zero_supported_optimizer(o.type) || c.zero_allow_untested_optimizer,
                     DS_ERR_INVALID_CONFIG,
                     "optimizer.type: %s is not a ZeRO-tested optimizer; set "
                     "zero_allow_untested_optimizer true to use it with ZeRO stage %lld",
                     o.type.c_str(), stage);
        }
        if ((o.type == "lamb" || o.type == "onebitlamb") && c.fp16.enabled)
            DS_CHECK(c.fp16.loss_scale == 0.0, DS_ERR_INVALID_CONFIG,
                     "fp16.loss_scale: %s requires dynamic loss scaling (0), got %g", o.type.c_str(),
                     c.fp16.loss_scale);
        if (c.bf16.bf16_optimizer_states) o.fp32_optimizer_states = false;
    }
    if (z.stage == 0 && c.grad_accum_dtype() != c.model_dtype())
        fail(DS_ERR_INVALID_CONFIG,
             "data_types.grad_accum_dtype: %s with a %s model is not a combination DeepSpeed builds "
             "at ZeRO stage 0 (use the model dtype)",
             dtype_name(c.grad_accum_dtype()), dtype_name(c.model_dtype()));
    // WarmupLR / WarmupDecayLR: warmup_max_lr None ("auto", null) => the optimizer's lr.
    if (c.scheduler && c.optimizer && c.optimizer->opaque_params_json.empty() &&
        (c.scheduler->type == "WarmupLR" || c.scheduler->type == "WarmupDecayLR") &&
        !c.scheduler->warmup_max_lr)
        c.scheduler->warmup_max_lr = c.optimizer->lr;
}

}  // namespace

Config parse(std::string_view json_text, int64_t world_size) {
    DS_CHECK(world_size >= 1, DS_ERR_INVALID_ARGUMENT, "world_size: must be >= 1, got %lld",
             static_cast<long long>(world_size));
    JsonPtr root = parse_json_text(json_text);
    DS_CHECK(cJSON_IsObject(root.get()), DS_ERR_INVALID_CONFIG,
             "config: the top level must be a JSON object, got %s", describe(root.get()).c_str());

    ObjectReader top(root.get(), "", AutoRule::Reject);
    // Unknown top-level keys first: a misspelt section name is the likeliest mistake.
    for (const char* k : kTopLevelKeys) top.get_raw(k);
    for (const cJSON* ch = root->child; ch; ch = ch->next)
        if (is_out_of_scope_key(ch->string)) top.get_raw(ch->string);
    top.finish();
    for (const cJSON* ch = root->child; ch; ch = ch->next)
        if (is_out_of_scope_key(ch->string)) check_out_of_scope(ch, ch->string);

    Config c;
    c.world_size = world_size;
    const auto T = read_batch_key(top, "train_batch_size");
    const auto M = read_batch_key(top, "train_micro_batch_size_per_gpu");
    const auto G = read_batch_key(top, "gradient_accumulation_steps");
    parse_scalars(top, c);
    parse_section_keys(top, c);
    validate_cross(c);
    resolve_batch(T, M, G, world_size, c);
    return c;
}

}  // namespace ds::config
