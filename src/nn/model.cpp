#include "nn/model.h"

#include <cmath>
#include <unordered_set>

#include "core/error.h"
#include "nn/checkpointed.h"
#include "nn/layer_scope.h"

namespace ds::nn {

namespace {

std::string join(const std::string& prefix, const std::string& name) {
    if (prefix.empty()) return name;
    if (name.empty()) return prefix;
    // A child already named within the model keeps its name.
    if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 && name[prefix.size()] == '.')
        return name;
    return prefix + "." + name;
}

// Full dotted names for every module and parameter (a parameter shared by
// two modules, e.g. the tied LM head, keeps its first owner's name), unique
// ids in forward order, and the parameter list.
void name_tree(Module& m, const std::string& full, uint32_t& next_id, std::unordered_set<Param*>& seen,
               std::vector<Param*>& out) {
    m.set_name(full);
    m.set_id(next_id++);
    for (Param* p : m.own_params()) {
        if (!seen.insert(p).second) continue;
        p->name = join(full, p->name);
        out.push_back(p);
    }
    for (Module* c : m.children()) name_tree(*c, join(full, c->name()), next_id, seen, out);
}

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t hash_name(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

void ensure_value(Param& p) {
    if (!p.value.defined())
        p.value = Tensor::empty(p.shape, DType::F32, Device::cpu(), Allocator::process(), MemCategory::Params);
}

}  // namespace

Model::Model(ModelSpec spec, std::unique_ptr<Module> root, std::unique_ptr<Loss> loss, IoContract io,
             std::vector<std::unique_ptr<Module>*> checkpoint_slots)
    : spec_(std::move(spec)),
      root_(std::move(root)),
      loss_(std::move(loss)),
      io_(io),
      slots_(std::move(checkpoint_slots)),
      cpu_pool_(std::make_unique<Allocator>()) {
    std::unordered_set<Param*> seen;
    name_tree(*root_, root_->name(), next_id_, seen, params_);
}

void Model::set_pipe_stage(const PipeStageRange& stage, const IoContract& io,
                           std::vector<std::unique_ptr<Module>*> checkpoint_slots) {
    DS_CHECK(checkpointed_ == 0, DS_ERR_INTERNAL, "set_pipe_stage: %lld layers are still checkpointed",
             static_cast<long long>(checkpointed_));
    stage_ = stage;
    io_ = io;
    slots_ = std::move(checkpoint_slots);
    params_.clear();
    std::unordered_set<Param*> seen;
    for (Param* p : all_params(*root_))
        if (seen.insert(p).second) params_.push_back(p);
}

Model::~Model() {
    // The modules first: what they still keep points at meter_ and cpu_pool_.
    root_.reset();
    loss_.reset();
}

int64_t Model::num_params() const {
    int64_t n = 0;
    for (const Param* p : params_) n += checked_numel(p->shape, p->name.c_str());
    return n;
}

uint64_t Model::seed() const {
    return spec_.type == ModelSpec::Type::Gpt ? spec_.gpt.seed : spec_.sequential.seed;
}

void Model::scope_layers(LayerHooks* hooks) {
    for (size_t i = 0; i < slots_.size(); ++i) {
        std::unique_ptr<Module>& slot = *slots_[i];
        if (auto* s = dynamic_cast<LayerScope*>(slot.get())) slot = s->release_inner();
        if (hooks != nullptr) slot = std::make_unique<LayerScope>(std::move(slot), i, hooks);
    }
}

std::vector<Param*> Model::layer_params(size_t index) {
    DS_CHECK(index < slots_.size(), DS_ERR_INTERNAL, "layer_params(%zu): the model has %zu layers", index,
             slots_.size());
    return all_params(**slots_[index]);
}

int64_t Model::checkpoint_layers(int64_t count, bool cpu_checkpointing) {
    scope_layers(nullptr);
    for (std::unique_ptr<Module>* slot : slots_) {  // a model bound again: undo the last engine's choice
        if (auto* c = dynamic_cast<Checkpointed*>(slot->get())) *slot = c->release_inner();
    }
    const int64_t n = std::min<int64_t>(std::max<int64_t>(count, 0), checkpointable_layers());
    for (int64_t i = 0; i < n; ++i) {
        std::unique_ptr<Module>& slot = *slots_[static_cast<size_t>(i)];
        auto wrapped = std::make_unique<Checkpointed>(std::move(slot), cpu_checkpointing ? cpu_pool_.get() : nullptr);
        wrapped->set_id(next_id_++);  // the inner modules keep their ids (dropout keys)
        slot = std::move(wrapped);
    }
    checkpointed_ = n;
    return n;
}

void init_normal(Param& p, uint64_t seed, double stddev) {
    ensure_value(p);
    float* v = p.value.data<float>();
    const uint64_t key = splitmix64(seed ^ hash_name(p.name));
    const int64_t n = p.value.numel();
    // Box-Muller over pairs of counter-based uniforms in (0, 1].
    for (int64_t i = 0; i < n; i += 2) {
        const uint64_t a = splitmix64(key + static_cast<uint64_t>(i));
        const uint64_t b = splitmix64(key + static_cast<uint64_t>(i) + 0x632BE59BD9B4E019ull);
        const double u1 = (static_cast<double>(a >> 11) + 1.0) * (1.0 / 9007199254740992.0);
        const double u2 = static_cast<double>(b >> 11) * (1.0 / 9007199254740992.0);
        const double r = std::sqrt(-2.0 * std::log(u1));
        const double t = 6.283185307179586 * u2;
        v[i] = static_cast<float>(stddev * r * std::cos(t));
        if (i + 1 < n) v[i + 1] = static_cast<float>(stddev * r * std::sin(t));
    }
}

void init_constant(Param& p, float value) {
    ensure_value(p);
    float* v = p.value.data<float>();
    for (int64_t i = 0; i < p.value.numel(); ++i) v[i] = value;
}

}  // namespace ds::nn
