// The JSON spec of a built-in model (docs/MODELS.md): a GPT or a sequential
// list of layer specs. Parsing is strict like the config's: unknown keys,
// wrong types, out-of-range values and inconsistent sizes are
// DS_ERR_INVALID_CONFIG naming the key path ("n_head: 5 does not divide
// n_embd = 64", "layers[2].in_features: ..."). Nothing here builds layers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct cJSON;  // cjson/cJSON.h

namespace ds::nn {

// The GPT's optional "moe" object (docs/MODELS.md, "Mixture of Experts"):
// layer i (0-based) with (i + 1) % every == 0 gets an MoE layer in place of
// its MLP (Megatron-DeepSpeed's expert_interval placement). Defaults are
// DeepSpeed's MoE() ones; aux_loss_coef is Megatron-DeepSpeed's
// --moe-loss-coeff default.
struct GptMoeSpec {
    bool enabled = false;      // the key is present
    int64_t num_experts = 0;   // required
    int64_t ep_size = 1;       // > 1: expert parallelism (engine/expert_parallel_engine.h)
    int64_t k = 1;
    double capacity_factor = 1.0;
    double eval_capacity_factor = 1.0;
    int64_t min_capacity = 4;
    std::string noisy_gate_policy = "None";  // "None", "Jitter", "RSample"
    bool drop_tokens = true;
    bool use_rts = true;
    bool use_residual = false;
    bool top2_2nd_expert_sampling = true;
    // Experts split by tensor parallelism too: not built (true with
    // tensor_parallel.autotp_size > 1 is DS_ERR_UNSUPPORTED).
    bool enable_expert_tensor_parallelism = false;
    double aux_loss_coef = 0.1;
    int64_t every = 2;
};

// The GPT's optional "pipeline" object: DeepSpeed's PipelineModule
// (num_stages, partition_method, activation_checkpoint_interval). The engine
// checks partition_method (ds::pipe::partition_layers) and cuts the model
// into stages (gpt_pipe.h); here only its shape is checked.
struct GptPipeSpec {
    int64_t stages = 1;
    std::string partition_method = "parameters";
    int64_t activation_checkpoint_interval = 0;  // 0: no activation checkpointing
};

// GPT-2: token + position embeddings, n_layer pre-LN causal transformer
// layers, final LayerNorm, an LM head (tied to the token embedding by
// default); the loss is the cross-entropy of the logits against the targets.
struct GptSpec {
    int64_t vocab_size = 0;   // required
    int64_t block_size = 0;   // required: the longest sequence
    int64_t n_layer = 0;      // required
    int64_t n_head = 0;       // required
    int64_t n_embd = 0;       // required, a multiple of n_head
    double dropout = 0.0;     // default of the three below
    double embd_dropout = 0.0;
    double attn_dropout = 0.0;
    double resid_dropout = 0.0;
    bool tied_embeddings = true;
    bool bias = true;
    double layer_norm_eps = 1e-5;
    double initializer_range = 0.02;
    uint64_t seed = 42;       // parameter init and the dropout stream
    GptMoeSpec moe;
    GptPipeSpec pipeline;
};

// One entry of a sequential model's "layers".
struct LayerSpec {
    enum class Kind { Linear, Gelu, LayerNorm, Dropout, Embedding, TransformerLayer };
    Kind kind = Kind::Linear;
    // linear
    int64_t in_features = 0, out_features = 0;
    bool bias = true;
    // layernorm
    int64_t dim = 0;
    double eps = 1e-5;
    // dropout
    double p = 0.0;
    // embedding
    int64_t num_embeddings = 0, embedding_dim = 0;
    // transformer_layer
    int64_t hidden_size = 0, heads = 0, intermediate_size = 0;
    double attn_dropout_ratio = 0.0, hidden_dropout_ratio = 0.0;
    bool pre_layer_norm = true, causal = true;
};

struct SequentialSpec {
    std::vector<LayerSpec> layers;  // at least one
    enum class LossKind { CrossEntropy, Mse } loss = LossKind::Mse;
    int64_t ignore_index = -100;    // cross_entropy
    double initializer_range = 0.02;
    uint64_t seed = 42;
    // Derived while parsing: the input is token ids (first layer an
    // embedding) or features of width in_width; the output's width.
    bool ids_input = false;
    int64_t in_width = 0;
    int64_t out_width = 0;
};

struct ModelSpec {
    enum class Type { Gpt, Sequential } type = Type::Gpt;
    GptSpec gpt;
    SequentialSpec sequential;
};

// Throws ds::Error(DS_ERR_INVALID_CONFIG) naming the key path and the rule.
ModelSpec parse_model_spec(const std::string& json);

const char* layer_kind_name(LayerSpec::Kind k);

// Every key of `obj` must be in `allowed`; else DS_ERR_INVALID_CONFIG
// "<path>.<key>: unknown key in <what>" with the closest allowed key.
void check_spec_keys(const cJSON* obj, const std::string& path, const std::vector<std::string>& allowed,
                     const char* what);

// moe_spec.cpp: the GPT's "moe" object (a cJSON object), checked as above
// with paths "moe.<key>"; n_layer from the GPT spec bounds "every".
GptMoeSpec parse_gpt_moe(const cJSON* obj, int64_t n_layer);
// gpt_pipe_spec.cpp: the GPT's "pipeline" object, paths "pipeline.<key>".
GptPipeSpec parse_gpt_pipeline(const cJSON* obj);

}  // namespace ds::nn
