// The five concrete schedules (internal to src/sched; users go through
// LrScheduler::create). Each constructor validates the params it reads and
// throws DS_ERR_INVALID_CONFIG naming `scheduler.params.<key>`.
#pragma once

#include <cstdint>
#include <string>

#include "sched/lr_scheduler.h"

namespace ds::sched {

// lr(t) = min_lr * (1 + step_rate * interval(t)),
// interval = (t+1)/step_size, floored when staircase.
class LRRangeTest final : public LrScheduler {
public:
    explicit LRRangeTest(const config::SchedulerConfig& c);
    LrValues at(int64_t t) const override;
    const char* name() const override { return "LRRangeTest"; }

private:
    double min_lr_;
    int64_t step_size_;
    double step_rate_;
    bool staircase_;
};

// One triangular cycle (optionally in stairs), then an inverse-time decay;
// momentum (beta1) moves opposite to the lr.
class OneCycle final : public LrScheduler {
public:
    OneCycle(const config::SchedulerConfig& c, bool optimizer_has_betas);
    LrValues at(int64_t t) const override;
    const char* name() const override { return "OneCycle"; }

private:
    double scale_factor(int64_t t) const;

    double min_lr_, max_lr_, decay_lr_rate_;
    double first_, second_, total_, step_ratio_;  // step sizes as floats, as DeepSpeed does
    int64_t first_stairs_, second_stairs_;
    int64_t decay_step_size_;
    bool cycle_momentum_;
    double min_mom_, max_mom_, decay_mom_rate_;
    bool skip_lr_decay_, skip_mom_decay_;
};

// Warm-up from min_lr to max_lr over N = max(2, warmup_num_steps) steps
// (log or linear), then flat (WarmupLR) or linear decay to 0 at
// total_num_steps (WarmupDecayLR).
class WarmupLR : public LrScheduler {
public:
    // default_max_lr: used when warmup_max_lr is None: the optimizer's lr for
    // WarmupLR (DeepSpeed >= 0.17.2), 0.001 for WarmupDecayLR.
    WarmupLR(const config::SchedulerConfig& c, double default_max_lr);
    LrValues at(int64_t t) const override;
    const char* name() const override { return "WarmupLR"; }

protected:
    virtual double gamma(int64_t t) const;
    double warmup_gamma(int64_t t) const;  // t in [0, N)

    double min_lr_, delta_lr_;
    int64_t n_;
    bool log_;
    double inverse_log_n_;
};

class WarmupDecayLR final : public WarmupLR {
public:
    explicit WarmupDecayLR(const config::SchedulerConfig& c);
    const char* name() const override { return "WarmupDecayLR"; }

private:
    double gamma(int64_t t) const override;
    int64_t total_;
};

// lr = optimizer_lr * ratio(t): warm-up ratio, then cosine to cos_min_ratio.
// The t = -1 value is 0.0, so the first optimizer step runs with lr = 0.
class WarmupCosineLR final : public LrScheduler {
public:
    WarmupCosineLR(const config::SchedulerConfig& c, double optimizer_lr);
    LrValues at(int64_t t) const override;
    const char* name() const override { return "WarmupCosineLR"; }

private:
    double ratio(int64_t t) const;

    double org_lr_;
    int64_t total_;
    double warmup_min_ratio_;
    int64_t n_;
    bool log_;
    double inverse_log_n_;
    double cos_min_ratio_;
};

// Shared parameter checks (messages name scheduler.params.<key>).
int64_t require_positive(int64_t v, const char* key);
int64_t require_non_negative(int64_t v, const char* key);
double require_finite(double v, const char* key);
bool warmup_type_is_log(const std::string& type);  // "log" | "linear"

}  // namespace ds::sched
