// Watchdog: the background thread of a communicator. It calls tick() every
// `busy_period` while tick() reports work in flight (driving MPI progress so
// reductions overlap the host's compute, and expiring operations past their
// deadline) and every `idle_period` otherwise (reading peers' failure
// notices). wake() makes it tick now; stop() joins it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace ds::comm {

class Watchdog {
public:
    Watchdog(std::function<bool()> tick, std::chrono::microseconds busy_period,
             std::chrono::microseconds idle_period);
    ~Watchdog();
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

    void wake();
    void stop() noexcept;

private:
    void run();

    std::function<bool()> tick_;
    std::chrono::microseconds busy_, idle_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    bool woken_ = false;
    std::thread thread_;
};

}  // namespace ds::comm
