// LRRangeTest (DEEPSPEED_SEMANTICS.md §3.2): lr grows linearly (or in stairs) from min_lr.
#include <cmath>

#include "sched/schedules.h"

namespace ds::sched {

LRRangeTest::LRRangeTest(const config::SchedulerConfig& c)
    : min_lr_(require_finite(c.lr_range_test_min_lr, "lr_range_test_min_lr")),
      step_size_(require_positive(c.lr_range_test_step_size, "lr_range_test_step_size")),
      step_rate_(require_finite(c.lr_range_test_step_rate, "lr_range_test_step_rate")),
      staircase_(c.lr_range_test_staircase) {}

LrValues LRRangeTest::at(int64_t t) const {
    check_index(t);
    // Same operation order as DeepSpeed: float(t + 1) / step_size, then floor.
    double interval = static_cast<double>(t + 1) / static_cast<double>(step_size_);
    if (staircase_) interval = std::floor(interval);
    return LrValues{min_lr_ * (1.0 + step_rate_ * interval)};
}

}  // namespace ds::sched
