// Static and dynamic (ZeRO rule) loss scalers; see loss_scaler.h.
#include "precision/loss_scaler.h"

#include <cmath>

#include "core/error.h"

namespace ds::precision {

namespace {
constexpr double kScaleFactor = 2.0;  // DeepSpeed's DynamicLossScaler.scale_factor

double positive_finite(double v, const char* key) {
    DS_CHECK(std::isfinite(v) && v > 0.0, DS_ERR_INVALID_CONFIG,
             "%s must be a positive finite number, got %g", key, v);
    return v;
}

int64_t positive_int(int64_t v, const char* key) {
    DS_CHECK(v > 0, DS_ERR_INVALID_CONFIG, "%s must be a positive integer, got %lld", key,
             static_cast<long long>(v));
    return v;
}
}  // namespace

LossScaler LossScaler::make_static(double scale) {
    LossScaler s;
    s.state_.cur_scale = positive_finite(scale, "fp16.loss_scale");
    return s;
}

LossScaler LossScaler::from_config(const config::Fp16Config& fp16) {
    if (!fp16.enabled) return make_static(1.0);  // bf16 / fp32: no scaling
    DS_CHECK(std::isfinite(fp16.loss_scale) && fp16.loss_scale >= 0.0, DS_ERR_INVALID_CONFIG,
             "fp16.loss_scale must be a finite number >= 0 (0 selects dynamic scaling), got %g",
             fp16.loss_scale);
    if (fp16.loss_scale > 0.0) return make_static(fp16.loss_scale);

    LossScaler s;
    s.dynamic_ = true;
    // 2**power as Python computes it for an int power (exact; 0 or inf when out of range).
    const double init = (fp16.initial_scale_power < -2000 || fp16.initial_scale_power > 2000)
                            ? (fp16.initial_scale_power < 0 ? 0.0 : HUGE_VAL)
                            : std::ldexp(1.0, static_cast<int>(fp16.initial_scale_power));
    DS_CHECK(std::isfinite(init) && init > 0.0, DS_ERR_INVALID_CONFIG,
             "fp16.initial_scale_power=%lld gives an initial scale 2**%lld that is not a "
             "positive finite double",
             static_cast<long long>(fp16.initial_scale_power),
             static_cast<long long>(fp16.initial_scale_power));
    s.scale_window_ = positive_int(fp16.loss_scale_window, "fp16.loss_scale_window");
    s.hysteresis_ = positive_int(fp16.hysteresis, "fp16.hysteresis");
    s.min_scale_ = positive_finite(fp16.min_loss_scale, "fp16.min_loss_scale");
    s.consecutive_hysteresis_ = fp16.consecutive_hysteresis;
    s.state_ = LossScalerState{init, 0, -1, s.hysteresis_};
    return s;
}

void LossScaler::update(bool overflow) {
    if (!dynamic_) return;
    LossScalerState& st = state_;
    if (overflow) {
        if (hysteresis_ == 1 || st.cur_hysteresis == 1) {
            // Exact comparison, as DeepSpeed: repeated halving clamps to min_scale.
            if (st.cur_scale == min_scale_)
                fail(DS_ERR_INVALID_STATE,
                     "fp16 loss scale is already at its minimum (min_loss_scale=%g) and the "
                     "gradients overflowed again: training cannot continue (the gradients are "
                     "inf/NaN even at the smallest scale; check the model and data, lower "
                     "fp16.min_loss_scale, or train in bf16)",
                     min_scale_);
            st.cur_scale = std::fmax(st.cur_scale / kScaleFactor, min_scale_);
        } else {
            // Absorbed by hysteresis: the scale stays, the step is still skipped.
            st.cur_hysteresis -= 1;
        }
        st.last_overflow_iter = st.cur_iter;
    } else {
        if (consecutive_hysteresis_) st.cur_hysteresis = hysteresis_;
        // Clean calls since the last overflow, not counting this one.
        const int64_t stable = st.cur_iter - st.last_overflow_iter - 1;
        if (stable > 0 && stable % scale_window_ == 0) {
            if (!consecutive_hysteresis_) st.cur_hysteresis = hysteresis_;
            st.cur_scale *= kScaleFactor;
        }
    }
    st.cur_iter += 1;
}

void LossScaler::set_state(const LossScalerState& s) {
    DS_CHECK(std::isfinite(s.cur_scale) && s.cur_scale > 0.0, DS_ERR_INVALID_ARGUMENT,
             "loss scaler state: cur_scale must be a positive finite number, got %g",
             s.cur_scale);
    DS_CHECK(s.cur_iter >= 0, DS_ERR_INVALID_ARGUMENT,
             "loss scaler state: cur_iter must be >= 0, got %lld",
             static_cast<long long>(s.cur_iter));
    DS_CHECK(s.last_overflow_iter >= -1 && s.last_overflow_iter < s.cur_iter,
             DS_ERR_INVALID_ARGUMENT,
             "loss scaler state: last_overflow_iter=%lld must be in [-1, cur_iter=%lld)",
             static_cast<long long>(s.last_overflow_iter), static_cast<long long>(s.cur_iter));
    DS_CHECK(s.cur_hysteresis >= 1, DS_ERR_INVALID_ARGUMENT,
             "loss scaler state: cur_hysteresis must be >= 1, got %lld",
             static_cast<long long>(s.cur_hysteresis));
    if (!dynamic_) return;  // a static scale is the config's, not the checkpoint's
    state_ = s;
}

}  // namespace ds::precision
