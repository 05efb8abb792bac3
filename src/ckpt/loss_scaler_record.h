// The loss scaler's state as a checkpoint records it: a plain record, so
// ckpt needs nothing from precision/ (which sits above it). The scaler uses
// this record as its own state type (precision::LossScalerState).
#pragma once

#include <cstdint>

namespace ds::ckpt {

// DeepSpeed's DynamicLossScaler attributes.
struct LossScalerRecord {
    double cur_scale;
    int64_t cur_iter;            // number of update() calls so far
    int64_t last_overflow_iter;  // cur_iter of the last overflow, -1 if none
    int64_t cur_hysteresis;      // overflows left to absorb before halving (>= 1)
};

}  // namespace ds::ckpt
