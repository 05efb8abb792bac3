// Loss scalers: DEEPSPEED_SEMANTICS.md §16.2 timeline, §4.1 selection, the §4.2 rules
// one by one (hysteresis, consecutive_hysteresis, growth cadence, the
// minimum-scale error) and config validation.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "precision/loss_scaler.h"

using ds::config::Fp16Config;
using ds::precision::LossScaler;
using ds::precision::LossScalerState;

namespace {

Fp16Config dynamic_cfg(int64_t power, int64_t window, int64_t hysteresis, bool consecutive,
                       double min_scale) {
    Fp16Config f;
    f.enabled = true;
    f.loss_scale = 0.0;
    f.initial_scale_power = power;
    f.loss_scale_window = window;
    f.hysteresis = hysteresis;
    f.consecutive_hysteresis = consecutive;
    f.min_loss_scale = min_scale;
    return f;
}

struct Call {
    bool overflow;
    double scale_after;
    int64_t hysteresis_after;
};

void expect_timeline(LossScaler& ls, const std::vector<Call>& calls) {
    for (size_t i = 0; i < calls.size(); ++i) {
        ls.update(calls[i].overflow);
        EXPECT_EQ(ls.scale(), calls[i].scale_after) << "call " << i;
        EXPECT_EQ(ls.state().cur_hysteresis, calls[i].hysteresis_after) << "call " << i;
        EXPECT_EQ(ls.state().cur_iter, static_cast<int64_t>(i) + 1);
    }
}

ds_status_t status_of_update(LossScaler& ls, bool overflow, std::string* msg) {
    try {
        ls.update(overflow);
    } catch (const ds::Error& e) {
        *msg = e.what();
        return e.status();
    }
    return DS_OK;
}

}  // namespace

// DEEPSPEED_SEMANTICS.md §16.2: init 2^16, window 3, hysteresis 2, consecutive false, min 1.
TEST(LossScaler, Timeline16_2) {
    LossScaler ls = LossScaler::from_config(dynamic_cfg(16, 3, 2, false, 1.0));
    ASSERT_TRUE(ls.dynamic());
    EXPECT_EQ(ls.scale(), 65536.0);
    EXPECT_EQ(ls.state().cur_hysteresis, 2);
    EXPECT_EQ(ls.state().last_overflow_iter, -1);
    expect_timeline(ls, {
        {false, 65536, 2},  // 0: stable = 0
        {true, 65536, 1},   // 1: hysteresis absorbs
        {false, 65536, 1},  // 2
        {true, 32768, 1},   // 3: halved
        {true, 16384, 1},   // 4: halved again, no refill yet
        {false, 16384, 1},  // 5: stable 0
        {false, 16384, 1},  // 6: stable 1
        {false, 16384, 1},  // 7: stable 2
        {false, 32768, 2},  // 8: stable 3 => grow + refill
        {false, 32768, 2},  // 9
        {false, 32768, 2},  // 10
        {false, 65536, 2},  // 11: stable 6
        {true, 65536, 1},   // 12
    });
    EXPECT_EQ(ls.state().last_overflow_iter, 12);
}

// Growth does not reset last_overflow_iter: with no overflow it recurs every
// window calls, first on the (window+1)-th call.
TEST(LossScaler, GrowthEveryWindowWithoutOverflow) {
    LossScaler ls = LossScaler::from_config(dynamic_cfg(3, 4, 2, false, 1.0));
    double expect = 8;
    for (int call = 0; call < 40; ++call) {
        ls.update(false);
        if (call > 0 && call % 4 == 0) expect *= 2;
        ASSERT_EQ(ls.scale(), expect) << "call " << call;
    }
    EXPECT_EQ(ls.state().last_overflow_iter, -1);
}

TEST(LossScaler, HysteresisOneHalvesImmediately) {
    LossScaler ls = LossScaler::from_config(dynamic_cfg(10, 1000, 1, false, 1.0));
    expect_timeline(ls, {{true, 512, 1}, {true, 256, 1}, {false, 256, 1}, {true, 128, 1}});
}

TEST(LossScaler, HysteresisRefillsOnlyOnGrowthWhenNotConsecutive) {
    LossScaler ls = LossScaler::from_config(dynamic_cfg(10, 2, 3, false, 1.0));
    expect_timeline(ls, {
        {true, 1024, 2},   // absorbed
        {false, 1024, 2},  // stable 0: no refill
        {true, 1024, 1},   // absorbed
        {false, 1024, 1},  // stable 0
        {false, 1024, 1},  // stable 1
        {false, 2048, 3},  // stable 2: grow + refill
        {true, 2048, 2},
        {true, 2048, 1},
        {true, 1024, 1},
        {true, 512, 1},
    });
}

TEST(LossScaler, ConsecutiveHysteresisRefillsOnEveryCleanStep) {
    LossScaler ls = LossScaler::from_config(dynamic_cfg(10, 2, 3, true, 1.0));
    expect_timeline(ls, {
        {true, 1024, 2},   // absorbed
        {false, 1024, 3},  // clean: refilled
        {true, 1024, 2},
        {true, 1024, 1},
        {true, 512, 1},    // exhausted: halves
        {false, 512, 3},   // stable 0, refilled
        {false, 512, 3},   // stable 1
        {false, 1024, 3},  // stable 2: grow (hysteresis already full)
        {true, 1024, 2},
    });
}

TEST(LossScaler, ClampsToMinimumThenErrorsWithoutChangingState) {
    // min 3 is not on the power-of-two ladder: 16 -> 8 -> 4 -> 3 (clamped).
    LossScaler ls = LossScaler::from_config(dynamic_cfg(4, 100, 1, false, 3.0));
    expect_timeline(ls, {{true, 8, 1}, {true, 4, 1}, {true, 3, 1}});
    const LossScalerState before = ls.state();
    std::string msg;
    EXPECT_EQ(status_of_update(ls, true, &msg), DS_ERR_INVALID_STATE);
    EXPECT_NE(msg.find("fp16 loss scale is already at its minimum (min_loss_scale=3)"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("training cannot continue"), std::string::npos) << msg;
    const LossScalerState after = ls.state();
    EXPECT_EQ(after.cur_scale, before.cur_scale);
    EXPECT_EQ(after.cur_iter, before.cur_iter);
    EXPECT_EQ(after.last_overflow_iter, before.last_overflow_iter);
    EXPECT_EQ(after.cur_hysteresis, before.cur_hysteresis);
    // A clean step afterwards proceeds normally.
    ls.update(false);
    EXPECT_EQ(ls.state().cur_iter, before.cur_iter + 1);
}

TEST(LossScaler, HysteresisAbsorbsEvenAtTheMinimum) {
    // Starting at the minimum (2^1 == min 2): the first overflow only spends
    // hysteresis, the second one is fatal.
    LossScaler ls = LossScaler::from_config(dynamic_cfg(1, 10, 2, false, 2.0));
    ls.update(true);
    EXPECT_EQ(ls.scale(), 2.0);
    EXPECT_EQ(ls.state().cur_hysteresis, 1);
    std::string msg;
    EXPECT_EQ(status_of_update(ls, true, &msg), DS_ERR_INVALID_STATE);
    EXPECT_EQ(ls.state().cur_hysteresis, 1);
    EXPECT_EQ(ls.state().cur_iter, 1);
}

TEST(LossScaler, SelectionByConfig) {
    Fp16Config off;  // fp16 disabled: bf16 or fp32
    off.loss_scale = 0.0;
    LossScaler none = LossScaler::from_config(off);
    EXPECT_FALSE(none.dynamic());
    EXPECT_EQ(none.scale(), 1.0);

    Fp16Config fixed = dynamic_cfg(16, 1000, 2, false, 1.0);
    fixed.loss_scale = 128.0;
    LossScaler st = LossScaler::from_config(fixed);
    EXPECT_FALSE(st.dynamic());
    EXPECT_EQ(st.scale(), 128.0);

    LossScaler dyn = LossScaler::from_config(Fp16Config{true});
    EXPECT_TRUE(dyn.dynamic());
    EXPECT_EQ(dyn.scale(), 65536.0);  // defaults: 2^16, hysteresis 2
    EXPECT_EQ(dyn.state().cur_hysteresis, 2);
    EXPECT_EQ(dyn.min_scale(), 1.0);
}

TEST(LossScaler, StaticUpdateIsANoOp) {
    Fp16Config fixed = dynamic_cfg(16, 1, 1, false, 1.0);
    fixed.loss_scale = 1.0;  // a static scale of 1 never raises, however often it overflows
    for (const Fp16Config& f : {fixed, Fp16Config{}}) {
        LossScaler ls = LossScaler::from_config(f);
        const LossScalerState s0 = ls.state();
        for (int i = 0; i < 50; ++i) ls.update(i % 3 != 0);
        EXPECT_EQ(ls.scale(), s0.cur_scale);
        EXPECT_EQ(ls.state().cur_iter, s0.cur_iter);
        EXPECT_EQ(ls.state().last_overflow_iter, s0.last_overflow_iter);
    }
}

TEST(LossScaler, StateRoundTrip) {
    LossScaler a = LossScaler::from_config(dynamic_cfg(12, 5, 3, false, 1.0));
    const bool pattern[] = {true, false, true, true, false, false, true, false, false, false};
    for (bool o : pattern) a.update(o);
    LossScaler b = LossScaler::from_config(dynamic_cfg(12, 5, 3, false, 1.0));
    b.set_state(a.state());
    for (int i = 0; i < 30; ++i) {
        const bool o = (i * 7) % 5 == 0;
        a.update(o);
        b.update(o);
        ASSERT_EQ(a.scale(), b.scale());
        ASSERT_EQ(a.state().cur_hysteresis, b.state().cur_hysteresis);
    }
}

// A restored cur_hysteresis above the configured hysteresis (the config
// changed between save and resume): with hysteresis 1 every overflow halves,
// whatever the counter says, as DeepSpeed's `delayed_shift == 1` test does.
TEST(LossScaler, HysteresisOneIgnoresARestoredCounter) {
    LossScaler ls = LossScaler::from_config(dynamic_cfg(10, 100, 1, false, 1.0));
    ls.set_state(LossScalerState{1024, 7, 2, 3});
    ls.update(true);
    EXPECT_EQ(ls.scale(), 512.0);
    EXPECT_EQ(ls.state().cur_hysteresis, 3);
    EXPECT_EQ(ls.state().last_overflow_iter, 7);
    // hysteresis 2 with a restored counter of 3 absorbs twice before halving.
    LossScaler h2 = LossScaler::from_config(dynamic_cfg(10, 100, 2, false, 1.0));
    h2.set_state(LossScalerState{1024, 7, 2, 3});
    h2.update(true);
    h2.update(true);
    EXPECT_EQ(h2.scale(), 1024.0);
    h2.update(true);
    EXPECT_EQ(h2.scale(), 512.0);
}

TEST(LossScaler, SetStateRejectsInconsistentState) {
    LossScaler ls = LossScaler::from_config(dynamic_cfg(12, 5, 3, false, 1.0));
    const LossScalerState good = ls.state();
    struct Bad { LossScalerState s; const char* field; };
    for (const Bad& b : {Bad{{0.0, 3, 1, 2}, "cur_scale"}, Bad{{NAN, 3, 1, 2}, "cur_scale"},
                         Bad{{8.0, -1, -1, 2}, "cur_iter"},
                         Bad{{8.0, 3, 3, 2}, "last_overflow_iter"},
                         Bad{{8.0, 3, -2, 2}, "last_overflow_iter"},
                         Bad{{8.0, 3, 1, 0}, "cur_hysteresis"}}) {
        try {
            ls.set_state(b.s);
            ADD_FAILURE() << "accepted a bad " << b.field;
        } catch (const ds::Error& e) {
            EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
            EXPECT_NE(std::string(e.what()).find(b.field), std::string::npos) << e.what();
        }
        EXPECT_EQ(ls.state().cur_scale, good.cur_scale);
    }
}

TEST(LossScaler, ConfigValidationNamesTheKey) {
    struct Case { Fp16Config f; const char* key; };
    Fp16Config neg = dynamic_cfg(16, 10, 2, false, 1.0);
    neg.loss_scale = -1.0;
    Fp16Config inf_scale = dynamic_cfg(16, 10, 2, false, 1.0);
    inf_scale.loss_scale = INFINITY;
    for (const Case& c : {Case{neg, "fp16.loss_scale"}, Case{inf_scale, "fp16.loss_scale"},
                          Case{dynamic_cfg(16, 0, 2, false, 1.0), "fp16.loss_scale_window"},
                          Case{dynamic_cfg(16, 10, 0, false, 1.0), "fp16.hysteresis"},
                          Case{dynamic_cfg(16, 10, 2, false, 0.0), "fp16.min_loss_scale"},
                          Case{dynamic_cfg(16, 10, 2, false, -2.0), "fp16.min_loss_scale"},
                          Case{dynamic_cfg(1024, 10, 2, false, 1.0), "fp16.initial_scale_power"},
                          Case{dynamic_cfg(-1075, 10, 2, false, 1.0),
                               "fp16.initial_scale_power"}}) {
        try {
            LossScaler::from_config(c.f);
            ADD_FAILURE() << "accepted a bad " << c.key;
        } catch (const ds::Error& e) {
            EXPECT_EQ(e.status(), DS_ERR_INVALID_CONFIG);
            EXPECT_NE(std::string(e.what()).find(c.key), std::string::npos) << e.what();
        }
    }
    // fp16 disabled: the fp16 fields are not used, so not checked.
    Fp16Config off = dynamic_cfg(16, 0, 0, false, 0.0);
    off.enabled = false;
    EXPECT_NO_THROW(LossScaler::from_config(off));
    // Negative powers are fine (2**-3 = 0.125, as in Python).
    EXPECT_EQ(LossScaler::from_config(dynamic_cfg(-3, 10, 2, false, 0.125)).scale(), 0.125);
}
