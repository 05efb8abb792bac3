// Strict parsing of a model spec (model_spec.h). Typed reads go through the
// config's ObjectReader (same messages: "<path>: expected an integer, got
// ..."); the keys each object may hold are checked here so that an unknown
// key is named with a suggestion in the spec's own terms.
#include "nn/model_spec.h"

#include <cjson/cJSON.h>

#include <cmath>
#include <limits>

#include "config/json_reader.h"
#include "core/error.h"

namespace ds::nn {

namespace {

using config::detail::AutoRule;
using config::detail::ObjectReader;

constexpr int64_t kMaxDim = int64_t{1} << 24;  // any one size (16M): keeps products far from overflow

std::string at(const std::string& path, const char* key) { return json::join_path(path, key); }

void require(ObjectReader& r, const char* key, int64_t& out, int64_t lo, int64_t hi = kMaxDim) {
    DS_CHECK(r.read(key, out, lo, hi), DS_ERR_INVALID_CONFIG, "%s: required key is missing",
             r.key_path(key).c_str());
}

void read_prob(ObjectReader& r, const char* key, double& out) {
    if (!r.read(key, out)) return;
    DS_CHECK(out >= 0.0 && out < 1.0, DS_ERR_INVALID_CONFIG, "%s: %g is outside [0, 1)", r.key_path(key).c_str(),
             out);
}

void read_positive(ObjectReader& r, const char* key, double& out) {
    if (!r.read(key, out)) return;
    DS_CHECK(std::isfinite(out) && out > 0.0, DS_ERR_INVALID_CONFIG, "%s: %g must be finite and > 0",
             r.key_path(key).c_str(), out);
}

void read_seed(ObjectReader& r, uint64_t& out) {
    int64_t s = 0;
    if (r.read("seed", s, 0, std::numeric_limits<int64_t>::max())) out = static_cast<uint64_t>(s);
}

std::string type_of(const cJSON* root, const std::string& path) {
    const cJSON* t = cJSON_GetObjectItemCaseSensitive(root, "type");
    DS_CHECK(t != nullptr, DS_ERR_INVALID_CONFIG, "%s: required key is missing", at(path, "type").c_str());
    DS_CHECK(cJSON_IsString(t), DS_ERR_INVALID_CONFIG, "%s: expected a string, got %s",
             at(path, "type").c_str(), json::describe(t).c_str());
    return t->valuestring;
}

GptSpec parse_gpt(const cJSON* root) {
    check_spec_keys(root, "",
                    {"type", "vocab_size", "block_size", "n_layer", "n_head", "n_embd", "dropout", "embd_dropout",
                     "attn_dropout", "resid_dropout", "tied_embeddings", "bias", "layer_norm_eps",
                     "initializer_range", "seed", "moe", "pipeline"},
                    "a gpt spec");
    ObjectReader r(root, "", AutoRule::Reject);
    GptSpec g;
    require(r, "vocab_size", g.vocab_size, 1);
    require(r, "block_size", g.block_size, 1);
    require(r, "n_layer", g.n_layer, 0, 4096);
    require(r, "n_head", g.n_head, 1);
    require(r, "n_embd", g.n_embd, 1);
    DS_CHECK(g.n_embd % g.n_head == 0, DS_ERR_INVALID_CONFIG, "n_head: %lld does not divide n_embd = %lld",
             static_cast<long long>(g.n_head), static_cast<long long>(g.n_embd));
    read_prob(r, "dropout", g.dropout);
    g.embd_dropout = g.attn_dropout = g.resid_dropout = g.dropout;
    read_prob(r, "embd_dropout", g.embd_dropout);
    read_prob(r, "attn_dropout", g.attn_dropout);
    read_prob(r, "resid_dropout", g.resid_dropout);
    r.read("tied_embeddings", g.tied_embeddings);
    r.read("bias", g.bias);
    read_positive(r, "layer_norm_eps", g.layer_norm_eps);
    read_positive(r, "initializer_range", g.initializer_range);
    read_seed(r, g.seed);
    if (const cJSON* moe = cJSON_GetObjectItemCaseSensitive(root, "moe")) g.moe = parse_gpt_moe(moe, g.n_layer);
    if (const cJSON* pipe = cJSON_GetObjectItemCaseSensitive(root, "pipeline")) g.pipeline = parse_gpt_pipeline(pipe);
    // The largest tensors must be addressable: the embedding tables and one
    // layer's MLP weight.
    const double biggest = std::max(static_cast<double>(g.vocab_size), static_cast<double>(g.block_size)) *
                           static_cast<double>(g.n_embd) * 4.0;
    DS_CHECK(biggest < 9.0e15, DS_ERR_INVALID_CONFIG, "n_embd: %lld x vocab_size %lld is too large",
             static_cast<long long>(g.n_embd), static_cast<long long>(g.vocab_size));
    return g;
}

LayerSpec parse_layer(const cJSON* obj, const std::string& path, int64_t index, SequentialSpec& s,
                      int64_t& width) {
    DS_CHECK(cJSON_IsObject(obj), DS_ERR_INVALID_CONFIG, "%s: expected an object, got %s", path.c_str(),
             json::describe(obj).c_str());
    const std::string type = type_of(obj, path);
    ObjectReader r(obj, path, AutoRule::Reject);
    LayerSpec l;
    auto chain_in = [&](const char* key, int64_t in) {
        DS_CHECK(index == 0 || width == in, DS_ERR_INVALID_CONFIG,
                 "%s: %lld does not match the previous layer's output width %lld", r.key_path(key).c_str(),
                 static_cast<long long>(in), static_cast<long long>(width));
        if (index == 0) s.in_width = in;
    };
    auto needs_width = [&]() {
        DS_CHECK(index > 0, DS_ERR_INVALID_CONFIG,
                 "%s: a \"%s\" layer cannot be first (its width comes from the layer before it)",
                 at(path, "type").c_str(), type.c_str());
    };
    if (type == "linear") {
        check_spec_keys(obj, path, {"type", "in_features", "out_features", "bias"}, "a linear layer");
        l.kind = LayerSpec::Kind::Linear;
        require(r, "in_features", l.in_features, 1);
        require(r, "out_features", l.out_features, 1);
        r.read("bias", l.bias);
        chain_in("in_features", l.in_features);
        width = l.out_features;
    } else if (type == "gelu") {
        check_spec_keys(obj, path, {"type"}, "a gelu layer");
        l.kind = LayerSpec::Kind::Gelu;
        needs_width();
    } else if (type == "layernorm") {
        check_spec_keys(obj, path, {"type", "dim", "eps"}, "a layernorm layer");
        l.kind = LayerSpec::Kind::LayerNorm;
        require(r, "dim", l.dim, 1);
        read_positive(r, "eps", l.eps);
        chain_in("dim", l.dim);
        width = l.dim;
    } else if (type == "dropout") {
        check_spec_keys(obj, path, {"type", "p"}, "a dropout layer");
        l.kind = LayerSpec::Kind::Dropout;
        read_prob(r, "p", l.p);
        needs_width();
    } else if (type == "embedding") {
        check_spec_keys(obj, path, {"type", "num_embeddings", "embedding_dim"}, "an embedding layer");
        l.kind = LayerSpec::Kind::Embedding;
        require(r, "num_embeddings", l.num_embeddings, 1);
        require(r, "embedding_dim", l.embedding_dim, 1);
        DS_CHECK(index == 0, DS_ERR_INVALID_CONFIG,
                 "%s: an embedding reads token ids, so it can only be the first layer (it is layer %lld)",
                 at(path, "type").c_str(), static_cast<long long>(index));
        s.ids_input = true;
        width = l.embedding_dim;
    } else if (type == "transformer_layer") {
        check_spec_keys(obj, path,
                        {"type", "hidden_size", "heads", "intermediate_size", "attn_dropout_ratio",
                         "hidden_dropout_ratio", "pre_layer_norm", "causal", "layer_norm_eps"},
                        "a transformer_layer");
        l.kind = LayerSpec::Kind::TransformerLayer;
        require(r, "hidden_size", l.hidden_size, 1);
        require(r, "heads", l.heads, 1);
        DS_CHECK(l.hidden_size % l.heads == 0, DS_ERR_INVALID_CONFIG, "%s: %lld does not divide hidden_size = %lld",
                 r.key_path("heads").c_str(), static_cast<long long>(l.heads),
                 static_cast<long long>(l.hidden_size));
        l.intermediate_size = 4 * l.hidden_size;
        r.read("intermediate_size", l.intermediate_size, 1, kMaxDim);
        read_prob(r, "attn_dropout_ratio", l.attn_dropout_ratio);
        read_prob(r, "hidden_dropout_ratio", l.hidden_dropout_ratio);
        r.read("pre_layer_norm", l.pre_layer_norm);
        r.read("causal", l.causal);
        read_positive(r, "layer_norm_eps", l.eps);
        DS_CHECK(index > 0, DS_ERR_INVALID_CONFIG,
                 "%s: a transformer_layer needs [batch, seq, hidden] activations: put an embedding before it",
                 at(path, "type").c_str());
        chain_in("hidden_size", l.hidden_size);
        width = l.hidden_size;
    } else {
        fail(DS_ERR_INVALID_CONFIG,
             "%s: unknown layer type \"%s\" (known: linear, gelu, layernorm, dropout, embedding, "
             "transformer_layer)",
             at(path, "type").c_str(), type.c_str());
    }
    return l;
}

SequentialSpec parse_sequential(const cJSON* root) {
    check_spec_keys(root, "", {"type", "layers", "loss", "ignore_index", "initializer_range", "seed"},
                    "a sequential spec");
    ObjectReader r(root, "", AutoRule::Reject);
    SequentialSpec s;
    const cJSON* layers = r.get("layers");
    DS_CHECK(layers != nullptr, DS_ERR_INVALID_CONFIG, "layers: required key is missing");
    DS_CHECK(cJSON_IsArray(layers), DS_ERR_INVALID_CONFIG, "layers: expected an array, got %s",
             json::describe(layers).c_str());
    DS_CHECK(cJSON_GetArraySize(layers) > 0, DS_ERR_INVALID_CONFIG, "layers: the list is empty");
    int64_t width = 0;
    int64_t i = 0;
    for (const cJSON* c = layers->child; c; c = c->next, ++i)
        s.layers.push_back(parse_layer(c, "layers[" + std::to_string(i) + "]", i, s, width));
    s.out_width = width;
    std::string loss = "mse";
    r.read("loss", loss);
    if (loss == "cross_entropy")
        s.loss = SequentialSpec::LossKind::CrossEntropy;
    else if (loss == "mse")
        s.loss = SequentialSpec::LossKind::Mse;
    else
        fail(DS_ERR_INVALID_CONFIG, "loss: \"%s\" is not a loss (known: \"cross_entropy\", \"mse\")", loss.c_str());
    r.read("ignore_index", s.ignore_index, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
    read_positive(r, "initializer_range", s.initializer_range);
    read_seed(r, s.seed);
    return s;
}

}  // namespace

void check_spec_keys(const cJSON* obj, const std::string& path, const std::vector<std::string>& allowed,
                     const char* what) {
    for (const cJSON* c = obj->child; c; c = c->next) {
        bool ok = false;
        for (const std::string& a : allowed) ok = ok || a == c->string;
        if (ok) continue;
        const std::string p = json::join_path(path, json::short_key(c->string).c_str());
        const std::string best = json::closest_match(c->string, allowed);
        if (!best.empty())
            fail(DS_ERR_INVALID_CONFIG, "%s: unknown key in %s; did you mean \"%s\"?", p.c_str(), what,
                 best.c_str());
        fail(DS_ERR_INVALID_CONFIG, "%s: unknown key in %s", p.c_str(), what);
    }
}

const char* layer_kind_name(LayerSpec::Kind k) {
    switch (k) {
        case LayerSpec::Kind::Linear: return "linear";
        case LayerSpec::Kind::Gelu: return "gelu";
        case LayerSpec::Kind::LayerNorm: return "layernorm";
        case LayerSpec::Kind::Dropout: return "dropout";
        case LayerSpec::Kind::Embedding: return "embedding";
        case LayerSpec::Kind::TransformerLayer: return "transformer_layer";
    }
    return "?";
}

ModelSpec parse_model_spec(const std::string& text) {
    json::JsonPtr doc = json::parse_text(text, json::TextErrors{DS_ERR_INVALID_CONFIG, "", "model spec JSON"});
    const cJSON* root = doc.get();
    DS_CHECK(cJSON_IsObject(root), DS_ERR_INVALID_CONFIG, "model spec: expected a JSON object, got %s",
             json::describe(root).c_str());
    const std::string type = type_of(root, "");
    ModelSpec m;
    if (type == "gpt") {
        m.type = ModelSpec::Type::Gpt;
        m.gpt = parse_gpt(root);
    } else if (type == "sequential") {
        m.type = ModelSpec::Type::Sequential;
        m.sequential = parse_sequential(root);
    } else {
        fail(DS_ERR_INVALID_CONFIG, "type: unknown model type \"%s\" (known: \"gpt\", \"sequential\")",
             type.c_str());
    }
    return m;
}

}  // namespace ds::nn
