// AsyncOp: one operation in flight on a communicator, as a backend sees it
// (MPI requests, a CUDA event) plus what every backend shares: its
// fingerprint (for messages), its deadline and its outcome. The communicator
// drives it under its progress lock, from the waiting thread or the watchdog.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "comm/fingerprint.h"
#include "core/error.h"

namespace ds::comm {

class AsyncOp {
public:
    using Clock = std::chrono::steady_clock;

    AsyncOp(const Fingerprint& fp, Clock::time_point deadline) : fp_(fp), deadline_(deadline) {}
    virtual ~AsyncOp() = default;
    AsyncOp(const AsyncOp&) = delete;
    AsyncOp& operator=(const AsyncOp&) = delete;

    // Backend progress: true once the data movement is complete. Throws
    // ds::Error on a backend failure. Called with the progress lock held.
    virtual bool progress() = 0;
    // Runs once after progress() returned true, before the operation counts
    // as done (e.g. fp32 scratch -> fp16 result). Progress lock held.
    virtual void complete() {}

    const Fingerprint& fingerprint() const { return fp_; }
    Clock::time_point deadline() const { return deadline_; }

    bool pending() const { return state_.load(std::memory_order_acquire) == kPending; }
    bool done() const { return state_.load(std::memory_order_acquire) == kDone; }
    bool failed() const { return state_.load(std::memory_order_acquire) == kFailed; }

    // State changes happen under the communicator's progress lock; the
    // first outcome wins and a finished operation stays finished.
    void mark_done() {
        if (pending()) state_.store(kDone, std::memory_order_release);
    }
    void mark_failed(ds_status_t status, const std::string& message) {
        if (!pending()) return;
        status_ = status;
        message_ = message;
        state_.store(kFailed, std::memory_order_release);
    }
    // Throws the failure (only valid when failed()).
    [[noreturn]] void rethrow() const { throw Error(status_, message_); }

private:
    static constexpr int kPending = 0, kDone = 1, kFailed = 2;
    Fingerprint fp_;
    Clock::time_point deadline_;
    std::atomic<int> state_{kPending};
    ds_status_t status_ = DS_OK;
    std::string message_;
};

}  // namespace ds::comm
