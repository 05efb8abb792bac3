// Who sends and who writes what when a sharded engine saves its LOGICAL
// model (docs/CHECKPOINTS.md, "Pipeline, tensor- and expert-parallel
// engines"), derived from the census (shard_census.h) alike on every rank.
//
// Copies of a piece (a pipeline's tied embedding on the first and last
// stage, a parameter replicated over tensor- or expert-parallel ranks, every
// data-parallel replica) count once: for each (name, selection) the
// data-parallel group with the lowest id that holds it is the source; its
// lowest rank sends the working weights, and its members holding optimizer
// ranges (which tile the piece: ZeRO-1/2 partitions, or the one ZeRO-0 rank
// that writes) send those. World rank 0 writes the model file; the optimizer
// state of the k-th trainable logical parameter is written whole, as one
// fragment [0, numel), by world rank k mod world size.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/shard_census.h"

namespace ds {

struct PlannedPiece {
    ShardSelection sel;
    int64_t numel = 0;             // elements of the piece (a local tensor)
    int32_t working_from = 0;      // the rank sending its working weights
    // Ranks and the ranges of the piece whose master/state they send (a
    // rank's ranges in its holding's order); together they tile [0, numel).
    std::vector<std::pair<int32_t, std::vector<std::pair<int64_t, int64_t>>>> optimizer;
};

struct PlannedParam {
    std::string name;
    Shape full_shape;
    int64_t numel = 0;
    bool trainable = false;
    int32_t writer = -1;  // writes its optimizer state (trainable, numel > 0, with_optimizer)
    std::vector<PlannedPiece> pieces;  // tiling the parameter
};

// In the one-process model's registration order. Throws (alike on every
// rank) DS_ERR_INTERNAL naming the parameter and ranks when the census is
// inconsistent: training states that differ, a name with two logical shapes
// or trainable flags, pieces that overlap or leave a gap, optimizer ranges
// that do not tile a piece (with_optimizer).
std::vector<PlannedParam> plan_sharded_save(const std::vector<RankCensus>& census, bool with_optimizer);

}  // namespace ds
