// WarmupCosineLR (DEEPSPEED_SEMANTICS.md §3.6): a ratio of the optimizer's lr, warmed up
// from warmup_min_ratio to 1, then cosine-annealed to cos_min_ratio.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "sched/schedules.h"

namespace ds::sched {

WarmupCosineLR::WarmupCosineLR(const config::SchedulerConfig& c, double optimizer_lr)
    : org_lr_(optimizer_lr),
      total_(0),
      warmup_min_ratio_(require_finite(c.warmup_min_ratio, "warmup_min_ratio")),
      n_(std::max<int64_t>(2, require_positive(c.warmup_num_steps, "warmup_num_steps"))),
      log_(warmup_type_is_log(c.warmup_type)),
      inverse_log_n_(1.0 / std::log(static_cast<double>(n_))),
      cos_min_ratio_(require_finite(c.cos_min_ratio, "cos_min_ratio")) {
    DS_CHECK(c.total_num_steps.has_value(), DS_ERR_INVALID_CONFIG,
             "scheduler.params.total_num_steps is required for WarmupCosineLR");
    total_ = *c.total_num_steps;
}

double WarmupCosineLR::ratio(int64_t t) const {
    if (t < n_) {
        const double g = log_ ? inverse_log_n_ * std::log(static_cast<double>(t + 1))
                              : static_cast<double>(t) / static_cast<double>(n_);
        return warmup_min_ratio_ + g * (1.0 - warmup_min_ratio_);
    }
    // Progress is clamped to 1 so the ratio stays at cos_min_ratio past the end.
    const double real_last = static_cast<double>(t - n_ + 1);
    const double real_total = static_cast<double>(std::max<int64_t>(1, total_ - n_));
    const double p = std::min(1.0, real_last / real_total);
    const double c = (1.0 + std::cos(M_PI * p)) / 2.0;
    return std::max(0.0, cos_min_ratio_ + (1.0 - cos_min_ratio_) * c);
}

LrValues WarmupCosineLR::at(int64_t t) const {
    check_index(t);
    // DeepSpeed returns 0.0 before the first step: optimizer step 0 runs at lr 0.
    if (t < 0) return LrValues{0.0};
    return LrValues{org_lr_ * ratio(t)};
}

}  // namespace ds::sched
