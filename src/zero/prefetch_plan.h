// ZeRO-3 parameter prefetch and reuse (zero_optimization.prefetch_bucket_size,
// max_live_parameters, max_reuse_distance; DEEPSPEED_SEMANTICS.md §6.2
// "Fetch/release"): which parameters to start gathering ahead of their use,
// and which to keep whole when released because they are used again soon.
//
// Like DeepSpeed's coordinator it replays a trace: the order in which the
// last optimizer window (from one step boundary to the next) asked for its
// parameters. While this window asks in the same order, each request lets
// the plan look further along the trace and name parameters that are not
// whole yet (it stops at one still whole or in flight for an earlier use:
// it may be released before the later one; DeepSpeed instead keeps such a
// parameter gathered until its later use), while the elements in flight stay under prefetch_bucket_size
// and the elements of whole copies (not persistent, in flight included)
// under max_live_parameters. Like DeepSpeed's loop, the last one named may
// overshoot either. The first window records; a request out of trace order stops the
// prefetch for the rest of the window, and that window's order becomes the
// next trace (DeepSpeed invalidates and re-records the same way).
//
// Where DeepSpeed differs: its budget counts only what one request starts,
// so the elements in flight can grow by prefetch_bucket_size per module
// until max_live_parameters binds; here the budget is a window over what is
// in flight, so the bucket is the most memory prefetch holds.
//
// The plan only decides; the strategy (stage3.cpp) starts the gathers. Every
// rank must decide the same (the gathers are collectives): the plan reads
// nothing but the order of requests and the strategy's answers about whole
// parameters, which the ranks share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace ds::zero {

class PrefetchPlan {
public:
    // `bucket` <= 0: no prefetch; `reuse_distance` <= 0: every release
    // frees; both: the trace is not even recorded.
    PrefetchPlan(int64_t bucket, int64_t max_live, int64_t reuse_distance)
        : bucket_(bucket), max_live_(max_live), reuse_(reuse_distance) {}

    bool enabled() const { return bucket_ > 0 || reuse_ > 0; }

    // What a trace entry's parameter is when the plan reaches it.
    enum class Avail {
        Absent,  // not whole: start its gather
        Always,  // persistent: whole for good, nothing to do
        Busy,    // whole or in flight for an earlier use: stop here until that
                 // use is over (it may be released before this one)
    };

    // A request for trainable parameter `ti`. Returns the parameters to start
    // gathering now, in trace order. `avail(tj)`; `numel(tj)`: its whole
    // size; `in_flight`: elements being prefetched now; `live`: elements of
    // whole copies (not persistent) plus those in flight.
    std::vector<size_t> on_request(size_t ti, const std::function<Avail(size_t)>& avail,
                                   const std::function<int64_t(size_t)>& numel, int64_t in_flight, int64_t live);

    // max_reuse_distance: whether `ti`, released now, is asked for again in
    // the trace before requests for reuse_distance elements (`numel` each)
    // have passed, counting from the next request expected. Then its whole
    // copy stays (DeepSpeed's coordinator does not release it either).
    // False off the trace.
    bool reused_soon(size_t ti, const std::function<int64_t(size_t)>& numel) const;

    // The window ended (a step, a skipped step, dropped gradients): its order
    // becomes the trace the next window follows.
    void end_window();

    // This window left the trace: nothing more is prefetched until it ends.
    void leave_trace() { on_trace_ = false; }
    bool on_trace() const { return on_trace_ && cursor_ < trace_.size(); }
    size_t trace_length() const { return trace_.size(); }

    // A window longer than this many requests (an evaluation loop that never
    // steps) is not recorded: no trace, no prefetch.
    static constexpr size_t kMaxRecorded = size_t{1} << 22;

private:
    int64_t bucket_, max_live_, reuse_;
    std::vector<size_t> trace_, order_;
    size_t cursor_ = 0;  // the next request the trace expects
    size_t ahead_ = 0;   // trace entries up to here have been considered
    bool on_trace_ = false;
    bool overflow_ = false;
};

// How a started prefetch moves its data, for tests (default Async):
// Async: a non-blocking all-gather, waited for when the parameter is asked
// for. Deferred: nothing moves until then (the gather runs at the request,
// so a parameter used without its wait reads garbage). Eager: the gather
// runs when the prefetch starts (so a parameter gathered before a step and
// used after it reads the old weights).
enum class PrefetchMode { Async, Deferred, Eager };
void set_prefetch_mode_for_testing(PrefetchMode mode);
PrefetchMode prefetch_mode();

// Process-wide counts, for tests and the debug log.
struct PrefetchCounters {
    int64_t started = 0;  // gathers started ahead of their request
    int64_t used = 0;     // of those, asked for before the window ended
    int64_t dropped = 0;  // of those, never asked for (waited for and freed)
    int64_t kept = 0;     // releases that kept the whole copy for a use soon after
    int64_t reused = 0;   // requests served by a kept copy (no gather)
};
PrefetchCounters prefetch_counters();
void reset_prefetch_counters();
void count_prefetch(int64_t started, int64_t used, int64_t dropped);
void count_reuse(int64_t kept, int64_t reused);

}  // namespace ds::zero
