// How a sharded engine's parameters sit in the LOGICAL (unsplit) model, so
// that its checkpoints describe the logical model (docs/CHECKPOINTS.md,
// "Pipeline, tensor- and expert-parallel engines"): a pipeline stage holds
// some parameters whole, a tensor-parallel shard holds a selection of rows
// or columns of a split parameter, an expert shard holds some experts whole
// under their global names. Each local parameter keeps its logical name; the
// layout adds its logical full shape and which elements of it the local
// tensor holds, plus its place in the one-process registration order.
//
// A selection is along one dim: a list of [begin, end) index ranges of that
// dim, concatenated in order to form the local tensor (a column-parallel
// fused q,k,v weight keeps piece r of each of its 3 row blocks: 3 ranges
// along dim 0; a row-parallel weight one range along dim 1).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "core/tensor.h"

namespace ds {

namespace nn {
class Model;
}

struct ShardSelection {
    int32_t dim = -1;  // -1: the whole parameter
    std::vector<std::pair<int64_t, int64_t>> ranges;  // [begin, end) along `dim`, in local order
    bool whole() const { return dim < 0; }
    bool operator==(const ShardSelection& o) const { return dim == o.dim && ranges == o.ranges; }
};

// One local parameter in the logical model.
struct ShardedParam {
    std::string name;   // the logical name (the local parameter's own)
    Shape full_shape;   // the logical parameter's shape
    ShardSelection sel;
    // Its position in the one-process model's registration order: the
    // owning module's id (kept by cut_gpt_to_stage and the shard functions)
    // << 32 | its index among the module's own parameters.
    uint64_t order = 0;
};

// "whole", "dim 0 [0, 4) [8, 12)": for messages.
std::string selection_to_string(const ShardSelection& s);
// The local shape a selection of `full` has (checks the ranges lie inside
// full[dim]; DS_ERR_INTERNAL naming `name` otherwise).
Shape selected_shape(const Shape& full, const ShardSelection& s, const std::string& name);

// f(local_offset, full_offset, count) for every run of elements contiguous
// both in the local tensor (row-major, selected_shape) and in the full one,
// covering local elements [local_begin, local_end) in order.
void for_each_run(const Shape& full, const ShardSelection& s, int64_t local_begin, int64_t local_end,
                  const std::function<void(int64_t local, int64_t full, int64_t count)>& f);

// The layout of one rank's engine, and the communicator spanning every rank
// whose engines together hold the logical model (the engine's own
// communicator is its data axis only).
class ShardLayout {
public:
    ShardLayout(std::shared_ptr<comm::Communicator> world, std::vector<ShardedParam> params);
    comm::Communicator& world() const { return *world_; }
    const std::vector<ShardedParam>& params() const { return params_; }
    // The entry of a local parameter, or nullptr.
    const ShardedParam* find(const std::string& name) const;

private:
    std::shared_ptr<comm::Communicator> world_;
    std::vector<ShardedParam> params_;
    std::unordered_map<std::string, size_t> index_;
};

// The layout of an engine bound to `model` (shard_layout_build.cpp), read
// from its module tree, whatever made it: parameters of column- and
// row-parallel linears (nn/tp_linear.h) are selections of the unsplit
// layer's, every other parameter (a pipeline stage's, an expert's under its
// global name, a replicated one) is whole. `world`: every rank holding a
// part of the logical model.
std::shared_ptr<const ShardLayout> build_shard_layout(nn::Model& model, std::shared_ptr<comm::Communicator> world);

}  // namespace ds
