// build_shard_layout (shard_layout.h): a sharded engine's layout from its
// model's module tree.
#include <unordered_map>

#include "core/error.h"
#include "engine/shard_layout.h"
#include "nn/layer_scope.h"
#include "nn/model.h"
#include "nn/tp_linear.h"

namespace ds {

namespace {

struct Owner {
    nn::Module* module;
    uint32_t position;  // among the module's own parameters
};

// The first module (depth first, forward order: the order Model numbers
// modules and collects parameters in) owning each parameter. A LayerScope
// shares its inner module's parameters and has an id of its own: the inner
// module is the owner.
void find_owners(nn::Module& m, std::unordered_map<const nn::Param*, Owner>& out) {
    if (auto* scope = dynamic_cast<nn::LayerScope*>(&m)) {
        find_owners(scope->inner(), out);
        return;
    }
    uint32_t pos = 0;
    for (nn::Param* p : m.own_params()) out.emplace(p, Owner{&m, pos++});
    for (nn::Module* c : m.children()) find_owners(*c, out);
}

// The selection a tensor-parallel linear's parameter is of the unsplit
// layer's (nn/tp_linear.h shard()), and that layer's shape; whole otherwise.
void tensor_parallel_selection(nn::Module& m, const nn::Param* p, ShardedParam& sp) {
    if (auto* c = dynamic_cast<nn::ColumnParallelLinear*>(&m)) {
        const nn::TpGroup& g = c->group();
        if (g.size <= 1 || !(p == &c->weight() || (c->has_bias() && p == &c->bias()))) return;
        // Rank r keeps piece r of each of the `blocks` blocks of output rows.
        const int64_t piece = c->out_features() / c->blocks(), block = piece * g.size;
        sp.full_shape[0] = block * c->blocks();
        sp.sel.dim = 0;
        for (int64_t k = 0; k < c->blocks(); ++k)
            sp.sel.ranges.push_back({k * block + g.rank * piece, k * block + (g.rank + 1) * piece});
    } else if (auto* r = dynamic_cast<nn::RowParallelLinear*>(&m)) {
        const nn::TpGroup& g = r->group();
        if (g.size <= 1 || p != &r->weight()) return;  // the bias is whole on every rank
        const int64_t piece = r->in_features();
        sp.full_shape[1] = piece * g.size;
        sp.sel.dim = 1;
        sp.sel.ranges.push_back({g.rank * piece, (g.rank + 1) * piece});
    }
}

}  // namespace

std::shared_ptr<const ShardLayout> build_shard_layout(nn::Model& model, std::shared_ptr<comm::Communicator> world) {
    DS_CHECK(world != nullptr, DS_ERR_INTERNAL, "build_shard_layout without a communicator");
    std::unordered_map<const nn::Param*, Owner> owners;
    find_owners(model.root(), owners);
    std::vector<ShardedParam> params;
    for (nn::Param* p : model.params()) {
        auto it = owners.find(p);
        DS_CHECK(it != owners.end(), DS_ERR_INTERNAL, "shard layout: parameter '%s' has no module in the model",
                 p->name.c_str());
        ShardedParam sp;
        sp.name = p->name;
        sp.full_shape = p->shape;
        sp.order = (uint64_t{it->second.module->id()} << 32) | it->second.position;
        tensor_parallel_selection(*it->second.module, p, sp);
        DS_CHECK(selected_shape(sp.full_shape, sp.sel, sp.name) == p->shape, DS_ERR_INTERNAL,
                 "shard layout: parameter '%s' has shape %s, its selection %s of %s has another",
                 p->name.c_str(), shape_to_string(p->shape).c_str(), selection_to_string(sp.sel).c_str(),
                 shape_to_string(sp.full_shape).c_str());
        params.push_back(std::move(sp));
    }
    return std::make_shared<const ShardLayout>(std::move(world), std::move(params));
}

}  // namespace ds
