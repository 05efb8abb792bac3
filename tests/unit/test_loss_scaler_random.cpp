// 10,000 random overflow patterns: the DynamicLossScaler against an
// independent model of DEEPSPEED_SEMANTICS.md §4.2, written as a pure function of
// (state, overflow) -> (state, outcome) that counts the clean calls since
// the last overflow instead of remembering iteration numbers.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "core/error.h"
#include "precision/loss_scaler.h"

namespace {

struct Rules {
    int64_t window;
    int64_t hysteresis;
    bool consecutive;
    double min_scale;
};

struct Model {
    double scale;
    int64_t clean_run;  // clean calls since the last overflow (or the start)
    int64_t budget;     // overflows the scale can still shrug off, counting this one
};

enum class Outcome { Applied, Skipped, FatalAtMinimum };

struct Next {
    Model m;
    Outcome outcome;
};

Next model_step(const Model& m, bool overflow, const Rules& r) {
    if (!overflow) {
        Model n = m;
        const bool grow = m.clean_run > 0 && m.clean_run % r.window == 0;
        if (grow) n.scale = m.scale * 2;
        if (r.consecutive || grow) n.budget = r.hysteresis;
        n.clean_run = m.clean_run + 1;
        return {n, Outcome::Applied};
    }
    // Overflow: spend hysteresis while more than one unit is left ...
    if (m.budget > 1 && r.hysteresis > 1) return {Model{m.scale, 0, m.budget - 1}, Outcome::Skipped};
    // ... otherwise halve, clamped to the minimum; already at it => fatal, no change.
    if (m.scale == r.min_scale) return {m, Outcome::FatalAtMinimum};
    const double halved = m.scale / 2;
    return {Model{halved < r.min_scale ? r.min_scale : halved, 0, m.budget}, Outcome::Skipped};
}

}  // namespace

TEST(LossScalerRandom, TenThousandPatternsMatchTheModel) {
    std::mt19937_64 rng(0x5eed1234u);
    std::uniform_int_distribution<int> window_d(1, 5), hyst_d(1, 3), power_d(1, 6), min_d(0, 2),
        bool_d(0, 1);
    std::uniform_real_distribution<double> prob_d(0.0, 1.0);
    const double mins[3] = {1.0, 2.0, 0.5};
    int64_t fatal_seen = 0, growths_seen = 0, absorbed_seen = 0;

    for (int seq = 0; seq < 10000; ++seq) {
        ds::config::Fp16Config f;
        f.enabled = true;
        f.loss_scale = 0;
        f.loss_scale_window = window_d(rng);
        f.hysteresis = hyst_d(rng);
        f.consecutive_hysteresis = bool_d(rng) == 1;
        f.initial_scale_power = power_d(rng);
        f.min_loss_scale = mins[min_d(rng)];
        const double p_overflow = prob_d(rng);
        const Rules rules{f.loss_scale_window, f.hysteresis, f.consecutive_hysteresis,
                          f.min_loss_scale};

        ds::precision::LossScaler ls = ds::precision::LossScaler::from_config(f);
        Model m{static_cast<double>(int64_t{1} << f.initial_scale_power), 0, f.hysteresis};

        for (int call = 0; call < 50; ++call) {
            const bool overflow = prob_d(rng) < p_overflow;
            const Next want = model_step(m, overflow, rules);
            const ds::precision::LossScalerState before = ls.state();
            bool threw = false;
            try {
                ls.update(overflow);
            } catch (const ds::Error& e) {
                threw = true;
                ASSERT_EQ(e.status(), DS_ERR_INVALID_STATE);
            }
            const ds::precision::LossScalerState got = ls.state();
            ASSERT_EQ(threw, want.outcome == Outcome::FatalAtMinimum)
                << "seq " << seq << " call " << call;
            if (threw) {
                // State untouched, including the iteration counters.
                ASSERT_EQ(got.cur_iter, before.cur_iter);
                ASSERT_EQ(got.last_overflow_iter, before.last_overflow_iter);
                ++fatal_seen;
            } else {
                ASSERT_EQ(got.cur_iter, before.cur_iter + 1);
                if (want.m.scale > m.scale) ++growths_seen;
                if (overflow && want.m.scale == m.scale) ++absorbed_seen;
            }
            ASSERT_EQ(got.cur_scale, want.m.scale) << "seq " << seq << " call " << call;
            ASSERT_EQ(got.cur_hysteresis, want.m.budget) << "seq " << seq << " call " << call;
            if (!threw) {
                // The implementation's iteration bookkeeping encodes the same run length.
                ASSERT_EQ(got.cur_iter - got.last_overflow_iter - 1, want.m.clean_run)
                    << "seq " << seq << " call " << call;
            }
            m = want.m;
        }
    }
    // The random patterns must actually exercise every branch.
    EXPECT_GT(fatal_seen, 100);
    EXPECT_GT(growths_seen, 1000);
    EXPECT_GT(absorbed_seen, 1000);
}
