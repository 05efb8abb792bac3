#include "comm/watchdog.h"

#include <utility>

namespace ds::comm {

Watchdog::Watchdog(std::function<bool()> tick, std::chrono::microseconds busy_period,
                   std::chrono::microseconds idle_period)
    : tick_(std::move(tick)), busy_(busy_period), idle_(idle_period) {
    thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() { stop(); }

void Watchdog::wake() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        woken_ = true;
    }
    cv_.notify_one();
}

void Watchdog::stop() noexcept {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_one();
    if (!thread_.joinable()) return;
    if (thread_.get_id() == std::this_thread::get_id())
        thread_.detach();  // stopped from its own tick: it returns after this tick
    else
        thread_.join();
}

void Watchdog::run() {
    bool busy = false;
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait_for(lock, busy ? busy_ : idle_, [this] { return stop_ || woken_; });
            if (stop_) return;
            woken_ = false;
        }
        busy = tick_();  // the tick catches its own errors
    }
}

}  // namespace ds::comm
