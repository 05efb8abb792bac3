// OneCycle (DEEPSPEED_SEMANTICS.md §3.3): one triangular lr cycle (min -> max -> min over
// first + second steps, optionally in stairs), then an inverse-time decay of
// the lr; beta1 moves opposite to the lr when momentum is cycled.
#include <cmath>

#include "core/error.h"
#include "sched/schedules.h"

namespace ds::sched {

namespace {
constexpr double kCycledBeta2 = 0.99;  // DeepSpeed overwrites beta2 with 0.99
}

OneCycle::OneCycle(const config::SchedulerConfig& c, bool optimizer_has_betas)
    : min_lr_(require_finite(c.cycle_min_lr, "cycle_min_lr")),
      max_lr_(require_finite(c.cycle_max_lr, "cycle_max_lr")),
      decay_lr_rate_(require_finite(c.decay_lr_rate, "decay_lr_rate")),
      first_(static_cast<double>(require_positive(c.cycle_first_step_size, "cycle_first_step_size"))),
      second_(c.cycle_second_step_size
                  ? static_cast<double>(require_non_negative(*c.cycle_second_step_size,
                                                             "cycle_second_step_size"))
                  : first_),
      total_(first_ + second_),
      step_ratio_(first_ / total_),
      first_stairs_(require_non_negative(c.cycle_first_stair_count, "cycle_first_stair_count")),
      second_stairs_(c.cycle_second_stair_count
                         ? require_non_negative(*c.cycle_second_stair_count,
                                                "cycle_second_stair_count")
                         : first_stairs_),
      decay_step_size_(require_non_negative(c.decay_step_size, "decay_step_size")),
      // Without betas in the optimizer DeepSpeed disables momentum cycling (a warning only).
      cycle_momentum_(c.cycle_momentum && optimizer_has_betas),
      min_mom_(require_finite(c.cycle_min_mom, "cycle_min_mom")),
      max_mom_(require_finite(c.cycle_max_mom, "cycle_max_mom")),
      decay_mom_rate_(require_finite(c.decay_mom_rate, "decay_mom_rate")),
      skip_lr_decay_(decay_step_size_ == 0 || decay_lr_rate_ == 0.0),
      skip_mom_decay_(decay_step_size_ == 0 || decay_mom_rate_ == 0.0) {}

// Position in the cycle in [0, 1] (0 at the ends, 1 at the peak), t >= -1.
double OneCycle::scale_factor(int64_t t) const {
    const int64_t k = t + 1;
    const double kd = static_cast<double>(k);
    const double cycle = std::floor(1.0 + kd / total_);
    const double x = 1.0 + kd / total_ - cycle;
    double f;
    int64_t stairs;
    if (x <= step_ratio_) {
        f = x / step_ratio_;
        stairs = first_stairs_;
    } else {
        f = (x - 1.0) / (step_ratio_ - 1.0);
        stairs = second_stairs_;
    }
    if (stairs > 0) {
        // Quantise from the integer offset in the cycle, not from f (f can sit
        // a rounding error below an exact stair).
        const double ci = std::fmod(kd, total_);
        const double sd = static_cast<double>(stairs);
        const double pos = ci <= first_ ? ci * sd / first_ : (total_ - ci) * sd / second_;
        f = std::floor(pos) / sd;
    }
    return f;
}

LrValues OneCycle::at(int64_t t) const {
    check_index(t);
    LrValues v{min_lr_};
    if (t < 0) {
        // What the constructor writes: lr = min_lr, betas = (min_mom, 0.99).
        // (The cycle formula would give beta1 = max_mom here.)
        if (cycle_momentum_) {
            v.has_beta1 = true;
            v.beta1 = min_mom_;
            v.beta2 = kCycledBeta2;
        }
        return v;
    }
    if (static_cast<double>(t) < total_) {
        const double f = scale_factor(t);
        v.lr = min_lr_ + (max_lr_ - min_lr_) * f;
        if (cycle_momentum_) v.beta1 = max_mom_ - (max_mom_ - min_mom_) * f;
    } else {
        // Decay phase (single cycle only): d counts steps past the cycle.
        const double d = static_cast<double>(t) - total_ + 1.0;
        const double interval = d / static_cast<double>(decay_step_size_);
        v.lr = skip_lr_decay_ ? min_lr_ : min_lr_ / (1.0 + decay_lr_rate_ * interval);
        if (cycle_momentum_)
            v.beta1 = skip_mom_decay_ ? max_mom_ : max_mom_ * (1.0 + decay_mom_rate_ * interval);
    }
    if (cycle_momentum_) {
        v.has_beta1 = true;
        v.beta2 = kCycledBeta2;
    }
    return v;
}

}  // namespace ds::sched
