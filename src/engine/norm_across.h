// The gradient norm across model-parallel ranks (pipeline stages, tensor-
// parallel shards): each engine's boundary sum of squares and overflow over
// its own (data-parallel) ranks, combined over the ranks holding the other
// parts of the model, so every part clips and skips alike. Parameters another
// rank also holds are left out where they are not counted
// (Param::norm_excluded), so each counts once.
#pragma once

#include <functional>
#include <memory>

#include "comm/communicator.h"

namespace ds {

// For Engine::set_norm_combiner: the sums of squares of the ranks of `c`
// added in rank order (float64: the same total on every rank), the
// overflow flags or-ed. Keeps `c` alive.
std::function<void(double* sumsq, bool* overflow)> norm_sum_over(std::shared_ptr<comm::Communicator> c);

}  // namespace ds
