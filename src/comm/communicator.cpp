// Communicator base: the sticky failure state, requests and waiting with
// deadlines, the watchdog tick, and finalize. The public operations'
// argument checks and sequencing are in communicator_ops.cpp.
#include "comm/communicator.h"

#include <algorithm>
#include <thread>

#include "comm/async_op.h"
#include "comm/watchdog.h"
#include "core/log.h"

namespace ds::comm {

// ---------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------

// A request on a tracked operation. Destroying it without waiting waits
// (bounded by the deadline), so buffers are never written after the caller
// dropped its request; the outcome is then only visible as the comm's state.
class TrackedRequest final : public Request {
public:
    TrackedRequest(std::shared_ptr<Communicator> comm, std::shared_ptr<AsyncOp> op)
        : comm_(std::move(comm)), op_(std::move(op)) {}
    ~TrackedRequest() override {
        if (!op_->pending()) return;
        try {
            comm_->wait_op(*op_);
        } catch (...) {
            // The failure is recorded in the communicator; nobody is left to tell.
        }
    }
    void wait() override { comm_->wait_op(*op_); }
    bool test() override { return comm_->test_op(*op_); }

private:
    std::shared_ptr<Communicator> comm_;
    std::shared_ptr<AsyncOp> op_;
};

namespace {
class CompletedRequest final : public Request {
public:
    void wait() override {}
    bool test() override { return true; }
};

// Waiting: spin briefly (small collectives finish in microseconds), then poll
// less often so a long wait does not steal the host's cores.
void backoff(std::chrono::steady_clock::duration waited) {
    using namespace std::chrono;
    if (waited < milliseconds(2))
        std::this_thread::yield();
    else if (waited < milliseconds(200))
        std::this_thread::sleep_for(microseconds(20));
    else
        std::this_thread::sleep_for(microseconds(200));
}
}  // namespace

// ---------------------------------------------------------------------------
// Construction, state
// ---------------------------------------------------------------------------

Communicator::Communicator(const Options& options) : options_(options) {
    DS_CHECK(options.timeout_ms > 0, DS_ERR_INVALID_ARGUMENT,
             "communicator timeout_ms = %lld must be > 0", static_cast<long long>(options.timeout_ms));
}

Communicator::~Communicator() { stop_watchdog(); }

ds_status_t Communicator::break_status() const {
    std::lock_guard<std::mutex> lock(fail_mu_);
    return break_status_;
}

std::string Communicator::break_message() const {
    std::lock_guard<std::mutex> lock(fail_mu_);
    return break_message_;
}

std::string Communicator::where() const {
    return format("rank %d of %d (%s)", rank(), size(), backend_name(backend()));
}

Communicator::Clock::time_point Communicator::deadline() const {
    return Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
}

std::unique_ptr<Request> Communicator::completed() { return std::make_unique<CompletedRequest>(); }

void Communicator::fail(ds_status_t status, const std::string& message, bool notify_peers) {
    {
        std::lock_guard<std::mutex> lock(fail_mu_);
        if (broken_.load()) return;
        break_status_ = status;
        break_message_ = message;
        broken_.store(true, std::memory_order_release);
    }
    DS_LOG(Logger::global(), DS_LOG_ERROR, "communicator: %s", message.c_str());
    // The backend first (NCCL aborts its kernels, MPI tells the peers), so a
    // waiter that wakes up with the error finds the backend already stopped.
    try {
        on_break(status, message, notify_peers);
    } catch (...) {
        // Best effort: the break is recorded whatever the backend could do.
    }
    {
        std::lock_guard<std::mutex> lock(progress_mu_);
        for (auto& op : inflight_) op->mark_failed(status, message);
        inflight_.clear();
    }
    settled_.store(true, std::memory_order_release);
}

void Communicator::on_break(ds_status_t, const std::string&, bool) {}

void Communicator::abort(const std::string& why) {
    fail(DS_ERR_COMM, format("communicator aborted on %s: %s", where().c_str(), why.c_str()), true);
}

void Communicator::start_watchdog() {
    using std::chrono::microseconds;
    watchdog_ = std::make_unique<Watchdog>([this] { return watchdog_tick(); }, microseconds(200),
                                           microseconds(20000));
}

void Communicator::stop_watchdog() noexcept {
    if (watchdog_) watchdog_->stop();
}

// ---------------------------------------------------------------------------
// Progress, waiting, deadlines
// ---------------------------------------------------------------------------

std::unique_ptr<Request> Communicator::track(std::shared_ptr<AsyncOp> op) {
    {
        std::lock_guard<std::mutex> lock(progress_mu_);
        inflight_.push_back(op);
    }
    if (broken()) {  // broke while this operation was starting
        const ds_status_t st = break_status();
        const std::string msg = break_message();
        std::lock_guard<std::mutex> lock(progress_mu_);
        op->mark_failed(st, msg);
    }
    if (watchdog_) watchdog_->wake();
    return std::make_unique<TrackedRequest>(shared_from_this(), std::move(op));
}

bool Communicator::advance_locked(AsyncOp& op, ds_status_t* status, std::string* msg) {
    if (!op.pending()) return true;
    try {
        if (op.progress()) {
            op.complete();
            op.mark_done();
        }
        return true;
    } catch (const Error& e) {
        *status = e.status();
        *msg = label(op.fingerprint()) + " failed on " + where() + ": " + e.what();
    } catch (const std::exception& e) {
        *status = DS_ERR_INTERNAL;
        *msg = label(op.fingerprint()) + " failed on " + where() + ": internal error: " + e.what();
    }
    op.mark_failed(*status, *msg);
    return false;
}

std::string Communicator::timeout_message(const AsyncOp& op) const {
    return format("%s on %s timed out after %lld ms; the communicator is now broken",
                  label(op.fingerprint()).c_str(), where().c_str(),
                  static_cast<long long>(options_.timeout_ms));
}

void Communicator::advance(AsyncOp& op, bool untrack) {
    ds_status_t st = DS_OK;
    std::string msg;
    bool ok;
    {
        std::lock_guard<std::mutex> lock(progress_mu_);
        ok = advance_locked(op, &st, &msg);
        if (untrack && !op.pending()) {
            auto it = std::find_if(inflight_.begin(), inflight_.end(),
                                   [&](const std::shared_ptr<AsyncOp>& p) { return p.get() == &op; });
            if (it != inflight_.end()) inflight_.erase(it);
        }
    }
    if (!ok) fail(st, msg, true);
}

void Communicator::wait_op(AsyncOp& op) {
    const auto start = Clock::now();
    for (;;) {
        if (op.pending()) advance(op, true);
        if (op.done()) return;
        if (op.failed()) op.rethrow();
        const auto now = Clock::now();
        if (settled_.load(std::memory_order_acquire)) {  // tracked after the break was handled
            const ds_status_t st = break_status();
            const std::string msg = break_message();
            std::lock_guard<std::mutex> lock(progress_mu_);
            op.mark_failed(st, msg);
            continue;
        }
        if (now >= op.deadline()) {
            fail(DS_ERR_TIMEOUT, timeout_message(op), true);
            continue;
        }
        backoff(now - start);
    }
}

bool Communicator::test_op(AsyncOp& op) {
    if (op.pending()) {
        advance(op, false);
        if (op.pending() && Clock::now() >= op.deadline())
            fail(DS_ERR_TIMEOUT, timeout_message(op), true);
    }
    if (op.failed()) op.rethrow();
    return op.done();
}

bool Communicator::watchdog_tick() {
    try {
        backend_tick();
    } catch (const Error& e) {
        fail(e.status(), e.what(), false);
    } catch (...) {
        fail(DS_ERR_INTERNAL, "communicator watchdog: unknown error", false);
    }
    if (broken()) return false;
    ds_status_t st = DS_OK;
    std::string err, expired;
    bool pending;
    {
        std::lock_guard<std::mutex> lock(progress_mu_);
        const auto now = Clock::now();
        for (auto& op : inflight_) {
            if (!advance_locked(*op, &st, &err)) break;
            if (op->pending() && now >= op->deadline() && expired.empty())
                expired = timeout_message(*op);
        }
        inflight_.erase(std::remove_if(inflight_.begin(), inflight_.end(),
                                       [](const std::shared_ptr<AsyncOp>& p) { return !p->pending(); }),
                        inflight_.end());
        pending = !inflight_.empty();
    }
    if (!err.empty())
        fail(st, err, true);
    else if (!expired.empty())
        fail(DS_ERR_TIMEOUT, expired, true);
    return pending;
}

// ---------------------------------------------------------------------------
// Teardown
// ---------------------------------------------------------------------------

void Communicator::release_now() noexcept {
    stop_watchdog();
    release_local();
}

void Communicator::finalize() {
    DS_CHECK(!finalized(), DS_ERR_INVALID_STATE, "finalize: the communicator was already finalized");
    if (broken()) {
        finalized_.store(true);
        release_now();
        ::ds::fail(DS_ERR_COMM,
             "finalize: the communicator is broken (%s); it was released locally without the "
             "collective teardown",
             break_message().c_str());
    }
    try {
        barrier();
    } catch (...) {
        finalized_.store(true);
        release_now();
        throw;
    }
    finalized_.store(true);
    stop_watchdog();
    finalize_backend();
}

}  // namespace ds::comm
