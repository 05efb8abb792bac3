// Communicator: the one interface for collectives and point-to-point messages
// between the ranks of a data-parallel world (DESIGN.md §6). Backends: local
// (a world of one), MPI (host buffers) and NCCL (CUDA device buffers); the
// backend is chosen at run time (comm/factory.h), never by #ifdef above here.
//
// Every operation is asynchronous: *_async starts it and returns a Request
// the caller waits on, so a reduction overlaps the host's work; the blocking
// forms are start + wait. Every operation carries a deadline (options.
// timeout_ms); a watchdog thread turns an expired one into DS_ERR_TIMEOUT and
// breaks the communicator: from then on every call throws DS_ERR_COMM naming
// the first failure (sticky). abort() breaks it on purpose, from any thread.
//
// Threads: operations are started by one thread at a time, in the same order
// on every rank (MPI's rule for collectives); requests may be waited on from
// any thread; abort() is safe from any thread at any time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/comms_logger.h"
#include "comm/fingerprint.h"
#include "core/dtype.h"
#include "core/error.h"

namespace ds::comm {

enum class Op : int32_t { Sum = 0, Avg = 1, Max = 2 };

// A split color that joins no new communicator (MPI_UNDEFINED's role); any
// negative color means the same.
constexpr int kSplitUndefined = -1;
// "sum", "avg", "max".
const char* op_name(Op op);

// Values equal the public DS_COMM_BACKEND_* constants.
enum class Backend : int32_t { Auto = 0, Local = 1, Mpi = 2, Nccl = 3 };
// "auto", "local", "mpi", "nccl".
const char* backend_name(Backend b);

// DeepSpeed's init_distributed default timeout: 30 minutes.
constexpr int64_t kDefaultTimeoutMs = 30LL * 60 * 1000;

struct Options {
    int64_t timeout_ms = kDefaultTimeoutMs;  // deadline of every operation, > 0
    bool debug = false;                      // exchange a fingerprint before each collective, blocking
                                             // (MPI always checks, asynchronously, before data moves)
    Backend backend = Backend::Auto;
    int32_t device = -1;                     // NCCL: CUDA ordinal; -1: local rank mod device count
};

// Defaults with the environment applied: DS_COMM_TIMEOUT_MS (a positive
// integer) and DS_COMM_DEBUG (0 or 1); a malformed value throws
// DS_ERR_INVALID_ARGUMENT naming the variable.
Options options_from_env();

class Request {
public:
    virtual ~Request() = default;
    // Blocks until the operation is complete. Throws ds::Error: DS_ERR_TIMEOUT
    // (it, or the communicator, timed out), DS_ERR_COMM (aborted, a peer
    // reported a failure, an MPI/NCCL error), DS_ERR_DEVICE (CUDA). Waiting
    // again returns (or throws) the same result.
    virtual void wait() = 0;
    // Non-blocking: true once complete; throws as wait() does.
    virtual bool test() = 0;
};

class AsyncOp;
class Watchdog;

class Communicator : public std::enable_shared_from_this<Communicator> {
public:
    virtual ~Communicator();
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;

    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual Backend backend() const = 0;
    // True when buffers are CUDA device memory (NCCL), false for host memory.
    virtual bool device_buffers() const { return false; }
    // The CUDA ordinal of a device communicator's buffers (NCCL); -1 for host memory.
    virtual int32_t device_index() const { return -1; }
    const Options& options() const { return options_; }

    // ---- asynchronous operations --------------------------------------
    // Reductions (Avg needs fp32/fp16/bf16). In-place when send == recv.
    std::unique_ptr<Request> allreduce_async(const void* send, void* recv, size_t count, DType dtype,
                                             Op op);
    // send holds count*size() elements; rank r receives the reduction of
    // block r in recv (count). In-place when recv == send + rank()*count.
    std::unique_ptr<Request> reduce_scatter_async(const void* send, void* recv, size_t count,
                                                  DType dtype, Op op);
    // recv (count*size()) receives every rank's send (count), in rank order.
    // In-place when send == recv + rank()*count.
    std::unique_ptr<Request> allgather_async(const void* send, void* recv, size_t count, DType dtype);
    std::unique_ptr<Request> broadcast_async(void* buf, size_t count, DType dtype, int root);
    // Block j of send (count elements) goes to rank j; block i of recv comes
    // from rank i. send and recv must not overlap.
    std::unique_ptr<Request> alltoall_async(const void* send, void* recv, size_t count, DType dtype);
    std::unique_ptr<Request> barrier_async();
    // Point to point with another rank; tag in [0, 32767].
    std::unique_ptr<Request> send_async(const void* buf, size_t count, DType dtype, int peer, int tag);
    std::unique_ptr<Request> recv_async(void* buf, size_t count, DType dtype, int peer, int tag);

    // ---- blocking conveniences (start + wait) -------------------------
    void allreduce(const void* send, void* recv, size_t count, DType dtype, Op op);
    void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, Op op);
    void allgather(const void* send, void* recv, size_t count, DType dtype);
    void broadcast(void* buf, size_t count, DType dtype, int root);
    void alltoall(const void* send, void* recv, size_t count, DType dtype);
    void barrier();
    void send(const void* buf, size_t count, DType dtype, int peer, int tag);
    void recv(void* buf, size_t count, DType dtype, int peer, int tag);

    // ---- sub-communicators ---------------------------------------------
    // MPI_Comm_split's semantics: collective over this communicator; ranks
    // passing the same color >= 0 form one new communicator, ranked by key,
    // ties broken by the rank here; a negative color (kSplitUndefined) joins
    // none and gets null. The new communicator has this one's options (not
    // its comms logger) and its own watchdog, failures and finalize. Throws
    // DS_ERR_INVALID_STATE (finalized), DS_ERR_COMM (broken, or MPI failed),
    // DS_ERR_TIMEOUT (the exchange of colors expired).
    std::shared_ptr<Communicator> split(int color, int key);

    // ---- failure and teardown -----------------------------------------
    // Breaks the communicator: operations in flight and later calls fail with
    // DS_ERR_COMM naming `why`; peers are told (MPI/NCCL). Thread-safe,
    // idempotent (the first failure is the one reported). Never kills the process.
    void abort(const std::string& why);
    bool broken() const { return broken_.load(std::memory_order_acquire); }
    // The first failure's status and message (DS_OK, "" while healthy).
    ds_status_t break_status() const;
    std::string break_message() const;

    // Collective: a barrier (under the timeout), then the backend's
    // collective teardown (MPI_Finalize when the library initialised MPI and
    // this was its last MPI communicator). Afterwards every operation throws
    // DS_ERR_INVALID_STATE. A broken communicator releases what it holds
    // locally and throws DS_ERR_COMM (its peers may be gone).
    void finalize();
    bool finalized() const { return finalized_.load(std::memory_order_acquire); }

    // Collectives started so far (the "#N" in messages is 1-based).
    uint64_t collectives_started() const { return seq_.load(); }

    // The comms logger (comm/comms_logger.h): while one is set, every
    // operation started is timed to its completion and recorded there.
    // Null removes it. Not to be called while operations are being started.
    void set_comms_logger(std::shared_ptr<CommsLogger> logger);
    std::shared_ptr<CommsLogger> comms_logger() const;

protected:
    using Clock = std::chrono::steady_clock;
    explicit Communicator(const Options& options);

    // ---- backend hooks: arguments are already validated -------------------
    // split(): `color` < 0 means "no new communicator" (return null); the
    // communicator is usable when this is called. Default: DS_ERR_UNSUPPORTED.
    virtual std::shared_ptr<Communicator> split_backend(int color, int key);
    virtual std::unique_ptr<Request> start_allreduce(const void* send, void* recv, size_t count,
                                                     DType dtype, Op op, const Fingerprint& fp) = 0;
    virtual std::unique_ptr<Request> start_reduce_scatter(const void* send, void* recv, size_t count,
                                                          DType dtype, Op op,
                                                          const Fingerprint& fp) = 0;
    virtual std::unique_ptr<Request> start_allgather(const void* send, void* recv, size_t count,
                                                     DType dtype, const Fingerprint& fp) = 0;
    virtual std::unique_ptr<Request> start_broadcast(void* buf, size_t count, DType dtype, int root,
                                                     const Fingerprint& fp) = 0;
    virtual std::unique_ptr<Request> start_alltoall(const void* send, void* recv, size_t count,
                                                    DType dtype, const Fingerprint& fp) = 0;
    virtual std::unique_ptr<Request> start_barrier(const Fingerprint& fp) = 0;
    virtual std::unique_ptr<Request> start_send(const void* buf, size_t count, DType dtype, int peer,
                                                int tag, const Fingerprint& fp) = 0;
    virtual std::unique_ptr<Request> start_recv(void* buf, size_t count, DType dtype, int peer,
                                                int tag, const Fingerprint& fp) = 0;
    // Every rank's fingerprint for this collective, in rank order (debug
    // mode). Default: a byte allgather through start_allgather (host memory).
    virtual std::vector<Fingerprint> exchange_fingerprints(const Fingerprint& mine);
    // Called once, on the thread that broke the communicator, after the
    // break is recorded and before operations in flight are failed: MPI
    // tells its peers, NCCL aborts its communicator.
    virtual void on_break(ds_status_t status, const std::string& message, bool notify_peers);
    // Backend work for each watchdog tick (MPI: read peers' failure notices).
    virtual void backend_tick() {}
    // Collective teardown after the closing barrier (finalize()).
    virtual void finalize_backend() {}
    // Local teardown of a broken communicator in finalize(); never collective.
    virtual void release_local() noexcept {}

    // ---- helpers for backends --------------------------------------------
    // The deadline of an operation started now.
    Clock::time_point deadline() const;
    // Track an operation: the watchdog drives and times it; the Request waits on it.
    std::unique_ptr<Request> track(std::shared_ptr<AsyncOp> op);
    // A request for an operation that completed while starting.
    static std::unique_ptr<Request> completed();
    // Record the first failure, call on_break, then fail every operation in
    // flight. Must not be called with progress_mu_ held.
    void fail(ds_status_t status, const std::string& message, bool notify_peers);
    // Watchdog thread: backends start it at the end of their constructor and
    // stop it first thing in their destructor (it calls virtual hooks).
    void start_watchdog();
    void stop_watchdog() noexcept;
    // A backend constructor's body: `open()` acquires the backend's
    // resources, then the watchdog starts; if either throws, release_local()
    // frees what was acquired and the error propagates.
    template <class F>
    void open_backend(F&& open) {
        try {
            open();
            start_watchdog();
        } catch (...) {
            release_local();
            throw;
        }
    }
    // Local teardown (backend destructors, a finalize that cannot run the
    // collective one): stop the watchdog, then release_local().
    void release_now() noexcept;
    // "rank 1 of 3 (mpi)".
    std::string where() const;

private:
    friend class TrackedRequest;
    // Validation and sequencing shared by every public operation.
    void check_usable(const char* what) const;
    Fingerprint begin(FpKind kind, DType dtype, size_t count, Op op, int root);
    // send/recv's checks (usable, dtype, buffer, peer and tag), then begin().
    Fingerprint begin_p2p(FpKind kind, const char* what, const void* buf, size_t count, DType dtype, int peer,
                          int tag);
    void verify_fingerprints(const Fingerprint& mine);
    // `r`, timed from `t0` and recorded by the comms logger when one is set and wants `op`.
    std::unique_ptr<Request> logged(const char* op, uint64_t bytes, Clock::time_point t0, std::unique_ptr<Request> r);
    // Progress one operation under progress_mu_; false on an error (reported in *status/*msg).
    bool advance_locked(AsyncOp& op, ds_status_t* status, std::string* msg);
    // advance_locked under progress_mu_ (dropping `op` from the in-flight
    // list once it has settled, when `untrack`); a failure breaks the
    // communicator and throws.
    void advance(AsyncOp& op, bool untrack);
    void wait_op(AsyncOp& op);
    bool test_op(AsyncOp& op);
    std::string timeout_message(const AsyncOp& op) const;
    // One watchdog tick: drive operations, check deadlines. True while work is pending.
    bool watchdog_tick();

    Options options_;
    std::atomic<uint64_t> seq_{0};
    std::atomic<bool> broken_{false};
    std::atomic<bool> settled_{false};  // the break is fully handled: on_break ran, ops failed
    std::atomic<bool> finalized_{false};
    mutable std::mutex fail_mu_;
    ds_status_t break_status_ = DS_OK;
    std::string break_message_;
    std::mutex progress_mu_;  // serialises backend progress (MPI_Test) and inflight_
    std::vector<std::shared_ptr<AsyncOp>> inflight_;
    std::unique_ptr<Watchdog> watchdog_;
    mutable std::mutex logger_mu_;
    std::shared_ptr<CommsLogger> comms_logger_;
};

}  // namespace ds::comm

// The factories (make_world, make_mpi, make_nccl, ...) come with the interface.
#include "comm/factory.h"
