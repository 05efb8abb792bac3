// WarmupLR and WarmupDecayLR (DEEPSPEED_SEMANTICS.md §3.4, §3.5).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "sched/schedules.h"

namespace ds::sched {

namespace {
constexpr double kWarmupDecayDefaultMaxLr = 0.001;  // WarmupDecayLR's explicit default
}

WarmupLR::WarmupLR(const config::SchedulerConfig& c, double default_max_lr)
    : min_lr_(require_finite(c.warmup_min_lr, "warmup_min_lr")),
      delta_lr_(require_finite(c.warmup_max_lr.value_or(default_max_lr), "warmup_max_lr") -
                min_lr_),
      n_(std::max<int64_t>(2, require_positive(c.warmup_num_steps, "warmup_num_steps"))),
      log_(warmup_type_is_log(c.warmup_type)),
      inverse_log_n_(1.0 / std::log(static_cast<double>(n_))) {}

double WarmupLR::warmup_gamma(int64_t t) const {
    if (log_) return inverse_log_n_ * std::log(static_cast<double>(t + 1));
    return static_cast<double>(t) / static_cast<double>(n_);
}

double WarmupLR::gamma(int64_t t) const { return t < n_ ? warmup_gamma(t) : 1.0; }

LrValues WarmupLR::at(int64_t t) const {
    check_index(t);
    // Before the first step DeepSpeed returns min_lr (so with the default
    // warmup_min_lr = 0 the first two optimizer steps run at lr 0).
    if (t < 0) return LrValues{min_lr_};
    return LrValues{min_lr_ + delta_lr_ * gamma(t)};
}

WarmupDecayLR::WarmupDecayLR(const config::SchedulerConfig& c)
    : WarmupLR(c, kWarmupDecayDefaultMaxLr), total_(0) {
    DS_CHECK(c.total_num_steps.has_value(), DS_ERR_INVALID_CONFIG,
             "scheduler.params.total_num_steps is required for WarmupDecayLR");
    total_ = *c.total_num_steps;
}

// After warm-up: linear from 1 at t = N down to 0 at t = total, then 0.
double WarmupDecayLR::gamma(int64_t t) const {
    if (t < n_) return warmup_gamma(t);
    const double den = std::max(1.0, static_cast<double>(total_ - n_));
    return std::max(0.0, static_cast<double>(total_ - t) / den);
}

}  // namespace ds::sched
