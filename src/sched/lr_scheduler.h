// Learning-rate schedules with DeepSpeed 0.19.6 semantics
// (deepspeed/runtime/lr_schedules.py; DEEPSPEED_SEMANTICS.md §3).
//
// A schedule is a pure function of one integer, the schedule index t
// (DeepSpeed's `last_batch_iteration`). It starts at -1: DeepSpeed's
// constructors write the t = -1 value into the optimizer, and the engine
// steps the schedule only after each APPLIED optimizer step, so optimizer
// step s (0-based, counting applied steps) runs with the value at t = s - 1.
#pragma once

#include <cstdint>
#include <memory>

#include "config/config.h"

namespace ds::sched {

// What a schedule writes into the optimizer. Betas are present only while
// OneCycle cycles momentum (beta2 is then forced to 0.99, as DeepSpeed does).
struct LrValues {
    double lr;
    bool has_beta1 = false;
    double beta1 = 0;
    double beta2 = 0;
};

class LrScheduler {
public:
    virtual ~LrScheduler();

    // Build the schedule `c.type` names (case-sensitive: LRRangeTest,
    // OneCycle, WarmupLR, WarmupDecayLR, WarmupCosineLR).
    // optimizer_lr: the optimizer's configured lr (WarmupLR's default max,
    // WarmupCosineLR's org_lr). optimizer_has_betas: Adam/Lamb/Lion-style
    // optimizers; without betas OneCycle silently stops cycling momentum.
    // Throws DS_ERR_UNSUPPORTED for an unknown type and
    // DS_ERR_INVALID_CONFIG ("scheduler.params.<key> ...") for bad params.
    static std::unique_ptr<LrScheduler> create(const config::SchedulerConfig& c,
                                               double optimizer_lr, bool optimizer_has_betas);

    // Closed form at schedule index t >= -1 (DS_ERR_INVALID_ARGUMENT below).
    virtual LrValues at(int64_t t) const = 0;
    virtual const char* name() const = 0;

    int64_t last_batch_iteration() const { return last_batch_iteration_; }
    // Checkpoint restore (DeepSpeed's load_state_dict); t >= -1.
    void set_last_batch_iteration(int64_t t);
    // After each applied optimizer step.
    void step() { ++last_batch_iteration_; }
    LrValues current() const { return at(last_batch_iteration_); }

protected:
    LrScheduler() = default;
    // Throws DS_ERR_INVALID_ARGUMENT for t < -1 (no DeepSpeed run reaches it).
    static void check_index(int64_t t);

private:
    int64_t last_batch_iteration_ = -1;
};

}  // namespace ds::sched
