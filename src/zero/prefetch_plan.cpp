// PrefetchPlan (prefetch_plan.h): the trace replay that names the ZeRO-3
// parameters to gather ahead of their request.
#include "zero/prefetch_plan.h"

#include <algorithm>
#include <atomic>

namespace ds::zero {

std::vector<size_t> PrefetchPlan::on_request(size_t ti, const std::function<Avail(size_t)>& avail,
                                             const std::function<int64_t(size_t)>& numel, int64_t in_flight,
                                             int64_t live) {
    if (!enabled()) return {};
    if (!overflow_) {
        if (order_.size() < kMaxRecorded) {
            order_.push_back(ti);
        } else {
            overflow_ = true;
            order_.clear();
            order_.shrink_to_fit();
        }
    }
    if (!on_trace_) return {};
    if (cursor_ >= trace_.size() || trace_[cursor_] != ti) {
        on_trace_ = false;
        return {};
    }
    ++cursor_;
    if (bucket_ <= 0) return {};
    ahead_ = std::max(ahead_, cursor_);
    std::vector<size_t> start;
    while (ahead_ < trace_.size() && in_flight < bucket_ && live < max_live_) {
        const size_t tj = trace_[ahead_];
        const Avail a = std::find(start.begin(), start.end(), tj) != start.end() ? Avail::Busy : avail(tj);
        if (a == Avail::Busy) break;  // resumed by a later request
        ++ahead_;
        const int64_t n = numel(tj);
        if (a == Avail::Always || n <= 0) continue;  // nothing to move
        start.push_back(tj);
        in_flight += n;
        live += n;
    }
    return start;
}

bool PrefetchPlan::reused_soon(size_t ti, const std::function<int64_t(size_t)>& numel) const {
    if (reuse_ <= 0 || !on_trace()) return false;
    int64_t passed = 0;
    for (size_t j = cursor_; j < trace_.size() && passed < reuse_; ++j) {
        if (trace_[j] == ti) return true;
        passed += numel(trace_[j]);
    }
    return false;
}

void PrefetchPlan::end_window() {
    if (!enabled()) return;
    if (overflow_) trace_.clear();
    else trace_.swap(order_);
    order_.clear();
    cursor_ = ahead_ = 0;
    on_trace_ = !trace_.empty();
    overflow_ = false;
}

namespace {
std::atomic<int> g_mode{static_cast<int>(PrefetchMode::Async)};
std::atomic<int64_t> g_started{0}, g_used{0}, g_dropped{0}, g_kept{0}, g_reused{0};
}  // namespace

void set_prefetch_mode_for_testing(PrefetchMode mode) { g_mode.store(static_cast<int>(mode)); }
PrefetchMode prefetch_mode() { return static_cast<PrefetchMode>(g_mode.load()); }

PrefetchCounters prefetch_counters() {
    return {g_started.load(), g_used.load(), g_dropped.load(), g_kept.load(), g_reused.load()};
}
void reset_prefetch_counters() {
    g_started = 0;
    g_used = 0;
    g_dropped = 0;
    g_kept = 0;
    g_reused = 0;
}
void count_reuse(int64_t kept, int64_t reused) {
    g_kept += kept;
    g_reused += reused;
}
void count_prefetch(int64_t started, int64_t used, int64_t dropped) {
    g_started += started;
    g_used += used;
    g_dropped += dropped;
}

}  // namespace ds::zero
