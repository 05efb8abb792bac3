// Block I/O on one swap file for the NVMe optimizer state (ZeRO-Infinity):
// whole aligned transfers split into aio.block_size requests with up to
// aio.queue_depth in flight. Three backends, chosen at run time:
//   uring   io_uring through its kernel ABI (io_uring_setup/enter + mmap'd
//           rings; liburing is not needed: its core API is inline functions
//           over a struct whose layout changes between versions, which dlopen
//           cannot use safely);
//   libaio  Linux native AIO through libaio.so.1, loaded with dlopen;
//   pread   plain pread/pwrite, always available.
// The first that works is used (uring, libaio, pread); DS_AIO_BACKEND=
// uring|libaio|pread forces one (an unavailable forced backend is an
// error naming the reason). Files are opened with O_DIRECT where the file
// system allows it (tmpfs does not: then buffered); buffers, offsets and
// sizes are multiples of kAioAlignment either way.
//
// Errors are ds::Error (DS_ERR_IO) naming the file, the byte offset and
// the cause (errno text, or "short read: the file was truncated").
// Test hook: DS_AIO_FAIL_WRITE=N makes the N-th write request (1-based)
// after a backend is made fail with EIO, to exercise the fault paths
// (aio_fail_nth_write does the same in process; 0 turns it off).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ds::zero {

constexpr size_t kAioAlignment = 4096;

struct AioOptions {
    int64_t block_size = 1048576;  // bytes per request (rounded up to kAioAlignment)
    int64_t queue_depth = 8;       // requests in flight
    bool single_submit = false;    // submit requests one at a time
};

class AioBackend {
public:
    virtual ~AioBackend() = default;
    virtual const char* name() const = 0;
    // Transfers `bytes` between `buf` and `fd` at `offset` (all aligned);
    // throws DS_ERR_IO naming `path` on any error or short transfer.
    virtual void transfer(int fd, const std::string& path, bool write, void* buf, size_t bytes, int64_t offset) = 0;
};

// The backend named by DS_AIO_BACKEND, else the first that works.
// `why_not` receives why the faster backends were passed over (empty when
// the first choice works).
std::unique_ptr<AioBackend> make_aio_backend(const AioOptions& opts, std::string* why_not);
// One named backend ("uring", "libaio", "pread"), or nullptr with the
// reason in `why_not` (tests skip with it).
std::unique_ptr<AioBackend> make_aio_backend_named(const std::string& name, const AioOptions& opts,
                                                   std::string* why_not);

// Rounds up to a multiple of kAioAlignment.
inline size_t aio_round_up(size_t n) { return (n + kAioAlignment - 1) / kAioAlignment * kAioAlignment; }

// The fault-injection hook: true when this write request is the one
// DS_AIO_FAIL_WRITE / aio_fail_nth_write names (counted across the process).
bool aio_inject_write_failure();
void aio_fail_nth_write(long n);

}  // namespace ds::zero
