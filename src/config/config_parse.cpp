// parse(): the top level of a DeepSpeed config (DEEPSPEED_SEMANTICS.md §1.2): unknown and
// out-of-scope keys, the declared fields (config_fields_*.cpp),
// cross-section validation and the batch-size triple (§1.6).
#include <cctype>
#include <cstring>

#include "config/config.h"
#include "config/field_visitor.h"
#include "config/parse_internal.h"
#include "core/error.h"

namespace ds::config {

using namespace detail;

namespace {

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

bool zero_supported_optimizer(const std::string& type) {
    // DEEPSPEED_SEMANTICS.md §1.7: the optimizer classes ZeRO accepts without zero_allow_untested_optimizer.
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
    for (const std::string& k : top_level_keys()) top.get_raw(k.c_str());
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
    FieldReader fields(top);
    visit(fields, c);  // every other key, as declared in config_fields_*.cpp
    validate_cross(c);
    resolve_batch(T, M, G, world_size, c);
    return c;
}

}  // namespace ds::config
