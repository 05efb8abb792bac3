// LR schedules against DEEPSPEED_SEMANTICS.md §16.1 (worked examples, optimizer steps
// s = 0..8, schedule index t = s - 1), plus the API contract of LrScheduler.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "sched/lr_scheduler.h"

using ds::config::SchedulerConfig;
using ds::sched::LrScheduler;

namespace {

struct Row {
    const char* what;
    SchedulerConfig cfg;
    double optimizer_lr;
    double expected[9];  // §16.1 as printed (4 decimals)
};

SchedulerConfig warmup(const char* type, const char* wtype, int64_t n) {
    SchedulerConfig c;
    c.type = type;
    c.warmup_type = wtype;
    c.warmup_num_steps = n;
    return c;
}

std::vector<Row> table_16_1() {
    std::vector<Row> rows;
    {
        SchedulerConfig c = warmup("WarmupLR", "linear", 4);
        c.warmup_min_lr = 0.0;
        c.warmup_max_lr = 1.0;
        rows.push_back({"WarmupLR linear", c, 0.5, {0, 0, 0.25, 0.5, 0.75, 1, 1, 1, 1}});
    }
    {
        SchedulerConfig c = warmup("WarmupLR", "log", 4);
        c.warmup_max_lr = 1.0;
        rows.push_back({"WarmupLR log", c, 0.5, {0, 0, 0.5, 0.7925, 1, 1, 1, 1, 1}});
    }
    {
        SchedulerConfig c = warmup("WarmupDecayLR", "linear", 2);
        c.warmup_max_lr = 1.0;
        c.total_num_steps = 6;
        rows.push_back({"WarmupDecayLR linear", c, 0.5, {0, 0, 0.5, 1.0, 0.75, 0.5, 0.25, 0, 0}});
    }
    {
        SchedulerConfig c = warmup("WarmupCosineLR", "linear", 2);
        c.total_num_steps = 6;
        c.warmup_min_ratio = 0.0;
        c.cos_min_ratio = 1e-4;
        rows.push_back({"WarmupCosineLR linear", c, 1.0,
                        {0, 0, 0.5, 0.8536, 0.5, 0.1465, 1e-4, 1e-4, 1e-4}});
    }
    {
        SchedulerConfig c;
        c.type = "OneCycle";
        c.cycle_first_step_size = 2;
        c.cycle_second_step_size = 2;
        c.cycle_min_lr = 0.0;
        c.cycle_max_lr = 1.0;
        rows.push_back({"OneCycle", c, 0.5, {0, 0.5, 1.0, 0.5, 0, 0, 0, 0, 0}});
    }
    {
        SchedulerConfig c;
        c.type = "LRRangeTest";
        c.lr_range_test_min_lr = 1.0;
        c.lr_range_test_step_rate = 1.0;
        c.lr_range_test_step_size = 2;
        rows.push_back({"LRRangeTest", c, 0.5, {1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5}});
    }
    return rows;
}

}  // namespace

// Driven through step(): optimizer step s reads current() and then the
// engine steps the schedule, so s runs at t = s - 1.
TEST(SchedWorkedExamples, Table16_1AsPrinted) {
    for (const Row& row : table_16_1()) {
        auto s = LrScheduler::create(row.cfg, row.optimizer_lr, true);
        EXPECT_EQ(s->last_batch_iteration(), -1) << row.what;
        for (int step = 0; step < 9; ++step) {
            EXPECT_NEAR(s->current().lr, row.expected[step], 1e-4)
                << row.what << " s=" << step;
            EXPECT_EQ(s->last_batch_iteration(), step - 1);
            s->step();
        }
    }
}

// The same rows with the exact values the formulas give (not rounded).
TEST(SchedWorkedExamples, Table16_1Exact) {
    const double log_row[9] = {0, 0, 0.5, std::log(3.0) / std::log(4.0), 1, 1, 1, 1, 1};
    const double pi = std::acos(-1.0);
    auto cosr = [&](double p) { return 1e-4 + (1 - 1e-4) * (1 + std::cos(pi * p)) / 2; };
    const double cos_row[9] = {0, 0, 0.5, cosr(0.25), cosr(0.5), cosr(0.75), 1e-4, 1e-4, 1e-4};
    std::vector<Row> rows = table_16_1();
    for (int i = 0; i < 9; ++i) {
        rows[1].expected[i] = log_row[i];
        rows[3].expected[i] = cos_row[i];
    }
    for (const Row& row : rows) {
        auto s = LrScheduler::create(row.cfg, row.optimizer_lr, true);
        for (int step = 0; step < 9; ++step)
            EXPECT_NEAR(s->at(step - 1).lr, row.expected[step], 1e-15)
                << row.what << " s=" << step;
    }
}

TEST(SchedApi, FirstStepsOfTheDefaults) {
    // WarmupLR with default warmup_min_lr = 0: the first two optimizer steps run at 0.
    SchedulerConfig w;
    w.type = "WarmupLR";
    auto wl = LrScheduler::create(w, 0.01, true);
    EXPECT_EQ(wl->at(-1).lr, 0.0);
    EXPECT_EQ(wl->at(0).lr, 0.0);
    EXPECT_GT(wl->at(1).lr, 0.0);
    // warmup_max_lr None => optimizer lr, reached at t = N - 1 (log).
    EXPECT_DOUBLE_EQ(wl->at(999).lr, 0.01);
    EXPECT_LT(wl->at(998).lr, 0.01);
    // WarmupDecayLR: warmup_max_lr None => 0.001 (not the optimizer lr).
    SchedulerConfig d;
    d.type = "WarmupDecayLR";
    d.total_num_steps = 5000;
    auto dl = LrScheduler::create(d, 0.5, true);
    EXPECT_DOUBLE_EQ(dl->at(999).lr, 0.001);
    // WarmupCosineLR: lr = 0 for the very first step even with warmup_min_ratio > 0.
    SchedulerConfig c;
    c.type = "WarmupCosineLR";
    c.total_num_steps = 100;
    c.warmup_min_ratio = 0.3;
    auto cl = LrScheduler::create(c, 2.0, true);
    EXPECT_EQ(cl->current().lr, 0.0);
    EXPECT_DOUBLE_EQ(cl->at(0).lr, 0.6);
}

TEST(SchedApi, CheckpointRestoreIsTheIndexOnly) {
    SchedulerConfig c;
    c.type = "WarmupCosineLR";
    c.total_num_steps = 50;
    c.warmup_num_steps = 7;
    auto a = LrScheduler::create(c, 0.1, true);
    for (int i = 0; i < 23; ++i) a->step();
    auto b = LrScheduler::create(c, 0.1, true);
    b->set_last_batch_iteration(a->last_batch_iteration());
    EXPECT_EQ(b->last_batch_iteration(), 22);
    EXPECT_EQ(b->current().lr, a->current().lr);
    b->set_last_batch_iteration(-1);
    EXPECT_EQ(b->current().lr, 0.0);
    try {
        b->set_last_batch_iteration(-2);
        FAIL() << "expected an error";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(e.what()).find("last_batch_iteration"), std::string::npos);
    }
    EXPECT_THROW(b->at(-2), ds::Error);
}

TEST(SchedApi, NamesAndBetas) {
    const char* names[] = {"LRRangeTest", "OneCycle", "WarmupLR", "WarmupDecayLR",
                           "WarmupCosineLR"};
    for (const char* n : names) {
        SchedulerConfig c;
        c.type = n;
        c.total_num_steps = 10;
        c.cycle_max_lr = 1.0;
        auto s = LrScheduler::create(c, 0.1, true);
        EXPECT_STREQ(s->name(), n);
        // Only OneCycle (with momentum cycling) writes betas.
        EXPECT_EQ(s->current().has_beta1, std::string(n) == "OneCycle") << n;
    }
}

namespace {
void expect_error(const SchedulerConfig& c, ds_status_t status, const std::string& needle) {
    try {
        LrScheduler::create(c, 0.1, true);
        ADD_FAILURE() << "expected an error naming " << needle;
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), status) << e.what();
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}
}  // namespace

TEST(SchedApi, UnknownTypeIsUnsupported) {
    SchedulerConfig c;
    c.type = "warmuplr";  // case-sensitive, as DeepSpeed
    expect_error(c, DS_ERR_UNSUPPORTED, "scheduler.type");
    c.type = "CosineAnnealingLR";  // torch.optim.lr_scheduler fallback: not built
    expect_error(c, DS_ERR_UNSUPPORTED, "scheduler.type");
    c.type = "";
    expect_error(c, DS_ERR_UNSUPPORTED, "scheduler.type");
}

TEST(SchedApi, InvalidParamsNameTheKey) {
    SchedulerConfig c;
    c.type = "LRRangeTest";
    c.lr_range_test_step_size = 0;
    expect_error(c, DS_ERR_INVALID_CONFIG, "scheduler.params.lr_range_test_step_size");

    c = SchedulerConfig{};
    c.type = "OneCycle";
    c.cycle_first_step_size = 0;
    expect_error(c, DS_ERR_INVALID_CONFIG, "scheduler.params.cycle_first_step_size");
    c.cycle_first_step_size = 3;
    c.cycle_second_step_size = -1;
    expect_error(c, DS_ERR_INVALID_CONFIG, "scheduler.params.cycle_second_step_size");
    c.cycle_second_step_size = 0;  // allowed: a ramp with no way down
    EXPECT_NO_THROW(LrScheduler::create(c, 0.1, true));
    c.cycle_first_stair_count = -2;
    expect_error(c, DS_ERR_INVALID_CONFIG, "scheduler.params.cycle_first_stair_count");
    c.cycle_first_stair_count = 0;
    c.decay_step_size = -5;
    expect_error(c, DS_ERR_INVALID_CONFIG, "scheduler.params.decay_step_size");
    c.decay_step_size = 0;
    c.cycle_max_lr = NAN;
    expect_error(c, DS_ERR_INVALID_CONFIG, "scheduler.params.cycle_max_lr");

    for (const char* t : {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR"}) {
        c = SchedulerConfig{};
        c.type = t;
        c.total_num_steps = 100;
        c.warmup_num_steps = 0;
        expect_error(c, DS_ERR_INVALID_CONFIG, "scheduler.params.warmup_num_steps");
        c.warmup_num_steps = 10;
        c.warmup_type = "cosine";
        expect_error(c, DS_ERR_INVALID_CONFIG, "scheduler.params.warmup_type");
    }
    for (const char* t : {"WarmupDecayLR", "WarmupCosineLR"}) {
        c = SchedulerConfig{};
        c.type = t;
        expect_error(c, DS_ERR_INVALID_CONFIG, "scheduler.params.total_num_steps");
    }
}
