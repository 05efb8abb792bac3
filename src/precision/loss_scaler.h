// fp16 loss scaling (DEEPSPEED_SEMANTICS.md §4.1, §4.2).
//
// One scaler type for every ZeRO stage: fp16 with loss_scale == 0 gets the
// ZeRO-1/2/3 DynamicLossScaler rule (hysteresis, consecutive_hysteresis, an
// error when an overflow hits the minimum scale) -- also at stage 0, where
// DeepSpeed's FP16_Optimizer wrappers use a simpler rule without hysteresis.
// fp16 with loss_scale > 0 is a static scale; bf16/fp32 a static 1.0.
//
// The engine calls update() once per optimizer step at an accumulation
// boundary, BEFORE unscaling (§4.4): on a clean step that grows the scale the
// gradients, produced with the old scale S, are then divided by the new 2S.
#pragma once

#include <cstdint>

#include "ckpt/loss_scaler_record.h"
#include "config/config.h"

namespace ds::precision {

// Checkpointed scaler state: the checkpoint's plain record (cur_scale,
// cur_iter, last_overflow_iter, cur_hysteresis).
using LossScalerState = ckpt::LossScalerRecord;

class LossScaler {
public:
    // Validates the fp16 fields it uses when fp16 is enabled (DS_ERR_INVALID_CONFIG
    // naming fp16.<key>): loss_scale >= 0 finite; for dynamic scaling
    // 2**initial_scale_power positive and finite, loss_scale_window >= 1,
    // hysteresis >= 1, min_loss_scale > 0 finite.
    static LossScaler from_config(const config::Fp16Config& fp16);
    static LossScaler make_static(double scale);

    bool dynamic() const { return dynamic_; }
    double scale() const { return state_.cur_scale; }
    double min_scale() const { return min_scale_; }

    // One call per optimizer step at an accumulation boundary. Static: no-op.
    // Dynamic, overflow with hysteresis exhausted while the scale is already
    // at min_loss_scale: throws DS_ERR_INVALID_STATE and leaves the state as it was.
    void update(bool overflow);

    LossScalerState state() const { return state_; }
    // Checkpoint restore. The state is checked for consistency
    // (DS_ERR_INVALID_ARGUMENT naming the field: cur_scale > 0 finite,
    // cur_iter >= 0, -1 <= last_overflow_iter < cur_iter, cur_hysteresis >= 1).
    // Dynamic: it replaces the state (the window, hysteresis and minimum stay
    // the config's). Static: ignored, a static scale is the config's.
    void set_state(const LossScalerState& s);

private:
    LossScaler() = default;

    bool dynamic_ = false;
    LossScalerState state_{1.0, 0, -1, 1};
    // Dynamic-only settings.
    int64_t scale_window_ = 1;
    double min_scale_ = 1.0;
    int64_t hysteresis_ = 1;  // DeepSpeed's delayed_shift
    bool consecutive_hysteresis_ = false;
};

}  // namespace ds::precision
