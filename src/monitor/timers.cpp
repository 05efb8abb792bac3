#include "monitor/timers.h"

#include "core/error.h"

namespace ds::monitor {

const std::vector<std::string>& global_timer_names() {
    static const std::vector<std::string> v = {kForward, kBackward, kBackwardInner, kBackwardAllreduce, kStep};
    return v;
}

const std::vector<std::string>& micro_timer_names() {
    static const std::vector<std::string> v = {kForwardMicro, kBackwardMicro, kBackwardInnerMicro,
                                               kBackwardAllreduceMicro, kStepMicro};
    return v;
}

void Timers::start(const std::string& name) {
    Timer& t = timers_[name];
    if (t.running) return;
    t.running = true;
    t.started = Clock::now();
}

void Timers::stop(const std::string& name) {
    auto it = timers_.find(name);
    if (it == timers_.end() || !it->second.running) return;
    Timer& t = it->second;
    t.elapsed_ms += std::chrono::duration<double, std::milli>(Clock::now() - t.started).count();
    t.running = false;
}

double Timers::elapsed_ms(const std::string& name, bool reset) {
    auto it = timers_.find(name);
    if (it == timers_.end()) return 0.0;
    Timer& t = it->second;
    double ms = t.elapsed_ms;
    const auto now = Clock::now();
    if (t.running) ms += std::chrono::duration<double, std::milli>(now - t.started).count();
    if (reset) {
        t.elapsed_ms = 0.0;
        if (t.running) t.started = now;
    }
    return ms;
}

std::string Timers::log_line(const std::vector<std::string>& names, bool reset) {
    std::string s = "time (ms)";
    for (const std::string& n : names)
        if (has(n)) s += format(" | %s: %.2f", n.c_str(), elapsed_ms(n, reset));
    return s;
}

}  // namespace ds::monitor
