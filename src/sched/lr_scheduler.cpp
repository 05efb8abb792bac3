// LrScheduler base: the schedule index, the factory and the shared checks.
#include "sched/lr_scheduler.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "sched/schedules.h"

namespace ds::sched {

LrScheduler::~LrScheduler() = default;

void LrScheduler::check_index(int64_t t) {
    DS_CHECK(t >= -1, DS_ERR_INVALID_ARGUMENT,
             "scheduler index t=%lld is invalid: the schedule starts at -1",
             static_cast<long long>(t));
}

void LrScheduler::set_last_batch_iteration(int64_t t) {
    DS_CHECK(t >= -1, DS_ERR_INVALID_ARGUMENT,
             "scheduler last_batch_iteration=%lld is invalid: it must be >= -1",
             static_cast<long long>(t));
    last_batch_iteration_ = t;
}

std::unique_ptr<LrScheduler> LrScheduler::create(const config::SchedulerConfig& c,
                                                 double optimizer_lr, bool optimizer_has_betas) {
    // Case-sensitive, as DeepSpeed looks the class up by name.
    if (c.type == "LRRangeTest") return std::make_unique<LRRangeTest>(c);
    if (c.type == "OneCycle") return std::make_unique<OneCycle>(c, optimizer_has_betas);
    if (c.type == "WarmupLR") return std::make_unique<WarmupLR>(c, optimizer_lr);
    if (c.type == "WarmupDecayLR") return std::make_unique<WarmupDecayLR>(c);
    if (c.type == "WarmupCosineLR") return std::make_unique<WarmupCosineLR>(c, optimizer_lr);
    fail(DS_ERR_UNSUPPORTED,
         "scheduler.type: \"%s\" is not supported (expected one of LRRangeTest, OneCycle, "
         "WarmupLR, WarmupDecayLR, WarmupCosineLR; names are case-sensitive)",
         c.type.c_str());
}

int64_t require_positive(int64_t v, const char* key) {
    DS_CHECK(v > 0, DS_ERR_INVALID_CONFIG,
             "scheduler.params.%s must be a positive integer, got %lld", key,
             static_cast<long long>(v));
    return v;
}

int64_t require_non_negative(int64_t v, const char* key) {
    DS_CHECK(v >= 0, DS_ERR_INVALID_CONFIG,
             "scheduler.params.%s must be a non-negative integer, got %lld", key,
             static_cast<long long>(v));
    return v;
}

double require_finite(double v, const char* key) {
    DS_CHECK(std::isfinite(v), DS_ERR_INVALID_CONFIG,
             "scheduler.params.%s must be a finite number, got %g", key, v);
    return v;
}

bool warmup_type_is_log(const std::string& type) {
    if (type == "log") return true;
    if (type == "linear") return false;
    // DeepSpeed warns and falls back to log; this library rejects the value
    // so a typo cannot silently change the warm-up curve.
    fail(DS_ERR_INVALID_CONFIG,
         "scheduler.params.warmup_type: \"%s\" is not a warm-up type (expected \"log\" or "
         "\"linear\")",
         type.c_str());
}

}  // namespace ds::sched
