// The census of a sharded engine's world, taken at every checkpoint save
// and load: what each rank holds of the logical model (names, logical
// shapes, selections, and at a save the optimizer ranges it holds) and its
// training state, gathered to every rank by one exchange over the world.
// Every rank then derives the same decisions from the same table
// (sharded_save_plan.h), so no further agreement is needed.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/shard_layout.h"

namespace ds {

class Engine;

struct CensusParam {
    std::string name;
    Shape full_shape;
    ShardSelection sel;
    bool trainable = false;
    uint64_t order = 0;       // ShardedParam::order
    int64_t local_numel = 0;  // elements of the local tensor
    // Elements [offset, offset + length) of the local tensor whose fp32
    // master and optimizer state this rank holds (Strategy::holding, where
    // writes_optimizer_file()), in the holding's order.
    std::vector<std::pair<int64_t, int64_t>> held;
};

struct RankCensus {
    int32_t rank = 0;   // in the layout's world
    int32_t group = 0;  // the lowest world rank of this rank's data-parallel group (the engine's communicator)
    // The training state every rank must share (counters, optimizer step,
    // lr, betas, loss scaler, schedule index, dropout stream), as text.
    std::string state;
    std::vector<CensusParam> params;
};

// The training state of `e` as RankCensus::state text.
std::string training_state_text(const Engine& e);

// Collective over the layout's world and the engine's own communicator.
// with_holdings: also each parameter's held optimizer ranges.
std::vector<RankCensus> take_census(Engine& e, const ShardLayout& layout, bool with_holdings);

}  // namespace ds
