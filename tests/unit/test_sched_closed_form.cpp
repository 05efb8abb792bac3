// Every schedule over 1,000 optimizer steps against an independent closed
// form: written here from DEEPSPEED_SEMANTICS.md §3 in terms of the optimizer step s
// (not the schedule index), rearranged algebraically, in long double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>

#include "sched/lr_scheduler.h"

using ds::config::SchedulerConfig;
using ds::sched::LrScheduler;
using LD = long double;

namespace {

const LD kPi = std::acos(-1.0L);
constexpr int kSteps = 1000;

// |got - want| <= 1e-12, relative for values above 1.
void expect_close(double got, LD want, const char* what, int64_t s) {
    const LD tol = 1e-12L * std::fmax(1.0L, std::fabs(want));
    EXPECT_LE(std::fabs(static_cast<LD>(got) - want), tol)
        << what << " at optimizer step s=" << s << ": got " << got << " want "
        << static_cast<double>(want);
}

// Drive the scheduler as the engine does and compare every step's values.
void run(const SchedulerConfig& c, double optimizer_lr, bool has_betas,
         const std::function<LD(int64_t)>& lr_ref,
         const std::function<LD(int64_t)>& beta1_ref = nullptr) {
    auto sched = LrScheduler::create(c, optimizer_lr, has_betas);
    for (int64_t s = 0; s < kSteps; ++s) {
        const ds::sched::LrValues v = sched->current();
        expect_close(v.lr, lr_ref(s), "lr", s);
        EXPECT_EQ(v.has_beta1, static_cast<bool>(beta1_ref)) << "s=" << s;
        if (beta1_ref) {
            expect_close(v.beta1, beta1_ref(s), "beta1", s);
            EXPECT_EQ(v.beta2, 0.99) << "s=" << s;
        }
        if (::testing::Test::HasFailure()) return;
        sched->step();
    }
}

// ---- LRRangeTest: the step-s lr is min*(1 + rate*s/size); staircase uses s div size.
LD range_test_ref(int64_t s, LD min_lr, LD rate, int64_t size, bool staircase) {
    const LD intervals = staircase ? static_cast<LD>(s / size) : static_cast<LD>(s) / size;
    return min_lr + min_lr * rate * intervals;
}

// ---- Warm-up fraction reached by optimizer step s (schedule index s-1).
// Steps 0 and 1 sit at 0; log warm-up is log_N(s); linear is (s-1)/N.
LD warm_fraction(int64_t s, int64_t warmup_steps, bool log_type) {
    const int64_t n = warmup_steps < 2 ? 2 : warmup_steps;
    if (s <= 1) return 0.0L;
    if (s - 1 >= n) return 1.0L;
    return log_type ? std::log(static_cast<LD>(s)) / std::log(static_cast<LD>(n))
                    : static_cast<LD>(s - 1) / n;
}

LD warmup_lr_ref(int64_t s, LD lo, LD hi, int64_t n, bool log_type) {
    const LD g = warm_fraction(s, n, log_type);
    return (1.0L - g) * lo + g * hi;
}

LD warmup_decay_ref(int64_t s, LD lo, LD hi, int64_t n_cfg, int64_t total, bool log_type) {
    const int64_t n = n_cfg < 2 ? 2 : n_cfg;
    if (s - 1 < n) return warmup_lr_ref(s, lo, hi, n_cfg, log_type);
    const int64_t span = total - n > 1 ? total - n : 1;
    LD g = static_cast<LD>(total - (s - 1)) / span;
    if (g < 0) g = 0;
    return (1.0L - g) * lo + g * hi;
}

LD warmup_cosine_ref(int64_t s, LD org_lr, int64_t n_cfg, int64_t total, LD min_ratio,
                     LD cos_min, bool log_type) {
    const int64_t n = n_cfg < 2 ? 2 : n_cfg;
    if (s == 0) return 0.0L;
    LD ratio;
    if (s - 1 < n) {
        ratio = min_ratio + (1.0L - min_ratio) * warm_fraction(s, n_cfg, log_type);
    } else {
        const int64_t span = total - n > 1 ? total - n : 1;
        LD p = static_cast<LD>(s - n) / span;
        if (p > 1) p = 1;
        const LD c = std::cos(kPi * p / 2);  // (1 + cos(pi p)) / 2 == cos^2(pi p / 2)
        ratio = cos_min + (1.0L - cos_min) * c * c;
        if (ratio < 0) ratio = 0;
    }
    return org_lr * ratio;
}

// ---- OneCycle from the integer position r = s mod (first+second) in the cycle.
struct OneCycleParams {
    LD min_lr, max_lr, min_mom, max_mom, lr_rate, mom_rate;
    int64_t first, second, stairs1, stairs2, decay_every;
};

// Fraction of the way to the peak (1 at r == first, 0 at the ends).
LD cycle_height(int64_t s, const OneCycleParams& p) {
    const int64_t total = p.first + p.second;
    const int64_t r = s % total;
    if (r <= p.first)
        return p.stairs1 > 0 ? static_cast<LD>(r * p.stairs1 / p.first) / p.stairs1
                             : static_cast<LD>(r) / p.first;
    const int64_t down = total - r;
    return p.stairs2 > 0 ? static_cast<LD>(down * p.stairs2 / p.second) / p.stairs2
                         : static_cast<LD>(down) / p.second;
}

LD one_cycle_lr(int64_t s, const OneCycleParams& p) {
    const int64_t total = p.first + p.second;
    if (s == 0) return p.min_lr;
    if (s - 1 < total) return p.min_lr + (p.max_lr - p.min_lr) * cycle_height(s, p);
    if (p.decay_every == 0 || p.lr_rate == 0) return p.min_lr;
    const LD past = static_cast<LD>(s - total);  // steps past the cycle
    return p.min_lr * p.decay_every / (p.decay_every + p.lr_rate * past);
}

LD one_cycle_beta1(int64_t s, const OneCycleParams& p) {
    const int64_t total = p.first + p.second;
    if (s == 0) return p.min_mom;  // what the constructor writes
    if (s - 1 < total) return p.min_mom + (p.max_mom - p.min_mom) * (1 - cycle_height(s, p));
    if (p.decay_every == 0 || p.mom_rate == 0) return p.max_mom;
    const LD past = static_cast<LD>(s - total);
    return p.max_mom + p.max_mom * p.mom_rate * past / p.decay_every;
}

SchedulerConfig one_cycle_cfg(const OneCycleParams& p, bool give_second, bool give_stairs2) {
    SchedulerConfig c;
    c.type = "OneCycle";
    c.cycle_min_lr = static_cast<double>(p.min_lr);
    c.cycle_max_lr = static_cast<double>(p.max_lr);
    c.cycle_min_mom = static_cast<double>(p.min_mom);
    c.cycle_max_mom = static_cast<double>(p.max_mom);
    c.decay_lr_rate = static_cast<double>(p.lr_rate);
    c.decay_mom_rate = static_cast<double>(p.mom_rate);
    c.cycle_first_step_size = p.first;
    if (give_second) c.cycle_second_step_size = p.second;
    c.cycle_first_stair_count = p.stairs1;
    if (give_stairs2) c.cycle_second_stair_count = p.stairs2;
    c.decay_step_size = p.decay_every;
    return c;
}

}  // namespace

TEST(SchedClosedForm, LRRangeTestContinuousAndStaircase) {
    for (bool staircase : {false, true}) {
        for (int64_t size : {1, 7, 100, 2000}) {
            SchedulerConfig c;
            c.type = "LRRangeTest";
            c.lr_range_test_min_lr = 0.003;
            c.lr_range_test_step_size = size;
            c.lr_range_test_step_rate = 0.37;
            c.lr_range_test_staircase = staircase;
            run(c, 1.0, true, [&](int64_t s) {
                return range_test_ref(s, 0.003L, 0.37L, size, staircase);
            });
        }
    }
}

TEST(SchedClosedForm, WarmupLRLogAndLinear) {
    for (const char* type : {"log", "linear"}) {
        for (int64_t n : {1, 2, 3, 10, 250, 1000, 5000}) {  // n = 1 behaves as N = 2
            SchedulerConfig c;
            c.type = "WarmupLR";
            c.warmup_min_lr = 0.02;
            c.warmup_max_lr = 0.7;
            c.warmup_num_steps = n;
            c.warmup_type = type;
            const bool log_type = std::string(type) == "log";
            run(c, 5.0, true,
                [&](int64_t s) { return warmup_lr_ref(s, 0.02L, 0.7L, n, log_type); });
        }
    }
}

TEST(SchedClosedForm, WarmupLRMaxDefaultsToOptimizerLr) {
    SchedulerConfig c;
    c.type = "WarmupLR";
    c.warmup_num_steps = 40;
    run(c, 0.25, true, [&](int64_t s) { return warmup_lr_ref(s, 0.0L, 0.25L, 40, true); });
}

TEST(SchedClosedForm, WarmupNumStepsOneMeansTwo) {
    // With N = max(2, 1) = 2 the linear warm-up takes the step at s = 2 to 1/2.
    SchedulerConfig c;
    c.type = "WarmupLR";
    c.warmup_num_steps = 1;
    c.warmup_type = "linear";
    c.warmup_max_lr = 1.0;
    auto s = LrScheduler::create(c, 0.1, true);
    EXPECT_EQ(s->at(0).lr, 0.0);
    EXPECT_EQ(s->at(1).lr, 0.5);
    EXPECT_EQ(s->at(2).lr, 1.0);
}

TEST(SchedClosedForm, WarmupDecayLR) {
    struct Case { int64_t n, total; const char* type; };
    // Includes total < warmup (DeepSpeed only warns) and total == warmup.
    for (Case k : {Case{100, 900, "log"}, Case{100, 900, "linear"}, Case{1, 600, "linear"},
                   Case{300, 200, "log"}, Case{300, 200, "linear"}, Case{50, 50, "linear"},
                   Case{50, 51, "log"}, Case{2, 1, "linear"}}) {
        SchedulerConfig c;
        c.type = "WarmupDecayLR";
        c.warmup_min_lr = 0.001;
        c.warmup_max_lr = 0.9;
        c.warmup_num_steps = k.n;
        c.total_num_steps = k.total;
        c.warmup_type = k.type;
        const bool log_type = std::string(k.type) == "log";
        run(c, 3.0, true, [&](int64_t s) {
            return warmup_decay_ref(s, 0.001L, 0.9L, k.n, k.total, log_type);
        });
    }
}

TEST(SchedClosedForm, WarmupCosineLR) {
    struct Case { int64_t n, total; double min_ratio, cos_min; const char* type; };
    for (Case k : {Case{100, 800, 0.0, 1e-4, "log"}, Case{100, 800, 0.1, 0.05, "linear"},
                   Case{1, 500, 0.0, 0.0, "linear"}, Case{400, 300, 0.2, 1e-4, "log"},
                   Case{10, 10, 0.0, 0.3, "linear"}, Case{37, 1200, 0.5, -0.2, "log"}}) {
        SchedulerConfig c;
        c.type = "WarmupCosineLR";
        c.warmup_num_steps = k.n;
        c.total_num_steps = k.total;
        c.warmup_min_ratio = k.min_ratio;
        c.cos_min_ratio = k.cos_min;
        c.warmup_type = k.type;
        const bool log_type = std::string(k.type) == "log";
        run(c, 0.4, true, [&](int64_t s) {
            return warmup_cosine_ref(s, 0.4L, k.n, k.total, k.min_ratio, k.cos_min, log_type);
        });
        // The very first optimizer step runs at lr = 0.
        EXPECT_EQ(LrScheduler::create(c, 0.4, true)->current().lr, 0.0);
    }
}

TEST(SchedClosedForm, OneCycleContinuousWithDecay) {
    const OneCycleParams p{0.01L, 0.1L, 0.85L, 0.95L, 0.5L, 0.02L, 250, 250, 0, 0, 20};
    run(one_cycle_cfg(p, false, false), 1.0, true,
        [&](int64_t s) { return one_cycle_lr(s, p); },
        [&](int64_t s) { return one_cycle_beta1(s, p); });
}

TEST(SchedClosedForm, OneCycleAsymmetricStairsWithDecay) {
    const OneCycleParams p{0.002L, 0.2L, 0.8L, 0.9L, 0.25L, 0.01L, 370, 230, 5, 3, 7};
    run(one_cycle_cfg(p, true, true), 1.0, true, [&](int64_t s) { return one_cycle_lr(s, p); },
        [&](int64_t s) { return one_cycle_beta1(s, p); });
}

TEST(SchedClosedForm, OneCycleSecondDefaultsAndStairsDefault) {
    // second step size None => first; second stair count None => first count.
    const OneCycleParams p{0.1L, 1.0L, 0.8L, 0.9L, 0.0L, 0.3L, 123, 123, 4, 4, 50};
    run(one_cycle_cfg(p, false, false), 1.0, true,
        [&](int64_t s) { return one_cycle_lr(s, p); },
        [&](int64_t s) { return one_cycle_beta1(s, p); });
}

TEST(SchedClosedForm, OneCycleStairsOnOneHalfOnly) {
    const OneCycleParams p{0.0L, 3.0L, 0.7L, 0.95L, 1.5L, 0.0L, 61, 339, 0, 9, 13};
    run(one_cycle_cfg(p, true, true), 1.0, true, [&](int64_t s) { return one_cycle_lr(s, p); },
        [&](int64_t s) { return one_cycle_beta1(s, p); });
}

TEST(SchedClosedForm, OneCycleWithoutMomentum) {
    const OneCycleParams p{0.01L, 0.1L, 0.85L, 0.95L, 0.5L, 0.02L, 300, 200, 0, 0, 20};
    // An optimizer without betas (SGD) silently disables momentum cycling.
    run(one_cycle_cfg(p, true, false), 1.0, false, [&](int64_t s) { return one_cycle_lr(s, p); });
    // So does cycle_momentum = false.
    SchedulerConfig c = one_cycle_cfg(p, true, false);
    c.cycle_momentum = false;
    run(c, 1.0, true, [&](int64_t s) { return one_cycle_lr(s, p); });
}
