// Named wall-clock timers, DeepSpeed's SynchronizedWallClockTimer on the
// host: each accumulates milliseconds over start/stop pairs until read with
// reset. log_line() is DeepSpeed's timers.log() text:
//   "time (ms) | fwd: 12.34 | bwd: 20.00 | ..."
// listing only the names that have been started at least once, values %.2f.
// The engine's names (DeepSpeed 0.19.6, utils/timer.py) are below.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace ds::monitor {

// Per-boundary ("global") timers and their per-micro-step twins.
inline constexpr const char* kForward = "fwd";
inline constexpr const char* kBackward = "bwd";
inline constexpr const char* kBackwardInner = "bwd_inner";
inline constexpr const char* kBackwardAllreduce = "bwd_allreduce";
inline constexpr const char* kStep = "step";
inline constexpr const char* kForwardMicro = "fwd_microstep";
inline constexpr const char* kBackwardMicro = "bwd_microstep";
inline constexpr const char* kBackwardInnerMicro = "bwd_inner_microstep";
inline constexpr const char* kBackwardAllreduceMicro = "bwd_allreduce_microstep";
inline constexpr const char* kStepMicro = "step_microstep";

const std::vector<std::string>& global_timer_names();
const std::vector<std::string>& micro_timer_names();

class Timers {
public:
    using Clock = std::chrono::steady_clock;
    // start() of a running timer and stop() of a stopped one are ignored
    // (an exception thrown between them must not wedge the engine).
    void start(const std::string& name);
    void stop(const std::string& name);
    // Accumulated milliseconds (a running timer counts up to now).
    double elapsed_ms(const std::string& name, bool reset);
    bool has(const std::string& name) const { return timers_.count(name) != 0; }
    // "time (ms) | a: 1.00 | b: 2.50"; resets the listed timers when `reset`.
    std::string log_line(const std::vector<std::string>& names, bool reset = true);

private:
    struct Timer {
        double elapsed_ms = 0.0;
        bool running = false;
        Clock::time_point started;
    };
    std::map<std::string, Timer> timers_;
};

}  // namespace ds::monitor
