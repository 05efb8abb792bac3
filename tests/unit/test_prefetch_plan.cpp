// PrefetchPlan (zero/prefetch_plan.h): which ZeRO-3 parameters a request
// starts gathering, replayed from the last window's order, within the
// bucket and max_live_parameters. The strategy's side (the gathers
// themselves) is tested under mpirun (tests/mpi/test_zero3_prefetch.cpp).
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "zero/prefetch_plan.h"

namespace {

using ds::zero::PrefetchPlan;

// A toy strategy: parameter i has numel[i] elements; a request makes its
// parameter whole (in flight ones become whole), a release drops it;
// `always` are persistent.
struct Toy {
    std::vector<int64_t> numel;
    std::set<size_t> whole, in_flight, always;
    int64_t max_live_numel = 0;

    explicit Toy(std::vector<int64_t> n) : numel(std::move(n)) {}

    int64_t flight() const {
        int64_t s = 0;
        for (size_t i : in_flight) s += numel[i];
        return s;
    }
    int64_t live() const {
        int64_t s = flight();
        for (size_t i : whole) s += numel[i];
        return s;
    }
    // Request i, then release it: the parameters the plan started.
    std::vector<size_t> use(PrefetchPlan& plan, size_t i) {
        in_flight.erase(i);
        whole.insert(i);
        auto avail = [this](size_t j) {
            if (always.count(j)) return PrefetchPlan::Avail::Always;
            return whole.count(j) || in_flight.count(j) ? PrefetchPlan::Avail::Busy : PrefetchPlan::Avail::Absent;
        };
        auto n = [this](size_t j) { return numel[j]; };
        std::vector<size_t> started = plan.on_request(i, avail, n, flight(), live());
        for (size_t j : started) in_flight.insert(j);
        max_live_numel = std::max(max_live_numel, live());
        whole.erase(i);
        return started;
    }
    void end(PrefetchPlan& plan) {
        in_flight.clear();
        plan.end_window();
    }
};

using V = std::vector<size_t>;

TEST(PrefetchPlan, FirstWindowRecordsThenFollowsTheTrace) {
    Toy t({10, 10, 10, 10});
    PrefetchPlan plan(/*bucket=*/15, /*max_live=*/1000, /*reuse=*/0);
    for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(t.use(plan, i).empty()) << "no trace yet";
    t.end(plan);
    EXPECT_EQ(plan.trace_length(), 4u);
    // Window 2: each request starts the next one (10 in flight < 15 lets one more start: 20).
    EXPECT_EQ(t.use(plan, 0), (V{1, 2}));  // 0 < 15, 10 < 15: two, overshooting to 20
    EXPECT_EQ(t.use(plan, 1), (V{3}));     // 2 in flight (10) < 15: one more
    EXPECT_EQ(t.use(plan, 2), (V{}));      // the trace ends
    EXPECT_EQ(t.use(plan, 3), (V{}));
}

TEST(PrefetchPlan, BucketBoundsWhatIsInFlight) {
    Toy t(std::vector<int64_t>(20, 7));
    PrefetchPlan plan(/*bucket=*/20, /*max_live=*/1000000, 0);
    for (size_t i = 0; i < 20; ++i) t.use(plan, i);
    t.end(plan);
    for (size_t i = 0; i < 20; ++i) {
        t.use(plan, i);
        EXPECT_LE(t.flight(), 20 + 7) << "at most the bucket plus the one that overshoots";
    }
    EXPECT_GE(t.max_live_numel, 7 + 21);  // the request plus three in flight
}

TEST(PrefetchPlan, MaxLiveBoundsWholeCopies) {
    Toy t(std::vector<int64_t>(10, 5));
    PrefetchPlan plan(/*bucket=*/1000, /*max_live=*/12, 0);
    for (size_t i = 0; i < 10; ++i) t.use(plan, i);
    t.end(plan);
    for (size_t i = 0; i < 10; ++i) t.use(plan, i);
    // One whole (5) + prefetch while live < 12: two more (15), never three.
    EXPECT_EQ(t.max_live_numel, 15);
}

// A parameter used twice: its second use is prefetched only once the first
// is over (it is released in between); persistent and empty ones are passed.
TEST(PrefetchPlan, WaitsForAnEarlierUseToEnd) {
    Toy t({4, 0, 4, 4});
    t.always.insert(3);
    PrefetchPlan plan(100, 1000, 0);
    const V order = {0, 1, 2, 0, 3, 2};
    for (size_t i : order) t.use(plan, i);
    t.end(plan);
    EXPECT_EQ(t.use(plan, 0), (V{2})) << "1 is empty; the trace's next 0 waits: 0 is in use";
    EXPECT_EQ(t.use(plan, 1), (V{0})) << "0 was released; 3 is persistent; the next 2 waits: 2 is in flight";
    EXPECT_EQ(t.use(plan, 2), (V{})) << "2 is in use";
    EXPECT_EQ(t.use(plan, 0), (V{2}));
    EXPECT_EQ(t.use(plan, 3), (V{}));
    EXPECT_EQ(t.use(plan, 2), (V{}));
}

TEST(PrefetchPlan, LeavingTheTraceStopsUntilTheWindowEnds) {
    Toy t({3, 3, 3, 3, 3});
    PrefetchPlan plan(4, 1000, 0);
    for (size_t i = 0; i < 5; ++i) t.use(plan, i);
    t.end(plan);
    EXPECT_EQ(t.use(plan, 0), (V{1, 2}));
    EXPECT_EQ(t.use(plan, 3), (V{})) << "the trace expected 1";
    EXPECT_FALSE(plan.on_trace());
    EXPECT_EQ(t.use(plan, 1), (V{}));
    EXPECT_EQ(t.use(plan, 4), (V{}));
    t.end(plan);  // the window's order 0 3 1 4 is the next trace
    EXPECT_EQ(plan.trace_length(), 4u);
    EXPECT_EQ(t.use(plan, 0), (V{3, 1}));
    EXPECT_EQ(t.use(plan, 3), (V{4}));
}

TEST(PrefetchPlan, ZeroBucketNeverPrefetches) {
    Toy t({3, 3});
    PrefetchPlan plan(0, 1000, 0);
    EXPECT_FALSE(plan.enabled());
    t.use(plan, 0);
    t.use(plan, 1);
    t.end(plan);
    EXPECT_EQ(plan.trace_length(), 0u);
    EXPECT_TRUE(t.use(plan, 0).empty());
}

TEST(PrefetchPlan, AnEmptyWindowLeavesNoTrace) {
    Toy t({3, 3});
    PrefetchPlan plan(10, 1000, 0);
    t.use(plan, 0);
    t.use(plan, 1);
    t.end(plan);
    t.end(plan);  // a window without requests (a step with nothing gathered)
    EXPECT_EQ(plan.trace_length(), 0u);
    EXPECT_TRUE(t.use(plan, 0).empty());
}

// max_reuse_distance: a release keeps the copy when the trace asks for the
// parameter again before `distance` elements of other requests have passed.
TEST(PrefetchPlan, ReusedSoonCountsElementsFromTheNextRequest) {
    Toy t({10, 10, 10, 10});
    const V order = {0, 1, 2, 0, 3, 1};
    for (int64_t distance : {int64_t{15}, int64_t{25}}) {
        PrefetchPlan plan(/*bucket=*/0, 1000, distance);
        for (size_t i : order) t.use(plan, i);
        t.end(plan);
        auto n = [&t](size_t j) { return t.numel[j]; };
        EXPECT_TRUE(t.use(plan, 0).empty()) << "no bucket: nothing prefetched";
        // Released after the request: next come 1 (10), 2 (10), then 0.
        EXPECT_EQ(plan.reused_soon(0, n), distance > 20) << distance;
        t.use(plan, 1);  // next: 2 (10), 0, 3, 1
        EXPECT_EQ(plan.reused_soon(1, n), false) << "1 comes back after 30 elements";
        t.use(plan, 2);
        EXPECT_FALSE(plan.reused_soon(2, n)) << "never again";
        t.use(plan, 0);
        t.use(plan, 3);
        EXPECT_TRUE(plan.reused_soon(1, n)) << "the very next request";
        t.use(plan, 1);
        EXPECT_FALSE(plan.reused_soon(1, n)) << "the end of the trace";
        t.end(plan);
    }
    PrefetchPlan none(10, 1000, 0);
    Toy u({1, 1});
    u.use(none, 0);
    u.use(none, 1);
    u.use(none, 0);
    u.end(none);
    u.use(none, 0);
    EXPECT_FALSE(none.reused_soon(0, [](size_t) { return int64_t{1}; })) << "distance 0: every release frees";
}

}  // namespace
