// The MPI backend (host buffers), over three duplicates of the host's
// communicator: `data_` carries the operations, `ctrl_` the failure notices
// a breaking rank sends its peers so every live rank fails fast, and `fp_`
// the fingerprint every collective exchanges before its data moves (a
// mismatch fails the operation before MPI sees mismatched counts).
//
// Operations are non-blocking MPI calls (MPI_Iallreduce, ...) polled with
// MPI_Test against their deadline, by the waiting thread and by the
// watchdog (which also drives progress while the host computes).
//
// 16-bit reductions (fp16/bf16 sum, avg, max) convert to an fp32 staging
// buffer, reduce in fp32 and round once to nearest-even: the result is the
// fp32 sum (or the fp32 sum / world size for avg) rounded to 16 bits, exact
// for integer-valued data, and independent of the reduction tree. It moves
// twice the bytes of a 16-bit wire format; we chose exactness over bandwidth.
// Avg is a sum followed by a division by the world size in fp32.
#include "comm/factory.h"

#ifdef DS_WITH_MPI

#include "comm/mpi_include.h"

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>

#include "comm/async_op.h"
#include "comm/mpi_runtime.h"
#include "comm/scratch_pool.h"
#include "core/kernel_backend.h"

namespace ds::comm {

namespace {

constexpr size_t kMaxChunk = size_t(1) << 30;  // elements per MPI call (MPI counts are int)
constexpr int kNoticeTag = 1;

std::string mpi_error_text(int rc) {
    char buf[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
    return std::string(buf, static_cast<size_t>(len));
}

void mpi_check(int rc, const char* call) {
    if (rc != MPI_SUCCESS) ::ds::fail(DS_ERR_COMM, "%s failed: %s", call, mpi_error_text(rc).c_str());
}

// 16-bit floats travel as raw 16-bit words; they are never reduced by MPI.
MPI_Datatype mpi_type(DType d) {
    switch (d) {
        case DType::F32: return MPI_FLOAT;
        case DType::F16:
        case DType::BF16: return MPI_UINT16_T;
        case DType::I8: return MPI_INT8_T;
        case DType::U8: return MPI_UINT8_T;
        case DType::I32: return MPI_INT32_T;
        case DType::I64: return MPI_INT64_T;
    }
    return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(Op op) { return op == Op::Max ? MPI_MAX : MPI_SUM; }

bool is_16bit(DType d) { return d == DType::F16 || d == DType::BF16; }

int int_count(size_t n, const char* what) {
    DS_CHECK(n <= static_cast<size_t>(INT_MAX), DS_ERR_UNSUPPORTED,
             "%s of %zu elements per rank exceeds MPI's int count limit (%d) and is not supported "
             "by the MPI communicator",
             what, n, INT_MAX);
    return static_cast<int>(n);
}

void divide(float* x, size_t n, int by) {
    const float d = static_cast<float>(by);
    for (size_t i = 0; i < n; ++i) x[i] /= d;
}

// A failure notice: what broke, sent to every peer on the control channel.
struct Notice {
    int32_t status;
    int32_t rank;
    char text[504];
};
static_assert(sizeof(Notice) == 512, "Notice is 512 bytes on the wire");

// Every rank's fingerprint of one collective, exchanged before its data
// moves. Heap-allocated apart from the operation: MPI may still write into
// it when a broken communicator abandons the operation (then it is leaked).
struct FpExchange {
    Fingerprint mine;
    std::vector<Fingerprint> all;
};

class MpiOp final : public AsyncOp {
public:
    using AsyncOp::AsyncOp;
    ~MpiOp() override {
        if (fp_req == MPI_REQUEST_NULL) delete fp;  // else MPI may still write it: leak
    }

    // Requests of this operation; recv requests list their expected count.
    std::vector<MPI_Request> reqs;
    std::vector<int> expect;  // per request: elements a recv must get, or -1
    MPI_Datatype recv_type = MPI_DATATYPE_NULL;
    std::function<void()> finish;
    std::shared_ptr<void> scratch;

    // Collectives move data only once every rank's fingerprint matched
    // (kind, dtype, count, op, root): MPI implementations corrupt memory
    // when ranks post different counts, so a mismatch must never reach
    // them. `post` starts the data operation; operations post in the order
    // they were started (`ticket` against the communicator's `next_post`),
    // the order every rank uses.
    FpExchange* fp = nullptr;
    MPI_Request fp_req = MPI_REQUEST_NULL;
    std::function<void(MpiOp&)> post;
    uint64_t ticket = 0;
    std::atomic<uint64_t>* next_post = nullptr;

    bool progress() override {
        if (post) {
            if (fp_req != MPI_REQUEST_NULL) {
                int flag = 0;
                mpi_check(MPI_Test(&fp_req, &flag, MPI_STATUS_IGNORE), "MPI_Test");
                if (!flag) return false;
                const std::string mismatch = find_mismatch(fp->all.data(), fp->all.size());
                DS_CHECK(mismatch.empty(), DS_ERR_COMM,
                         "%s; the ranks' programs diverged (the operation was not started: no buffer was touched)",
                         mismatch.c_str());
            }
            if (next_post->load(std::memory_order_acquire) != ticket) return false;  // an earlier one first
            std::function<void(MpiOp&)> start = std::move(post);
            post = nullptr;
            start(*this);
            next_post->fetch_add(1, std::memory_order_acq_rel);
        }
        for (size_t i = 0; i < reqs.size(); ++i) {
            if (reqs[i] == MPI_REQUEST_NULL) continue;
            int flag = 0;
            MPI_Status st;
            mpi_check(MPI_Test(&reqs[i], &flag, &st), "MPI_Test");
            if (!flag) return false;
            if (i < expect.size() && expect[i] >= 0) {
                int got = -1;
                MPI_Get_count(&st, recv_type, &got);
                DS_CHECK(got == expect[i], DS_ERR_COMM, "received %d elements from rank %d, expected %d", got,
                         st.MPI_SOURCE, expect[i]);
            }
        }
        return true;
    }
    void complete() override {
        if (finish) finish();
        scratch.reset();
    }
};

class MpiComm final : public Communicator {
public:
    MpiComm(MPI_Comm host, const Options& options) : Communicator(options) {
        mpi_runtime::add_user();
        open_backend([&] {
            mpi_check(MPI_Comm_dup(host, &data_), "MPI_Comm_dup");
            mpi_check(MPI_Comm_set_errhandler(data_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
            mpi_check(MPI_Comm_dup(host, &ctrl_), "MPI_Comm_dup");
            mpi_check(MPI_Comm_set_errhandler(ctrl_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
            mpi_check(MPI_Comm_dup(host, &fp_), "MPI_Comm_dup");
            mpi_check(MPI_Comm_set_errhandler(fp_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
            mpi_check(MPI_Comm_rank(data_, &rank_), "MPI_Comm_rank");
            mpi_check(MPI_Comm_size(data_, &size_), "MPI_Comm_size");
            mpi_check(MPI_Irecv(&in_notice_, sizeof(Notice), MPI_BYTE, MPI_ANY_SOURCE, kNoticeTag, ctrl_,
                                &notice_req_),
                      "MPI_Irecv");
        });
    }

    ~MpiComm() override { release_now(); }

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    Backend backend() const override { return Backend::Mpi; }

protected:
    std::shared_ptr<MpiOp> new_op(const Fingerprint& fp) { return std::make_shared<MpiOp>(fp, deadline()); }

    // A collective: exchange fingerprints (fixed 32 bytes per rank, on their
    // own communicator), then `post` the data operation when they match.
    std::unique_ptr<Request> start_checked(std::shared_ptr<MpiOp> m, std::function<void(MpiOp&)> post) {
        auto* x = new FpExchange{m->fingerprint(), std::vector<Fingerprint>(static_cast<size_t>(size_))};
        const int rc = MPI_Iallgather(&x->mine, sizeof(Fingerprint), MPI_BYTE, x->all.data(), sizeof(Fingerprint),
                                      MPI_BYTE, fp_, &m->fp_req);
        if (rc != MPI_SUCCESS) {
            delete x;
            mpi_check(rc, "MPI_Iallgather");
        }
        m->fp = x;
        m->post = std::move(post);
        m->ticket = next_ticket_++;
        m->next_post = &next_post_;
        return track(m);
    }

    // Calls f(offset, n) for consecutive chunks of at most kMaxChunk elements.
    template <class F>
    static void for_chunks(size_t count, F&& f) {
        if (count == 0) f(size_t(0), 0);
        for (size_t off = 0; off < count; off += kMaxChunk)
            f(off, static_cast<int>(std::min(kMaxChunk, count - off)));
    }

    // MPI_IN_PLACE all-reduce measured 2-5x slower than out-of-place on Open
    // MPI 4.1 for large buffers, so in-place requests reduce into a pooled
    // scratch buffer and copy back (one extra memcpy, far cheaper).
    std::unique_ptr<Request> start_allreduce(const void* send, void* recv, size_t count, DType dtype, Op op,
                                             const Fingerprint& fp) override {
        auto m = new_op(fp);
        const int world = size_;
        if (is_16bit(dtype)) {
            DS_CHECK(count <= SIZE_MAX / (2 * sizeof(float)), DS_ERR_INVALID_ARGUMENT,
                     "allreduce: %zu 16-bit elements need an fp32 staging buffer larger than the address space", count);
            m->scratch = pool_.acquire(2 * count * sizeof(float));
            float* s = static_cast<float*>(m->scratch.get());
            float* r = s + count;
            cpu_kernels().convert(send, dtype_to_kernel(dtype), s, DSK_F32, count);
            m->finish = [r, recv, count, dtype, op, world] {
                if (op == Op::Avg) divide(r, count, world);
                cpu_kernels().convert(r, DSK_F32, recv, dtype_to_kernel(dtype), count);
            };
            return start_checked(m, [this, s, r, count, op](MpiOp& o) {
                for_chunks(count, [&](size_t off, int n) {
                    o.reqs.emplace_back();
                    mpi_check(MPI_Iallreduce(s + off, r + off, n, MPI_FLOAT, mpi_op(op), data_, &o.reqs.back()),
                              "MPI_Iallreduce");
                });
            });
        }
        const size_t es = dtype_size(dtype);
        char* target = static_cast<char*>(recv);
        if (send == recv && count > 0) {
            m->scratch = pool_.acquire(count * es);
            target = static_cast<char*>(m->scratch.get());
        }
        const bool copy_back = target != recv;
        m->finish = [recv, target, count, es, op, world, copy_back] {
            if (copy_back) std::memcpy(recv, target, count * es);
            if (op == Op::Avg)  // fp32: the only non-16-bit dtype avg accepts
                divide(static_cast<float*>(recv), count, world);
        };
        return start_checked(m, [this, send, target, count, es, dtype, op](MpiOp& o) {
            for_chunks(count, [&](size_t off, int n) {
                o.reqs.emplace_back();
                mpi_check(MPI_Iallreduce(static_cast<const char*>(send) + off * es, target + off * es, n,
                                         mpi_type(dtype), mpi_op(op), data_, &o.reqs.back()),
                          "MPI_Iallreduce");
            });
        });
    }

    std::unique_ptr<Request> start_reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                                                  Op op, const Fingerprint& fp) override {
        const int n = int_count(count, "reduce_scatter");
        auto m = new_op(fp);
        const int world = size_;
        const size_t es = dtype_size(dtype);
        if (is_16bit(dtype)) {
            const size_t total = count * static_cast<size_t>(world);  // fits: the caller checked count * world * 2 bytes
            DS_CHECK(total <= SIZE_MAX / sizeof(float), DS_ERR_INVALID_ARGUMENT,
                     "reduce_scatter: %zu 16-bit elements need an fp32 staging buffer larger than the address space",
                     total);
            m->scratch = pool_.acquire(total * sizeof(float));
            float* s = static_cast<float*>(m->scratch.get());
            cpu_kernels().convert(send, dtype_to_kernel(dtype), s, DSK_F32, total);
            m->finish = [s, recv, count, dtype, op, world] {
                if (op == Op::Avg) divide(s, count, world);
                cpu_kernels().convert(s, DSK_F32, recv, dtype_to_kernel(dtype), count);
            };
            return start_checked(m, [this, s, n, op](MpiOp& o) {
                o.reqs.emplace_back();
                // In place: the input is all of s, this rank's result lands in s[0, count).
                mpi_check(MPI_Ireduce_scatter_block(MPI_IN_PLACE, s, n, MPI_FLOAT, mpi_op(op), data_, &o.reqs.back()),
                          "MPI_Ireduce_scatter_block");
            });
        }
        const bool in_place = recv == static_cast<const char*>(send) + static_cast<size_t>(rank_) * count * es;
        void* out = recv;
        if (in_place) {  // MPI forbids recv inside send: reduce into scratch, copy at completion
            m->scratch = pool_.acquire(count * es);
            out = m->scratch.get();
        }
        m->finish = [out, recv, count, es, op, world] {
            if (out != recv) std::memcpy(recv, out, count * es);
            if (op == Op::Avg) divide(static_cast<float*>(recv), count, world);
        };
        return start_checked(m, [this, send, out, n, dtype, op](MpiOp& o) {
            o.reqs.emplace_back();
            mpi_check(MPI_Ireduce_scatter_block(send, out, n, mpi_type(dtype), mpi_op(op), data_, &o.reqs.back()),
                      "MPI_Ireduce_scatter_block");
        });
    }

    std::unique_ptr<Request> start_allgather(const void* send, void* recv, size_t count, DType dtype,
                                             const Fingerprint& fp) override {
        const int n = int_count(count, "allgather");
        auto m = new_op(fp);
        const size_t es = dtype_size(dtype);
        const bool in_place = send == static_cast<const char*>(recv) + static_cast<size_t>(rank_) * count * es;
        return start_checked(m, [this, send, recv, n, dtype, in_place](MpiOp& o) {
            o.reqs.emplace_back();
            if (in_place)
                mpi_check(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, mpi_type(dtype), data_,
                                         &o.reqs.back()),
                          "MPI_Iallgather");
            else
                mpi_check(MPI_Iallgather(send, n, mpi_type(dtype), recv, n, mpi_type(dtype), data_, &o.reqs.back()),
                          "MPI_Iallgather");
        });
    }

    std::unique_ptr<Request> start_broadcast(void* buf, size_t count, DType dtype, int root,
                                             const Fingerprint& fp) override {
        auto m = new_op(fp);
        const size_t es = dtype_size(dtype);
        return start_checked(m, [this, buf, count, es, dtype, root](MpiOp& o) {
            for_chunks(count, [&](size_t off, int n) {
                o.reqs.emplace_back();
                mpi_check(MPI_Ibcast(static_cast<char*>(buf) + off * es, n, mpi_type(dtype), root, data_,
                                     &o.reqs.back()),
                          "MPI_Ibcast");
            });
        });
    }

    std::unique_ptr<Request> start_alltoall(const void* send, void* recv, size_t count, DType dtype,
                                            const Fingerprint& fp) override {
        const int n = int_count(count, "alltoall");
        auto m = new_op(fp);
        return start_checked(m, [this, send, recv, n, dtype](MpiOp& o) {
            o.reqs.emplace_back();
            mpi_check(MPI_Ialltoall(send, n, mpi_type(dtype), recv, n, mpi_type(dtype), data_, &o.reqs.back()),
                      "MPI_Ialltoall");
        });
    }

    std::unique_ptr<Request> start_barrier(const Fingerprint& fp) override {
        auto m = new_op(fp);
        return start_checked(m, [this](MpiOp& o) {
            o.reqs.emplace_back();
            mpi_check(MPI_Ibarrier(data_, &o.reqs.back()), "MPI_Ibarrier");
        });
    }

    std::unique_ptr<Request> start_send(const void* buf, size_t count, DType dtype, int peer, int tag,
                                        const Fingerprint& fp) override {
        auto m = new_op(fp);
        const size_t es = dtype_size(dtype);
        for_chunks(count, [&](size_t off, int n) {
            m->reqs.emplace_back();
            mpi_check(MPI_Isend(static_cast<const char*>(buf) + off * es, n, mpi_type(dtype), peer, tag, data_,
                                &m->reqs.back()),
                      "MPI_Isend");
        });
        return track(m);
    }

    std::unique_ptr<Request> start_recv(void* buf, size_t count, DType dtype, int peer, int tag,
                                        const Fingerprint& fp) override {
        auto m = new_op(fp);
        const size_t es = dtype_size(dtype);
        m->recv_type = mpi_type(dtype);
        for_chunks(count, [&](size_t off, int n) {
            m->reqs.emplace_back();
            m->expect.push_back(n);
            mpi_check(MPI_Irecv(static_cast<char*>(buf) + off * es, n, mpi_type(dtype), peer, tag, data_,
                                &m->reqs.back()),
                      "MPI_Irecv");
        });
        return track(m);
    }

    // Every rank's (color, key) first travels through a checked, timed
    // allgather, so a rank that does not take part fails the split with
    // DS_ERR_TIMEOUT instead of hanging; MPI_Comm_split (blocking, untimed)
    // then runs on ranks that have all reached it. The new communicator
    // duplicates the split one (its data, control and fingerprint channels).
    std::shared_ptr<Communicator> split_backend(int color, int key) override {
        int32_t mine[2] = {color, key};
        std::vector<int32_t> all(2 * static_cast<size_t>(size_));
        allgather(mine, all.data(), 2, DType::I32);
        int expected = 0;
        for (int r = 0; r < size_; ++r) expected += color >= 0 && all[2 * static_cast<size_t>(r)] == color;
        MPI_Comm part = MPI_COMM_NULL;
        mpi_check(MPI_Comm_split(data_, color < 0 ? MPI_UNDEFINED : color, key, &part), "MPI_Comm_split");
        if (part == MPI_COMM_NULL) {
            DS_CHECK(color < 0, DS_ERR_COMM, "MPI_Comm_split gave no communicator for color %d", color);
            return nullptr;
        }
        std::shared_ptr<Communicator> out;
        try {
            int got = 0;
            mpi_check(MPI_Comm_size(part, &got), "MPI_Comm_size");
            DS_CHECK(got == expected, DS_ERR_COMM, "MPI_Comm_split made %d ranks for color %d, expected %d", got,
                     color, expected);
            out = std::make_shared<MpiComm>(part, options());
        } catch (...) {
            MPI_Comm_free(&part);
            throw;
        }
        MPI_Comm_free(&part);
        return out;
    }

    // Debug mode's blocking exchange: on the fingerprint communicator, as the
    // raw data of an operation (itself unchecked: its size is fixed).
    std::vector<Fingerprint> exchange_fingerprints(const Fingerprint& mine) override {
        auto m = new_op(mine);
        auto* x = new FpExchange{mine, std::vector<Fingerprint>(static_cast<size_t>(size_))};
        m->reqs.emplace_back();
        const int rc = MPI_Iallgather(&x->mine, sizeof(Fingerprint), MPI_BYTE, x->all.data(), sizeof(Fingerprint),
                                      MPI_BYTE, fp_, &m->reqs.back());
        if (rc != MPI_SUCCESS) {
            delete x;
            mpi_check(rc, "MPI_Iallgather");
        }
        track(m)->wait();  // throws (leaking x, which MPI may still write) on failure
        std::vector<Fingerprint> all = std::move(x->all);
        delete x;
        return all;
    }

    // A peer's failure notice breaks this communicator too (watchdog thread).
    void backend_tick() override {
        if (notice_req_ == MPI_REQUEST_NULL) return;
        int flag = 0;
        MPI_Status st;
        const int rc = MPI_Test(&notice_req_, &flag, &st);
        if (rc != MPI_SUCCESS) {
            notice_req_ = MPI_REQUEST_NULL;
            fail(DS_ERR_COMM, format("%s: reading peers' failure notices failed: %s", where().c_str(),
                                     mpi_error_text(rc).c_str()),
                 true);
            return;
        }
        if (!flag) return;
        in_notice_.text[sizeof in_notice_.text - 1] = '\0';
        const ds_status_t status = in_notice_.status == DS_ERR_TIMEOUT ? DS_ERR_TIMEOUT : DS_ERR_COMM;
        fail(status, format("rank %d reported: %s", in_notice_.rank, in_notice_.text), false);
    }

    void on_break(ds_status_t status, const std::string& message, bool notify_peers) override {
        if (!notify_peers || released_ || mpi_runtime::finalized()) return;
        // Leaked on purpose: an eager send may read it after this object is gone.
        auto* notice = new Notice{};
        notice->status = status;
        notice->rank = rank_;
        std::strncpy(notice->text, message.c_str(), sizeof notice->text - 1);
        for (int peer = 0; peer < size_; ++peer) {
            if (peer == rank_) continue;
            MPI_Request r;
            if (MPI_Isend(notice, sizeof(Notice), MPI_BYTE, peer, kNoticeTag, ctrl_, &r) == MPI_SUCCESS)
                MPI_Request_free(&r);
        }
    }

    void finalize_backend() override {
        cancel_notice_recv();
        MPI_Comm_free(&ctrl_);
        MPI_Comm_free(&fp_);
        MPI_Comm_free(&data_);
        released_ = true;
        mpi_runtime::remove_user(true);
    }

    // Local only: MPI_Comm_free is collective, so the duplicates are left to
    // MPI_Finalize. Operations a broken communicator left in flight are
    // abandoned (MPI cannot cancel collectives).
    void release_local() noexcept override {
        if (released_.exchange(true)) return;
        if (!mpi_runtime::finalized()) cancel_notice_recv();
        mpi_runtime::remove_user(false);
    }

private:
    void cancel_notice_recv() noexcept {
        if (notice_req_ == MPI_REQUEST_NULL) return;
        MPI_Cancel(&notice_req_);
        MPI_Wait(&notice_req_, MPI_STATUS_IGNORE);
        notice_req_ = MPI_REQUEST_NULL;
    }

    MPI_Comm data_ = MPI_COMM_NULL;
    MPI_Comm ctrl_ = MPI_COMM_NULL;
    MPI_Comm fp_ = MPI_COMM_NULL;  // fingerprint exchanges (start_checked)
    uint64_t next_ticket_ = 0;     // collectives started (one starting thread at a time)
    std::atomic<uint64_t> next_post_{0};  // the next ticket allowed to post its data operation
    int rank_ = 0, size_ = 1;
    Notice in_notice_{};
    MPI_Request notice_req_ = MPI_REQUEST_NULL;
    std::atomic<bool> released_{false};  // read by on_break on any thread
    ScratchPool pool_;
};

}  // namespace

std::shared_ptr<Communicator> make_mpi(int32_t mpi_comm_f, const Options& options) {
    mpi_runtime::require(false);
    MPI_Comm c = MPI_Comm_f2c(static_cast<MPI_Fint>(mpi_comm_f));
    DS_CHECK(c != MPI_COMM_NULL && c != MPI_Comm{}, DS_ERR_INVALID_ARGUMENT,
             "mpi_comm_f %d is not a live MPI communicator (pass MPI_Comm_c2f of one)", mpi_comm_f);
    int inter = 0;
    mpi_check(MPI_Comm_test_inter(c, &inter), "MPI_Comm_test_inter");
    DS_CHECK(!inter, DS_ERR_INVALID_ARGUMENT, "mpi_comm_f %d is an inter-communicator; pass an intra-communicator",
             mpi_comm_f);
    return std::make_shared<MpiComm>(c, options);
}

std::shared_ptr<Communicator> make_mpi_world(const Options& options) {
    mpi_runtime::require(true);
    return std::make_shared<MpiComm>(MPI_COMM_WORLD, options);
}

bool mpi_built() { return true; }

}  // namespace ds::comm

#else  // !DS_WITH_MPI

namespace ds::comm {

std::shared_ptr<Communicator> make_mpi(int32_t, const Options&) {
    ::ds::fail(DS_ERR_UNSUPPORTED,
               "the MPI communicator is not supported by this build (configured without MPI; rebuild "
               "with -DDS_WITH_MPI=ON)");
}

std::shared_ptr<Communicator> make_mpi_world(const Options&) {
    ::ds::fail(DS_ERR_UNSUPPORTED,
               "the MPI communicator is not supported by this build (configured without MPI; rebuild "
               "with -DDS_WITH_MPI=ON)");
}

bool mpi_built() { return false; }

}  // namespace ds::comm

#endif  // DS_WITH_MPI
