// Communicator base: argument checks, sequencing and debug fingerprints for
// every backend, the sticky failure state, waiting with deadlines, and the
// watchdog tick.
#include "comm/communicator.h"

#include <algorithm>
#include <climits>
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

bool overlap(const void* a, size_t na, const void* b, size_t nb) {
    if (na == 0 || nb == 0) return false;
    auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
    return pa < pb + nb && pb < pa + na;
}

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
    {
        std::lock_guard<std::mutex> lock(progress_mu_);
        for (auto& op : inflight_) op->mark_failed(status, message);
        inflight_.clear();
    }
    try {
        on_break(status, message, notify_peers);
    } catch (...) {
        // Best effort: the break is recorded whatever the backend could do.
    }
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

void Communicator::wait_op(AsyncOp& op) {
    const auto start = Clock::now();
    for (;;) {
        if (op.pending()) {
            ds_status_t st = DS_OK;
            std::string msg;
            bool ok;
            {
                std::lock_guard<std::mutex> lock(progress_mu_);
                ok = advance_locked(op, &st, &msg);
                if (!op.pending()) {
                    auto it = std::find_if(inflight_.begin(), inflight_.end(),
                                           [&](const std::shared_ptr<AsyncOp>& p) { return p.get() == &op; });
                    if (it != inflight_.end()) inflight_.erase(it);
                }
            }
            if (!ok) fail(st, msg, true);
        }
        if (op.done()) return;
        if (op.failed()) op.rethrow();
        const auto now = Clock::now();
        if (broken()) {  // broken by another thread before this op was tracked
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
        ds_status_t st = DS_OK;
        std::string msg;
        bool ok;
        {
            std::lock_guard<std::mutex> lock(progress_mu_);
            ok = advance_locked(op, &st, &msg);
        }
        if (!ok) fail(st, msg, true);
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
// Public operations: validate, sequence, delegate
// ---------------------------------------------------------------------------

void Communicator::check_usable(const char* what) const {
    DS_CHECK(!finalized(), DS_ERR_INVALID_STATE, "%s: the communicator has been finalized", what);
    if (broken()) ::ds::fail(DS_ERR_COMM, "%s: the communicator is broken: %s", what, break_message().c_str());
}

namespace {
void check_dtype(const char* what, DType dtype) {
    const auto d = static_cast<int32_t>(dtype);
    DS_CHECK(d >= 0 && d <= static_cast<int32_t>(DType::I64), DS_ERR_INVALID_ARGUMENT,
             "%s: dtype %d is not a ds::DType", what, d);
}

void check_reduction(const char* what, DType dtype, Op op) {
    check_dtype(what, dtype);
    const auto o = static_cast<int32_t>(op);
    DS_CHECK(o >= 0 && o <= static_cast<int32_t>(Op::Max), DS_ERR_INVALID_ARGUMENT,
             "%s: op %d is not sum, avg or max", what, o);
    DS_CHECK(op != Op::Avg || dtype_is_float(dtype), DS_ERR_INVALID_ARGUMENT,
             "%s: op avg needs a floating dtype (fp32, fp16, bf16), got %s", what, dtype_name(dtype));
}

void check_buffer(const char* what, const char* arg, const void* p, size_t count) {
    DS_CHECK(p != nullptr || count == 0, DS_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL with count %zu",
             what, arg, count);
}

// count * factor * element size in bytes, or DS_ERR_INVALID_ARGUMENT on overflow.
size_t bytes_of(const char* what, size_t count, size_t factor, DType dtype) {
    const size_t es = dtype_size(dtype);
    DS_CHECK(factor == 0 || count <= SIZE_MAX / factor / es, DS_ERR_INVALID_ARGUMENT,
             "%s: count %zu x %zu ranks overflows the address space", what, count, factor);
    return count * factor * es;
}
}  // namespace

Fingerprint Communicator::begin(FpKind kind, DType dtype, size_t count, Op op, int root) {
    Fingerprint fp;
    fp.kind = static_cast<int32_t>(kind);
    fp.dtype = kind == FpKind::Barrier ? -1 : static_cast<int32_t>(dtype);
    fp.count = count;
    fp.op = kind == FpKind::Allreduce || kind == FpKind::ReduceScatter ? static_cast<int32_t>(op) : -1;
    fp.root = root;
    if (kind != FpKind::Send && kind != FpKind::Recv) {
        fp.seq = ++seq_;
        if (options_.debug) verify_fingerprints(fp);
    }
    return fp;
}

std::vector<Fingerprint> Communicator::exchange_fingerprints(const Fingerprint& mine) {
    std::vector<Fingerprint> all(static_cast<size_t>(size()));
    // Timeouts of the exchange name the collective this rank was starting.
    start_allgather(&mine, all.data(), sizeof(Fingerprint), DType::U8, mine)->wait();
    return all;
}

void Communicator::verify_fingerprints(const Fingerprint& mine) {
    const std::vector<Fingerprint> all = exchange_fingerprints(mine);
    const std::string mismatch = find_mismatch(all.data(), all.size());
    if (mismatch.empty()) return;
    fail(DS_ERR_COMM, mismatch, false);  // every rank sees the same table: no notices needed
    throw Error(DS_ERR_COMM, mismatch);
}

std::unique_ptr<Request> Communicator::allreduce_async(const void* send, void* recv, size_t count,
                                                       DType dtype, Op op) {
    const char* what = "allreduce";
    check_usable(what);
    check_reduction(what, dtype, op);
    check_buffer(what, "send", send, count);
    check_buffer(what, "recv", recv, count);
    const size_t n = bytes_of(what, count, 1, dtype);
    DS_CHECK(send == recv || !overlap(send, n, recv, n), DS_ERR_INVALID_ARGUMENT,
             "%s: send and recv overlap without being equal (in-place)", what);
    const Fingerprint fp = begin(FpKind::Allreduce, dtype, count, op, -1);
    return start_allreduce(send, recv, count, dtype, op, fp);
}

std::unique_ptr<Request> Communicator::reduce_scatter_async(const void* send, void* recv, size_t count,
                                                            DType dtype, Op op) {
    const char* what = "reduce_scatter";
    check_usable(what);
    check_reduction(what, dtype, op);
    check_buffer(what, "send", send, count);
    check_buffer(what, "recv", recv, count);
    const size_t total = bytes_of(what, count, static_cast<size_t>(size()), dtype);
    const size_t mine = bytes_of(what, count, 1, dtype);
    const bool in_place = recv == static_cast<const char*>(send) + static_cast<size_t>(rank()) * mine;
    DS_CHECK(in_place || !overlap(send, total, recv, mine), DS_ERR_INVALID_ARGUMENT,
             "%s: recv overlaps send without being this rank's block (send + rank*count)", what);
    const Fingerprint fp = begin(FpKind::ReduceScatter, dtype, count, op, -1);
    return start_reduce_scatter(send, recv, count, dtype, op, fp);
}

std::unique_ptr<Request> Communicator::allgather_async(const void* send, void* recv, size_t count,
                                                       DType dtype) {
    const char* what = "allgather";
    check_usable(what);
    check_dtype(what, dtype);
    check_buffer(what, "send", send, count);
    check_buffer(what, "recv", recv, count);
    const size_t total = bytes_of(what, count, static_cast<size_t>(size()), dtype);
    const size_t mine = bytes_of(what, count, 1, dtype);
    const bool in_place = send == static_cast<const char*>(recv) + static_cast<size_t>(rank()) * mine;
    DS_CHECK(in_place || !overlap(send, mine, recv, total), DS_ERR_INVALID_ARGUMENT,
             "%s: send overlaps recv without being this rank's block (recv + rank*count)", what);
    const Fingerprint fp = begin(FpKind::Allgather, dtype, count, Op::Sum, -1);
    return start_allgather(send, recv, count, dtype, fp);
}

std::unique_ptr<Request> Communicator::broadcast_async(void* buf, size_t count, DType dtype, int root) {
    const char* what = "broadcast";
    check_usable(what);
    check_dtype(what, dtype);
    check_buffer(what, "buf", buf, count);
    bytes_of(what, count, 1, dtype);
    DS_CHECK(root >= 0 && root < size(), DS_ERR_INVALID_ARGUMENT, "%s: root %d is not a rank in [0, %d)",
             what, root, size());
    const Fingerprint fp = begin(FpKind::Broadcast, dtype, count, Op::Sum, root);
    return start_broadcast(buf, count, dtype, root, fp);
}

std::unique_ptr<Request> Communicator::alltoall_async(const void* send, void* recv, size_t count,
                                                      DType dtype) {
    const char* what = "alltoall";
    check_usable(what);
    check_dtype(what, dtype);
    check_buffer(what, "send", send, count);
    check_buffer(what, "recv", recv, count);
    const size_t total = bytes_of(what, count, static_cast<size_t>(size()), dtype);
    DS_CHECK(!overlap(send, total, recv, total), DS_ERR_INVALID_ARGUMENT, "%s: send and recv overlap", what);
    const Fingerprint fp = begin(FpKind::Alltoall, dtype, count, Op::Sum, -1);
    return start_alltoall(send, recv, count, dtype, fp);
}

std::unique_ptr<Request> Communicator::barrier_async() {
    check_usable("barrier");
    const Fingerprint fp = begin(FpKind::Barrier, DType::U8, 0, Op::Sum, -1);
    return start_barrier(fp);
}

namespace {
void check_peer(const char* what, int peer, int tag, int rank, int size) {
    DS_CHECK(peer >= 0 && peer < size && peer != rank, DS_ERR_INVALID_ARGUMENT,
             "%s: peer %d must be another rank in [0, %d) (this is rank %d)", what, peer, size, rank);
    DS_CHECK(tag >= 0 && tag <= 32767, DS_ERR_INVALID_ARGUMENT, "%s: tag %d is not in [0, 32767]", what, tag);
}
}  // namespace

std::unique_ptr<Request> Communicator::send_async(const void* buf, size_t count, DType dtype, int peer,
                                                  int tag) {
    const char* what = "send";
    check_usable(what);
    check_dtype(what, dtype);
    check_buffer(what, "buf", buf, count);
    check_peer(what, peer, tag, rank(), size());
    const Fingerprint fp = begin(FpKind::Send, dtype, count, Op::Sum, peer);
    return start_send(buf, count, dtype, peer, tag, fp);
}

std::unique_ptr<Request> Communicator::recv_async(void* buf, size_t count, DType dtype, int peer, int tag) {
    const char* what = "recv";
    check_usable(what);
    check_dtype(what, dtype);
    check_buffer(what, "buf", buf, count);
    check_peer(what, peer, tag, rank(), size());
    const Fingerprint fp = begin(FpKind::Recv, dtype, count, Op::Sum, peer);
    return start_recv(buf, count, dtype, peer, tag, fp);
}

void Communicator::allreduce(const void* send, void* recv, size_t count, DType dtype, Op op) {
    allreduce_async(send, recv, count, dtype, op)->wait();
}
void Communicator::reduce_scatter(const void* send, void* recv, size_t count, DType dtype, Op op) {
    reduce_scatter_async(send, recv, count, dtype, op)->wait();
}
void Communicator::allgather(const void* send, void* recv, size_t count, DType dtype) {
    allgather_async(send, recv, count, dtype)->wait();
}
void Communicator::broadcast(void* buf, size_t count, DType dtype, int root) {
    broadcast_async(buf, count, dtype, root)->wait();
}
void Communicator::alltoall(const void* send, void* recv, size_t count, DType dtype) {
    alltoall_async(send, recv, count, dtype)->wait();
}
void Communicator::barrier() { barrier_async()->wait(); }
void Communicator::send(const void* buf, size_t count, DType dtype, int peer, int tag) {
    send_async(buf, count, dtype, peer, tag)->wait();
}
void Communicator::recv(void* buf, size_t count, DType dtype, int peer, int tag) {
    recv_async(buf, count, dtype, peer, tag)->wait();
}

// ---------------------------------------------------------------------------
// Teardown
// ---------------------------------------------------------------------------

void Communicator::finalize() {
    DS_CHECK(!finalized(), DS_ERR_INVALID_STATE, "finalize: the communicator was already finalized");
    if (broken()) {
        finalized_.store(true);
        stop_watchdog();
        release_local();
        ::ds::fail(DS_ERR_COMM,
             "finalize: the communicator is broken (%s); it was released locally without the "
             "collective teardown",
             break_message().c_str());
    }
    try {
        barrier();
    } catch (...) {
        finalized_.store(true);
        stop_watchdog();
        release_local();
        throw;
    }
    finalized_.store(true);
    stop_watchdog();
    finalize_backend();
}

}  // namespace ds::comm
