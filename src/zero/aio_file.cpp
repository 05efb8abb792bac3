// The three I/O backends of aio_file.h and their run-time choice.
#include "zero/aio_file.h"
#include "zero/aio_fault.h"

#include <dlfcn.h>
#include <linux/aio_abi.h>
#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "core/error.h"

namespace ds::zero {

namespace {
std::atomic<long> g_fail_target{0};
std::atomic<long> g_write_count{0};
}  // namespace

void aio_fail_nth_write(long n) {
    g_write_count = 0;
    g_fail_target = n;
}

bool aio_inject_write_failure() {
    const long target = g_fail_target.load();
    if (target <= 0) return false;
    return g_write_count.fetch_add(1) + 1 == target;
}

namespace {
std::atomic<long> g_read_target{0};
std::atomic<long> g_read_count{0};
}  // namespace

void aio_fail_nth_read(long n) {
    g_read_count = 0;
    g_read_target = n;
}

bool aio_inject_failure(bool write) {
    if (write) return aio_inject_write_failure();
    const long target = g_read_target.load();
    if (target <= 0) return false;
    return g_read_count.fetch_add(1) + 1 == target;
}

namespace {

[[noreturn]] void io_fail(const std::string& path, bool write, int64_t offset, const char* what) {
    fail(DS_ERR_IO, "NVMe swap file %s: %s at byte %lld failed: %s", path.c_str(), write ? "write" : "read",
         static_cast<long long>(offset), what);
}

// One block request of a transfer.
struct Piece {
    uint8_t* buf;
    size_t bytes;
    int64_t offset;
};

std::vector<Piece> split(void* buf, size_t bytes, int64_t offset, size_t block) {
    std::vector<Piece> out;
    uint8_t* b = static_cast<uint8_t*>(buf);
    for (size_t done = 0; done < bytes; done += block)
        out.push_back({b + done, std::min(block, bytes - done), offset + static_cast<int64_t>(done)});
    return out;
}

// A completed request's result: bytes moved, or -errno.
void check_result(const std::string& path, bool write, const Piece& p, long long res) {
    if (res < 0) io_fail(path, write, p.offset, std::strerror(static_cast<int>(-res)));
    if (static_cast<size_t>(res) != p.bytes)
        io_fail(path, write, p.offset + res,
                write ? "short write: the disk is full" : "short read: the file was truncated");
}

size_t block_of(const AioOptions& o) { return aio_round_up(static_cast<size_t>(std::max<int64_t>(1, o.block_size))); }

// ---- pread/pwrite ---------------------------------------------------------

class PreadBackend final : public AioBackend {
public:
    explicit PreadBackend(const AioOptions& o) : block_(block_of(o)) {}
    const char* name() const override { return "pread"; }
    void transfer(int fd, const std::string& path, bool write, void* buf, size_t bytes, int64_t offset) override {
        for (const Piece& p : split(buf, bytes, offset, block_)) {
            if (aio_inject_failure(write)) check_result(path, write, p, -EIO);
            size_t done = 0;
            while (done < p.bytes) {
                const ssize_t n = write ? ::pwrite(fd, p.buf + done, p.bytes - done, p.offset + static_cast<int64_t>(done))
                                        : ::pread(fd, p.buf + done, p.bytes - done, p.offset + static_cast<int64_t>(done));
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) {
                    check_result(path, write, {p.buf, p.bytes, p.offset},
                                 n < 0 ? -static_cast<long long>(errno) : static_cast<long long>(done));
                }
                done += static_cast<size_t>(n);
            }
        }
    }

private:
    size_t block_;
};

// ---- libaio (dlopen) --------------------------------------------------------

// libaio's io_context_t is an opaque pointer; its struct iocb and io_event
// have the kernel's layout (linux/aio_abi.h).
using io_context_t = void*;
struct LibaioApi {
    void* handle = nullptr;
    int (*setup)(int, io_context_t*) = nullptr;
    int (*destroy)(io_context_t) = nullptr;
    int (*submit)(io_context_t, long, struct iocb**) = nullptr;
    int (*getevents)(io_context_t, long, long, struct io_event*, struct timespec*) = nullptr;
};

const LibaioApi* libaio_api(std::string* why) {
    static LibaioApi api;
    static std::string error;
    static const bool ok = [] {
        api.handle = dlopen("libaio.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!api.handle) {
            error = "libaio.so.1 is not installed (Debian package libaio1)";
            return false;
        }
        api.setup = reinterpret_cast<int (*)(int, io_context_t*)>(dlsym(api.handle, "io_setup"));
        api.destroy = reinterpret_cast<int (*)(io_context_t)>(dlsym(api.handle, "io_destroy"));
        api.submit = reinterpret_cast<int (*)(io_context_t, long, struct iocb**)>(dlsym(api.handle, "io_submit"));
        api.getevents = reinterpret_cast<int (*)(io_context_t, long, long, struct io_event*, struct timespec*)>(
            dlsym(api.handle, "io_getevents"));
        if (!api.setup || !api.destroy || !api.submit || !api.getevents) {
            error = "libaio.so.1 lacks io_setup/io_submit/io_getevents/io_destroy";
            return false;
        }
        return true;
    }();
    if (!ok && why) *why = error;
    return ok ? &api : nullptr;
}

class LibaioBackend final : public AioBackend {
public:
    LibaioBackend(const LibaioApi* api, io_context_t ctx, const AioOptions& o)
        : api_(api), ctx_(ctx), block_(block_of(o)), depth_(static_cast<size_t>(std::max<int64_t>(1, o.queue_depth))),
          single_(o.single_submit) {}
    ~LibaioBackend() override { api_->destroy(ctx_); }
    const char* name() const override { return "libaio"; }

    void transfer(int fd, const std::string& path, bool write, void* buf, size_t bytes, int64_t offset) override {
        const std::vector<Piece> pieces = split(buf, bytes, offset, block_);
        std::vector<struct iocb> cbs(pieces.size());
        size_t next = 0, inflight = 0, done = 0;
        std::vector<struct io_event> events(depth_);
        while (done < pieces.size()) {
            while (inflight < depth_ && next < pieces.size()) {
                const Piece& p = pieces[next];
                struct iocb& cb = cbs[next];
                std::memset(&cb, 0, sizeof cb);
                cb.aio_data = next;
                cb.aio_lio_opcode = write ? IOCB_CMD_PWRITE : IOCB_CMD_PREAD;
                cb.aio_fildes = static_cast<uint32_t>(fd);
                cb.aio_buf = reinterpret_cast<uint64_t>(p.buf);
                cb.aio_nbytes = p.bytes;
                cb.aio_offset = p.offset;
                if (aio_inject_failure(write)) {
                    drain(inflight);
                    check_result(path, write, p, -EIO);
                }
                struct iocb* ptr = &cb;
                const int r = api_->submit(ctx_, 1, &ptr);
                if (r != 1) {
                    drain(inflight);
                    check_result(path, write, p, r < 0 ? r : -EAGAIN);
                }
                ++next;
                ++inflight;
                if (single_) break;
            }
            const int got = api_->getevents(ctx_, 1, static_cast<long>(inflight), events.data(), nullptr);
            if (got < 0) {
                if (got == -EINTR) continue;
                drain(inflight);
                io_fail(path, write, offset, std::strerror(-got));
            }
            for (int i = 0; i < got; ++i) {
                --inflight;
                ++done;
                const Piece& p = pieces[static_cast<size_t>(events[static_cast<size_t>(i)].data)];
                const long long res = static_cast<long long>(events[static_cast<size_t>(i)].res);
                if (res < 0 || static_cast<size_t>(res) != p.bytes) {
                    drain(inflight);
                    check_result(path, write, p, res);
                }
            }
        }
    }

private:
    // Waits for the requests still in flight before an error unwinds (their
    // buffers belong to the caller).
    void drain(size_t inflight) {
        std::vector<struct io_event> ev(std::max<size_t>(1, inflight));
        while (inflight > 0) {
            const int got = api_->getevents(ctx_, 1, static_cast<long>(inflight), ev.data(), nullptr);
            if (got < 0 && got != -EINTR) return;
            if (got > 0) inflight -= static_cast<size_t>(got);
        }
    }

    const LibaioApi* api_;
    io_context_t ctx_;
    size_t block_, depth_;
    bool single_;
};

std::unique_ptr<AioBackend> make_libaio(const AioOptions& o, std::string* why) {
    const LibaioApi* api = libaio_api(why);
    if (!api) return nullptr;
    io_context_t ctx = nullptr;
    const int r = api->setup(static_cast<int>(std::max<int64_t>(1, o.queue_depth)), &ctx);
    if (r < 0) {
        if (why) *why = std::string("io_setup failed: ") + std::strerror(-r);
        return nullptr;
    }
    return std::make_unique<LibaioBackend>(api, ctx, o);
}

// ---- io_uring (kernel ABI) --------------------------------------------------

class UringBackend final : public AioBackend {
public:
    const char* name() const override { return "uring"; }

    static std::unique_ptr<UringBackend> open(const AioOptions& o, std::string* why) {
        std::unique_ptr<UringBackend> u(new UringBackend(o));
        io_uring_params params;
        std::memset(&params, 0, sizeof params);
        const unsigned entries = static_cast<unsigned>(std::clamp<int64_t>(o.queue_depth, 1, 4096));
        u->fd_ = static_cast<int>(syscall(__NR_io_uring_setup, entries, &params));
        if (u->fd_ < 0) {
            if (why) *why = std::string("io_uring_setup failed: ") + std::strerror(errno);
            return nullptr;
        }
        u->sq_len_ = params.sq_off.array + params.sq_entries * sizeof(unsigned);
        u->cq_len_ = params.cq_off.cqes + params.cq_entries * sizeof(io_uring_cqe);
        u->sq_ring_ = mmap(nullptr, u->sq_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, u->fd_,
                           IORING_OFF_SQ_RING);
        u->cq_ring_ = mmap(nullptr, u->cq_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, u->fd_,
                           IORING_OFF_CQ_RING);
        u->sqes_len_ = params.sq_entries * sizeof(io_uring_sqe);
        u->sqes_ = static_cast<io_uring_sqe*>(mmap(nullptr, u->sqes_len_, PROT_READ | PROT_WRITE,
                                                   MAP_SHARED | MAP_POPULATE, u->fd_, IORING_OFF_SQES));
        if (u->sq_ring_ == MAP_FAILED || u->cq_ring_ == MAP_FAILED || u->sqes_ == MAP_FAILED) {
            if (why) *why = std::string("io_uring mmap failed: ") + std::strerror(errno);
            return nullptr;
        }
        auto at = [](void* base, unsigned off) { return reinterpret_cast<unsigned*>(static_cast<char*>(base) + off); };
        u->sq_tail_ = at(u->sq_ring_, params.sq_off.tail);
        u->sq_mask_ = *at(u->sq_ring_, params.sq_off.ring_mask);
        u->sq_array_ = at(u->sq_ring_, params.sq_off.array);
        u->cq_head_ = at(u->cq_ring_, params.cq_off.head);
        u->cq_tail_ = at(u->cq_ring_, params.cq_off.tail);
        u->cq_mask_ = *at(u->cq_ring_, params.cq_off.ring_mask);
        u->cqes_ = reinterpret_cast<io_uring_cqe*>(static_cast<char*>(u->cq_ring_) + params.cq_off.cqes);
        u->depth_ = std::min<size_t>(params.sq_entries, static_cast<size_t>(std::max<int64_t>(1, o.queue_depth)));
        return u;
    }

    ~UringBackend() override {
        if (sqes_ && sqes_ != MAP_FAILED) munmap(sqes_, sqes_len_);
        if (cq_ring_ && cq_ring_ != MAP_FAILED) munmap(cq_ring_, cq_len_);
        if (sq_ring_ && sq_ring_ != MAP_FAILED) munmap(sq_ring_, sq_len_);
        if (fd_ >= 0) ::close(fd_);
    }

    void transfer(int fd, const std::string& path, bool write, void* buf, size_t bytes, int64_t offset) override {
        const std::vector<Piece> pieces = split(buf, bytes, offset, block_);
        size_t next = 0, inflight = 0, done = 0;
        while (done < pieces.size()) {
            unsigned queued = 0;
            while (inflight + queued < depth_ && next < pieces.size()) {
                const Piece& p = pieces[next];
                if (aio_inject_failure(write)) {
                    submit(queued, 0);
                    drain(inflight + queued);
                    check_result(path, write, p, -EIO);
                }
                const unsigned tail = __atomic_load_n(sq_tail_, __ATOMIC_RELAXED);
                const unsigned idx = tail & sq_mask_;
                io_uring_sqe& sqe = sqes_[idx];
                std::memset(&sqe, 0, sizeof sqe);
                sqe.opcode = write ? IORING_OP_WRITE : IORING_OP_READ;
                sqe.fd = fd;
                sqe.addr = reinterpret_cast<uint64_t>(p.buf);
                sqe.len = static_cast<uint32_t>(p.bytes);
                sqe.off = static_cast<uint64_t>(p.offset);
                sqe.user_data = next;
                sq_array_[idx] = idx;
                __atomic_store_n(sq_tail_, tail + 1, __ATOMIC_RELEASE);
                ++queued;
                ++next;
                if (single_) break;
            }
            inflight += queued;
            const int r = submit(queued, 1);
            if (r < 0) {
                drain(inflight);
                io_fail(path, write, offset, std::strerror(-r));
            }
            // Reap what completed.
            unsigned head = __atomic_load_n(cq_head_, __ATOMIC_RELAXED);
            const unsigned tail = __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE);
            long long bad = 1;
            const Piece* bad_piece = nullptr;
            for (; head != tail; ++head) {
                const io_uring_cqe& c = cqes_[head & cq_mask_];
                const Piece& p = pieces[static_cast<size_t>(c.user_data)];
                if (!bad_piece && (c.res < 0 || static_cast<size_t>(c.res) != p.bytes)) {
                    bad = c.res;
                    bad_piece = &p;
                }
                --inflight;
                ++done;
            }
            __atomic_store_n(cq_head_, head, __ATOMIC_RELEASE);
            if (bad_piece) {
                drain(inflight);
                check_result(path, write, *bad_piece, bad);
            }
        }
    }

private:
    explicit UringBackend(const AioOptions& o)
        : block_(block_of(o)), single_(o.single_submit) {}

    // io_uring_enter: submit `n` queued entries, wait for `min_complete`.
    int submit(unsigned n, unsigned min_complete) {
        for (;;) {
            const long r = syscall(__NR_io_uring_enter, fd_, n, min_complete, IORING_ENTER_GETEVENTS, nullptr, 0);
            if (r >= 0) return static_cast<int>(r);
            if (errno != EINTR) return -errno;
        }
    }
    void drain(size_t inflight) {
        while (inflight > 0) {
            if (submit(0, 1) < 0) return;
            unsigned head = __atomic_load_n(cq_head_, __ATOMIC_RELAXED);
            const unsigned tail = __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE);
            for (; head != tail && inflight > 0; ++head) --inflight;
            __atomic_store_n(cq_head_, head, __ATOMIC_RELEASE);
        }
    }

    size_t block_;
    bool single_;
    size_t depth_ = 1;
    int fd_ = -1;
    void* sq_ring_ = nullptr;
    void* cq_ring_ = nullptr;
    io_uring_sqe* sqes_ = nullptr;
    size_t sq_len_ = 0, cq_len_ = 0, sqes_len_ = 0;
    unsigned* sq_tail_ = nullptr;
    unsigned* sq_array_ = nullptr;
    unsigned sq_mask_ = 0;
    unsigned* cq_head_ = nullptr;
    unsigned* cq_tail_ = nullptr;
    unsigned cq_mask_ = 0;
    io_uring_cqe* cqes_ = nullptr;
};

}  // namespace

std::unique_ptr<AioBackend> make_aio_backend_named(const std::string& name, const AioOptions& opts,
                                                   std::string* why_not) {
    if (name == "pread") return std::make_unique<PreadBackend>(opts);
    if (name == "libaio") return make_libaio(opts, why_not);
    if (name == "uring") return UringBackend::open(opts, why_not);
    if (why_not) *why_not = "unknown backend \"" + name + "\" (uring, libaio or pread)";
    return nullptr;
}

std::unique_ptr<AioBackend> make_aio_backend(const AioOptions& opts, std::string* why_not) {
    if (const char* n = std::getenv("DS_AIO_FAIL_WRITE"); n && *n) aio_fail_nth_write(std::strtol(n, nullptr, 10));
    if (const char* forced = std::getenv("DS_AIO_BACKEND"); forced && *forced) {
        std::string why;
        std::unique_ptr<AioBackend> b = make_aio_backend_named(forced, opts, &why);
        DS_CHECK(b != nullptr, DS_ERR_UNSUPPORTED, "DS_AIO_BACKEND=%s: not available here (%s)", forced, why.c_str());
        return b;
    }
    std::string reasons;
    for (const char* name : {"uring", "libaio"}) {
        std::string why;
        if (std::unique_ptr<AioBackend> b = make_aio_backend_named(name, opts, &why)) {
            if (why_not) *why_not = reasons;
            return b;
        }
        reasons += (reasons.empty() ? "" : "; ") + std::string(name) + ": " + why;
    }
    if (why_not) *why_not = reasons;
    return std::make_unique<PreadBackend>(opts);
}

}  // namespace ds::zero
