// The NCCL backend: one rank per GPU, buffers in CUDA device memory. It is
// bootstrapped over another communicator (MPI, or local for a world of one)
// that broadcasts the ncclUniqueId, carries the debug fingerprints and
// spreads failures: a broken bootstrap communicator breaks this one too.
//
// Operations are enqueued on the communicator's own non-blocking CUDA
// stream, each after an event recorded on the device's legacy default
// stream (so it reads what the kernels queued there before it wrote), and
// followed by an event; a request is complete when its event is. Work queued
// on the legacy stream afterwards does not wait for it: a ZeRO engine fills
// its next gradient bucket while the previous one is reduced, and waits for a
// request before it reads the result. On a
// timeout or abort the watchdog calls ncclCommAbort, which ends kernels
// stuck waiting for a dead peer. Reductions use NCCL's arithmetic: 16-bit
// sums are accumulated by NCCL in the 16-bit type, unlike the MPI backend.
// NCCL has no message tags: point-to-point messages between two ranks match
// in order, so send/recv accept only tag 0.
// Built only with CUDA (target ds_comm_nccl); comm_nccl_nocuda.cpp stands in
// for it otherwise.
#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <mutex>

#include "comm/async_op.h"
#include "comm/factory.h"
#include "comm/world.h"

namespace ds::comm {

namespace {

void cuda_check(cudaError_t e, const char* call) {
    if (e == cudaSuccess) return;
    cudaGetLastError();  // clear a non-sticky error
    ::ds::fail(DS_ERR_DEVICE, "%s failed: %s", call, cudaGetErrorString(e));
}

void nccl_check(ncclResult_t r, const char* call) {
    if (r != ncclSuccess) ::ds::fail(DS_ERR_COMM, "%s failed: %s", call, ncclGetErrorString(r));
}

ncclDataType_t nccl_type(DType d) {
    switch (d) {
        case DType::F32: return ncclFloat32;
        case DType::F16: return ncclFloat16;
        case DType::BF16: return ncclBfloat16;
        case DType::I8: return ncclInt8;
        case DType::U8: return ncclUint8;
        case DType::I32: return ncclInt32;
        case DType::I64: return ncclInt64;
    }
    return ncclFloat32;
}

ncclRedOp_t nccl_op(Op op) {
    switch (op) {
        case Op::Sum: return ncclSum;
        case Op::Avg: return ncclAvg;
        case Op::Max: return ncclMax;
    }
    return ncclSum;
}

// Makes `device` current for its lifetime, restoring the caller's.
class DeviceGuard {
public:
    explicit DeviceGuard(int device) {
        cuda_check(cudaGetDevice(&prev_), "cudaGetDevice");
        if (prev_ != device) cuda_check(cudaSetDevice(device), "cudaSetDevice");
        restore_ = prev_ != device;
    }
    ~DeviceGuard() {
        if (restore_) cudaSetDevice(prev_);
    }
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
    int prev_ = 0;
    bool restore_ = false;
};

// The NCCL communicator as the requests poll it: abort and finalize clear it
// under mu before freeing the communicator, so a request polled on another
// thread (a waiter, while the watchdog aborts) never uses a freed one.
struct CommHandle {
    std::mutex mu;
    ncclComm_t comm = nullptr;
};

class NcclOp final : public AsyncOp {
public:
    NcclOp(const Fingerprint& fp, Clock::time_point deadline, std::shared_ptr<CommHandle> comm)
        : AsyncOp(fp, deadline), comm_(std::move(comm)) {}
    ~NcclOp() override {
        if (event_) cudaEventDestroy(event_);  // released by CUDA once the event completes
    }
    cudaEvent_t& event() { return event_; }

    bool progress() override {
        const cudaError_t e = cudaEventQuery(event_);
        if (e == cudaSuccess) return true;
        if (e != cudaErrorNotReady) cuda_check(e, "cudaEventQuery");
        ncclResult_t async = ncclSuccess;
        {
            std::lock_guard<std::mutex> lock(comm_->mu);
            if (comm_->comm == nullptr) return false;  // aborted: the break marks this request failed
            nccl_check(ncclCommGetAsyncError(comm_->comm, &async), "ncclCommGetAsyncError");
        }
        if (async != ncclSuccess && async != ncclInProgress)
            ::ds::fail(DS_ERR_COMM, "NCCL reported an asynchronous error: %s", ncclGetErrorString(async));
        return false;
    }

private:
    std::shared_ptr<CommHandle> comm_;
    cudaEvent_t event_ = nullptr;
};

class NcclComm final : public Communicator {
public:
    NcclComm(std::shared_ptr<Communicator> bootstrap, int device, const Options& options)
        : Communicator(options), boot_(std::move(bootstrap)), device_(device) {
        rank_ = boot_->rank();
        size_ = boot_->size();
        open_backend([&] {
            DeviceGuard guard(device_);
            ncclUniqueId id{};
            if (rank_ == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
            boot_->broadcast(&id, sizeof id, DType::U8, 0);
            cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
            cuda_check(cudaEventCreateWithFlags(&legacy_done_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
            cuda_check(cudaMalloc(&barrier_buf_, sizeof(float)), "cudaMalloc");
            cuda_check(cudaMemset(barrier_buf_, 0, sizeof(float)), "cudaMemset");
            nccl_check(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
            std::lock_guard<std::mutex> lock(handle_->mu);
            handle_->comm = comm_;
        });
    }

    ~NcclComm() override { release_now(); }

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    Backend backend() const override { return Backend::Nccl; }
    bool device_buffers() const override { return true; }
    int32_t device_index() const override { return device_; }

protected:
    // Enqueue `issue` (NCCL calls on stream_) and an event that marks its end.
    template <class F>
    std::unique_ptr<Request> enqueue(const Fingerprint& fp, F&& issue) {
        DeviceGuard guard(device_);
        auto op = std::make_shared<NcclOp>(fp, deadline(), handle_);
        {
            std::lock_guard<std::mutex> lock(nccl_mu_);
            DS_CHECK(comm_ != nullptr, DS_ERR_COMM, "the NCCL communicator was aborted");
            cuda_check(cudaEventCreateWithFlags(&op->event(), cudaEventDisableTiming), "cudaEventCreateWithFlags");
            after_legacy_stream();
            issue();
            cuda_check(cudaEventRecord(op->event(), stream_), "cudaEventRecord");
        }
        return track(op);
    }

    std::unique_ptr<Request> start_allreduce(const void* send, void* recv, size_t count, DType dtype, Op op,
                                             const Fingerprint& fp) override {
        return enqueue(fp, [&] {
            nccl_check(ncclAllReduce(send, recv, count, nccl_type(dtype), nccl_op(op), comm_, stream_),
                       "ncclAllReduce");
        });
    }
    std::unique_ptr<Request> start_reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                                                  Op op, const Fingerprint& fp) override {
        return enqueue(fp, [&] {
            nccl_check(ncclReduceScatter(send, recv, count, nccl_type(dtype), nccl_op(op), comm_, stream_),
                       "ncclReduceScatter");
        });
    }
    std::unique_ptr<Request> start_allgather(const void* send, void* recv, size_t count, DType dtype,
                                             const Fingerprint& fp) override {
        return enqueue(fp, [&] {
            nccl_check(ncclAllGather(send, recv, count, nccl_type(dtype), comm_, stream_), "ncclAllGather");
        });
    }
    std::unique_ptr<Request> start_broadcast(void* buf, size_t count, DType dtype, int root,
                                             const Fingerprint& fp) override {
        return enqueue(fp, [&] {
            nccl_check(ncclBroadcast(buf, buf, count, nccl_type(dtype), root, comm_, stream_), "ncclBroadcast");
        });
    }
    std::unique_ptr<Request> start_alltoall(const void* send, void* recv, size_t count, DType dtype,
                                            const Fingerprint& fp) override {
        const size_t block = count * dtype_size(dtype);
        return enqueue(fp, [&] {
            nccl_check(ncclGroupStart(), "ncclGroupStart");
            for (int p = 0; p < size_; ++p) {
                nccl_check(ncclSend(static_cast<const char*>(send) + p * block, count, nccl_type(dtype), p, comm_,
                                    stream_),
                           "ncclSend");
                nccl_check(ncclRecv(static_cast<char*>(recv) + p * block, count, nccl_type(dtype), p, comm_, stream_),
                           "ncclRecv");
            }
            nccl_check(ncclGroupEnd(), "ncclGroupEnd");
        });
    }
    std::unique_ptr<Request> start_barrier(const Fingerprint& fp) override {
        return enqueue(fp, [&] {
            nccl_check(ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclFloat32, ncclSum, comm_, stream_),
                       "ncclAllReduce");
        });
    }
    std::unique_ptr<Request> start_send(const void* buf, size_t count, DType dtype, int peer, int tag,
                                        const Fingerprint& fp) override {
        check_tag(tag);
        return enqueue(fp, [&] {
            nccl_check(ncclSend(buf, count, nccl_type(dtype), peer, comm_, stream_), "ncclSend");
        });
    }
    std::unique_ptr<Request> start_recv(void* buf, size_t count, DType dtype, int peer, int tag,
                                        const Fingerprint& fp) override {
        check_tag(tag);
        return enqueue(fp, [&] {
            nccl_check(ncclRecv(buf, count, nccl_type(dtype), peer, comm_, stream_), "ncclRecv");
        });
    }

    // The bootstrap communicator splits first (its exchange of colors is
    // timed); each part then gets a new NCCL communicator on this rank's
    // device, bootstrapped over its part. (ncclCommSplit would share this
    // communicator's resources, but the split part also needs its own
    // bootstrap for fingerprints and failure notices.)
    std::shared_ptr<Communicator> split_backend(int color, int key) override {
        std::shared_ptr<Communicator> part = boot_->split(color, key);
        if (!part) return nullptr;
        Options o = options();
        o.device = device_;
        return make_nccl(std::move(part), o);
    }

    // Fingerprints travel on the bootstrap communicator (host memory).
    std::vector<Fingerprint> exchange_fingerprints(const Fingerprint& mine) override {
        std::vector<Fingerprint> all(static_cast<size_t>(size_));
        boot_->allgather(&mine, all.data(), sizeof(Fingerprint), DType::U8);
        return all;
    }

    void backend_tick() override {
        if (boot_->broken())
            fail(boot_->break_status(), "the bootstrap communicator broke: " + boot_->break_message(), false);
    }

    void on_break(ds_status_t, const std::string& message, bool notify_peers) override {
        abort_nccl();
        if (notify_peers && !boot_->broken()) boot_->abort(message);  // its peers break their NCCL comms
    }

    void finalize_backend() override {
        {
            DeviceGuard guard(device_);
            std::lock_guard<std::mutex> lock(nccl_mu_);
            forget_handle();
            nccl_check(ncclCommFinalize(comm_), "ncclCommFinalize");
            nccl_check(ncclCommDestroy(comm_), "ncclCommDestroy");
            comm_ = nullptr;
            free_cuda();
        }
        boot_->finalize();
    }

    void release_local() noexcept override {
        abort_nccl();
        free_cuda();
    }

private:
    // stream_ waits for what the legacy default stream holds now (under
    // nccl_mu_). One event serves every operation: a wait takes the event's
    // state when it is queued, so recording it again later is safe.
    void after_legacy_stream() {
        cuda_check(cudaEventRecord(legacy_done_, cudaStreamLegacy), "cudaEventRecord (legacy default stream)");
        cuda_check(cudaStreamWaitEvent(stream_, legacy_done_, 0), "cudaStreamWaitEvent (NCCL stream)");
    }

    static void check_tag(int tag) {
        DS_CHECK(tag == 0, DS_ERR_UNSUPPORTED,
                 "tag %d: the NCCL communicator has no message tags (messages between two ranks match in "
                 "order); use tag 0",
                 tag);
    }

    // Local: ends this rank's NCCL kernels and frees the communicator.
    void abort_nccl() noexcept {
        // A thread stuck enqueueing holds nccl_mu_; abort anyway, that is what unblocks it.
        std::unique_lock<std::mutex> lock(nccl_mu_, std::try_to_lock);
        if (!comm_) return;
        ncclComm_t c = comm_;
        comm_ = nullptr;
        forget_handle();
        ncclCommAbort(c);
    }

    // Requests stop polling the communicator (waits for a poll in progress).
    void forget_handle() noexcept {
        std::lock_guard<std::mutex> lock(handle_->mu);
        handle_->comm = nullptr;
    }

    void free_cuda() noexcept {
        if (barrier_buf_) cudaFree(barrier_buf_);
        barrier_buf_ = nullptr;
        if (stream_) cudaStreamDestroy(stream_);
        stream_ = nullptr;
        if (legacy_done_) cudaEventDestroy(legacy_done_);
        legacy_done_ = nullptr;
    }

    std::shared_ptr<Communicator> boot_;
    int device_;
    int rank_ = 0, size_ = 1;
    std::mutex nccl_mu_;  // enqueueing vs aborting
    ncclComm_t comm_ = nullptr;
    std::shared_ptr<CommHandle> handle_ = std::make_shared<CommHandle>();  // comm_ for the requests
    cudaStream_t stream_ = nullptr;
    cudaEvent_t legacy_done_ = nullptr;  // after_legacy_stream's event
    void* barrier_buf_ = nullptr;
};

}  // namespace

int cuda_device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

bool nccl_built() { return true; }

std::shared_ptr<Communicator> make_nccl(std::shared_ptr<Communicator> bootstrap, const Options& options) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) cudaGetLastError();
    DS_CHECK(e == cudaSuccess && count > 0, DS_ERR_DEVICE,
             "the NCCL communicator needs a CUDA device, but none is usable (cudaGetDeviceCount: %s)",
             e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
    int device = options.device;
    if (device < 0) {
        const int local = local_rank_from_env();
        device = (local >= 0 ? local : bootstrap->rank()) % count;
    }
    DS_CHECK(device < count, DS_ERR_INVALID_ARGUMENT, "options.device = %d, but only %d CUDA devices are visible",
             device, count);
    return std::make_shared<NcclComm>(std::move(bootstrap), device, options);
}

}  // namespace ds::comm
