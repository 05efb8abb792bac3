// Communicator's public operations: the argument checks every backend
// shares, sequence numbers and debug-mode fingerprints, then the backend's
// start_* hook; and the blocking forms (start + wait).
#include <atomic>
#include <cstdint>

#include "comm/communicator.h"

namespace ds::comm {

namespace {
bool overlap(const void* a, size_t na, const void* b, size_t nb) {
    if (na == 0 || nb == 0) return false;
    auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
    return pa < pb + nb && pb < pa + na;
}
}  // namespace

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

void check_buffer(const char* what, const char* arg, const void* p, size_t count) {
    DS_CHECK(p != nullptr || count == 0, DS_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL with count %zu",
             what, arg, count);
}

// The dtype and buffer checks of an operation on one buffer (send, recv,
// broadcast) or on a send and a recv buffer (the collectives).
void check_buffers(const char* what, DType dtype, const void* buf, size_t count) {
    check_dtype(what, dtype);
    check_buffer(what, "buf", buf, count);
}
void check_buffers(const char* what, DType dtype, const void* send, const void* recv, size_t count) {
    check_dtype(what, dtype);
    check_buffer(what, "send", send, count);
    check_buffer(what, "recv", recv, count);
}

// A reduction's arguments: the dtype, the op (avg needs a floating dtype)
// and the two buffers, in that order.
void check_reduction(const char* what, DType dtype, Op op, const void* send, const void* recv, size_t count) {
    check_dtype(what, dtype);
    const auto o = static_cast<int32_t>(op);
    DS_CHECK(o >= 0 && o <= static_cast<int32_t>(Op::Max), DS_ERR_INVALID_ARGUMENT,
             "%s: op %d is not sum, avg or max", what, o);
    DS_CHECK(op != Op::Avg || dtype_is_float(dtype), DS_ERR_INVALID_ARGUMENT,
             "%s: op avg needs a floating dtype (fp32, fp16, bf16), got %s", what, dtype_name(dtype));
    check_buffer(what, "send", send, count);
    check_buffer(what, "recv", recv, count);
}

// count * factor * element size in bytes, or DS_ERR_INVALID_ARGUMENT on overflow.
size_t bytes_of(const char* what, size_t count, size_t factor, DType dtype) {
    const size_t es = dtype_size(dtype);
    DS_CHECK(factor == 0 || count <= SIZE_MAX / factor / es, DS_ERR_INVALID_ARGUMENT,
             "%s: count %zu x %zu ranks overflows the address space", what, count, factor);
    return count * factor * es;
}

// reduce_scatter (whole = send, block = recv) and allgather (whole = recv,
// block = send): `whole` holds every rank's count elements, `block` this
// rank's; they may overlap only in the in-place form, block == whole + rank*count.
void check_block(const char* what, const void* whole, const void* block, size_t count, DType dtype, int rank,
                 int size, const char* overlap_message) {
    const size_t total = bytes_of(what, count, static_cast<size_t>(size), dtype);
    const size_t mine = bytes_of(what, count, 1, dtype);
    const bool in_place = block == static_cast<const char*>(whole) + static_cast<size_t>(rank) * mine;
    DS_CHECK(in_place || !overlap(whole, total, block, mine), DS_ERR_INVALID_ARGUMENT, "%s: %s", what,
             overlap_message);
}
}  // namespace

namespace {
// A request that reports its operation's latency to the comms logger the
// first time it is seen complete.
class TimedRequest : public Request {
public:
    TimedRequest(std::unique_ptr<Request> inner, std::shared_ptr<CommsLogger> logger, const char* op,
                 std::string record, uint64_t bytes, std::chrono::steady_clock::time_point t0)
        : inner_(std::move(inner)), logger_(std::move(logger)), op_(op), record_(std::move(record)),
          bytes_(bytes), t0_(t0) {}
    void wait() override {
        inner_->wait();
        done();
    }
    bool test() override {
        const bool complete = inner_->test();
        if (complete) done();
        return complete;
    }

private:
    void done() {
        if (recorded_.exchange(true)) return;
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
        logger_->append(op_, record_, ms, bytes_);
    }
    std::unique_ptr<Request> inner_;
    std::shared_ptr<CommsLogger> logger_;
    const char* op_;
    std::string record_;
    uint64_t bytes_;
    std::chrono::steady_clock::time_point t0_;
    std::atomic<bool> recorded_{false};
};
}  // namespace

void Communicator::set_comms_logger(std::shared_ptr<CommsLogger> logger) {
    std::lock_guard<std::mutex> lock(logger_mu_);
    comms_logger_ = std::move(logger);
}

std::shared_ptr<CommsLogger> Communicator::comms_logger() const {
    std::lock_guard<std::mutex> lock(logger_mu_);
    return comms_logger_;
}

std::unique_ptr<Request> Communicator::logged(const char* op, uint64_t bytes, Clock::time_point t0,
                                              std::unique_ptr<Request> r) {
    std::shared_ptr<CommsLogger> logger = comms_logger();
    if (!logger || !logger->wants(op)) return r;
    std::string record = logger->record_name(op);
    return std::make_unique<TimedRequest>(std::move(r), std::move(logger), op, std::move(record), bytes, t0);
}

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
    check_reduction(what, dtype, op, send, recv, count);
    const size_t n = bytes_of(what, count, 1, dtype);
    DS_CHECK(send == recv || !overlap(send, n, recv, n), DS_ERR_INVALID_ARGUMENT,
             "%s: send and recv overlap without being equal (in-place)", what);
    const auto t0 = Clock::now();
    const Fingerprint fp = begin(FpKind::Allreduce, dtype, count, op, -1);
    return logged("all_reduce", n, t0, start_allreduce(send, recv, count, dtype, op, fp));
}

std::unique_ptr<Request> Communicator::reduce_scatter_async(const void* send, void* recv, size_t count,
                                                            DType dtype, Op op) {
    const char* what = "reduce_scatter";
    check_usable(what);
    check_reduction(what, dtype, op, send, recv, count);
    check_block(what, send, recv, count, dtype, rank(), size(),
                "recv overlaps send without being this rank's block (send + rank*count)");
    const auto t0 = Clock::now();
    const Fingerprint fp = begin(FpKind::ReduceScatter, dtype, count, op, -1);
    return logged("reduce_scatter_tensor", bytes_of(what, count, static_cast<size_t>(size()), dtype), t0,
                  start_reduce_scatter(send, recv, count, dtype, op, fp));
}

std::unique_ptr<Request> Communicator::allgather_async(const void* send, void* recv, size_t count,
                                                       DType dtype) {
    const char* what = "allgather";
    check_usable(what);
    check_buffers(what, dtype, send, recv, count);
    check_block(what, recv, send, count, dtype, rank(), size(),
                "send overlaps recv without being this rank's block (recv + rank*count)");
    const auto t0 = Clock::now();
    const Fingerprint fp = begin(FpKind::Allgather, dtype, count, Op::Sum, -1);
    return logged("all_gather_into_tensor", bytes_of(what, count, 1, dtype), t0,
                  start_allgather(send, recv, count, dtype, fp));
}

std::unique_ptr<Request> Communicator::broadcast_async(void* buf, size_t count, DType dtype, int root) {
    const char* what = "broadcast";
    check_usable(what);
    check_buffers(what, dtype, buf, count);
    bytes_of(what, count, 1, dtype);
    DS_CHECK(root >= 0 && root < size(), DS_ERR_INVALID_ARGUMENT, "%s: root %d is not a rank in [0, %d)",
             what, root, size());
    const auto t0 = Clock::now();
    const Fingerprint fp = begin(FpKind::Broadcast, dtype, count, Op::Sum, root);
    return logged("broadcast", bytes_of(what, count, 1, dtype), t0, start_broadcast(buf, count, dtype, root, fp));
}

std::unique_ptr<Request> Communicator::alltoall_async(const void* send, void* recv, size_t count,
                                                      DType dtype) {
    const char* what = "alltoall";
    check_usable(what);
    check_buffers(what, dtype, send, recv, count);
    const size_t total = bytes_of(what, count, static_cast<size_t>(size()), dtype);
    DS_CHECK(!overlap(send, total, recv, total), DS_ERR_INVALID_ARGUMENT, "%s: send and recv overlap", what);
    const auto t0 = Clock::now();
    const Fingerprint fp = begin(FpKind::Alltoall, dtype, count, Op::Sum, -1);
    return logged("all_to_all_single", total, t0, start_alltoall(send, recv, count, dtype, fp));
}

std::unique_ptr<Request> Communicator::barrier_async() {
    check_usable("barrier");
    const auto t0 = Clock::now();
    const Fingerprint fp = begin(FpKind::Barrier, DType::U8, 0, Op::Sum, -1);
    return logged("barrier", 0, t0, start_barrier(fp));
}

namespace {
void check_peer(const char* what, int peer, int tag, int rank, int size) {
    DS_CHECK(peer >= 0 && peer < size && peer != rank, DS_ERR_INVALID_ARGUMENT,
             "%s: peer %d must be another rank in [0, %d) (this is rank %d)", what, peer, size, rank);
    DS_CHECK(tag >= 0 && tag <= 32767, DS_ERR_INVALID_ARGUMENT, "%s: tag %d is not in [0, 32767]", what, tag);
}
}  // namespace

Fingerprint Communicator::begin_p2p(FpKind kind, const char* what, const void* buf, size_t count, DType dtype,
                                   int peer, int tag) {
    check_usable(what);
    check_buffers(what, dtype, buf, count);
    check_peer(what, peer, tag, rank(), size());
    return begin(kind, dtype, count, Op::Sum, peer);
}

std::unique_ptr<Request> Communicator::send_async(const void* buf, size_t count, DType dtype, int peer,
                                                  int tag) {
    const auto t0 = Clock::now();
    const Fingerprint fp = begin_p2p(FpKind::Send, "send", buf, count, dtype, peer, tag);
    return logged("send", static_cast<uint64_t>(count) * dtype_size(dtype), t0,
                  start_send(buf, count, dtype, peer, tag, fp));
}

std::unique_ptr<Request> Communicator::recv_async(void* buf, size_t count, DType dtype, int peer, int tag) {
    const auto t0 = Clock::now();
    const Fingerprint fp = begin_p2p(FpKind::Recv, "recv", buf, count, dtype, peer, tag);
    return logged("recv", static_cast<uint64_t>(count) * dtype_size(dtype), t0,
                  start_recv(buf, count, dtype, peer, tag, fp));
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

}  // namespace ds::comm

namespace ds::comm {

std::shared_ptr<Communicator> Communicator::split(int color, int key) {
    check_usable("split");
    return split_backend(color < 0 ? kSplitUndefined : color, key);
}

std::shared_ptr<Communicator> Communicator::split_backend(int, int) {
    ::ds::fail(DS_ERR_UNSUPPORTED, "split: the %s communicator cannot be split", backend_name(backend()));
}

}  // namespace ds::comm
