// StateSwap (state_swap.h): buffers out to an unlinked file and back.
#include "zero/state_swap.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/crc32c.h"
#include "core/error.h"

namespace ds::zero {

namespace {

constexpr size_t kStageBytes = size_t{4} << 20;  // the staging buffer's largest size

size_t page_size() {
    const long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<size_t>(p) : 4096;
}

// Creates <nvme_path>/ds_swap/offloaded_states-XXXXXX (O_DIRECT where the
// file system has it) and unlinks it; returns the fd, its name in `*name`.
int create_unlinked(const std::string& nvme_path, std::string* name) {
    struct stat st {};
    DS_CHECK(::stat(nvme_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode), DS_ERR_INVALID_ARGUMENT,
             "ds_engine_offload_states: nvme path \"%s\" is not an existing directory", nvme_path.c_str());
    const std::string root = nvme_path + "/ds_swap";
    if (::mkdir(root.c_str(), 0700) != 0 && errno != EEXIST)
        fail(DS_ERR_IO, "ds_engine_offload_states: cannot create %s: %s", root.c_str(), std::strerror(errno));
    std::string tmpl = root + "/offloaded_states-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    int fd = ::mkostemp(buf.data(), O_DIRECT | O_CLOEXEC);
    if (fd < 0 && errno == EINVAL) {  // no O_DIRECT here (tmpfs): buffered
        std::copy(tmpl.begin(), tmpl.end(), buf.begin());
        fd = ::mkostemp(buf.data(), O_CLOEXEC);
    }
    if (fd < 0)
        fail(DS_ERR_IO, "ds_engine_offload_states: cannot create a swap file in %s: %s", root.c_str(),
             std::strerror(errno));
    *name = buf.data();
    ::unlink(buf.data());
    return fd;
}

}  // namespace

StateSwap::StateSwap(const std::string& nvme_path, const AioOptions& aio, std::vector<StateBuffer> buffers,
                     Allocator& alloc)
    : buffers_(std::move(buffers)), alloc_(alloc) {
    int64_t total = 0;
    size_t widest = 0;
    for (const StateBuffer& b : buffers_) {
        offsets_.push_back(total);
        total += static_cast<int64_t>(aio_round_up(b.bytes));
        widest = std::max(widest, b.bytes);
    }
    fd_ = create_unlinked(nvme_path, &file_);
    try {
        if (total > 0) {
            const int r = ::posix_fallocate(fd_, 0, total);
            if (r != 0 && r != EOPNOTSUPP && r != EINVAL)
                fail(DS_ERR_IO, "offloaded states file %s (unlinked): cannot reserve %lld bytes: %s", file_.c_str(),
                     static_cast<long long>(total), std::strerror(r));
        }
        std::string why;
        backend_ = make_aio_backend(aio, &why);
        stage_bytes_ = std::min(kStageBytes, aio_round_up(std::max<size_t>(widest, 1)));
        stage_block_ = alloc_.allocate_block(stage_bytes_ + kAioAlignment, Device::cpu(), MemCategory::Buffers);
        const uintptr_t p = reinterpret_cast<uintptr_t>(stage_block_.get());
        stage_ = reinterpret_cast<uint8_t*>((p + kAioAlignment - 1) / kAioAlignment * kAioAlignment);
        for (size_t i = 0; i < buffers_.size(); ++i) {
            StateBuffer& b = buffers_[i];
            crcs_.push_back(crc32c(0, b.data, b.bytes));
            transfer(true, static_cast<uint8_t*>(b.data), b.bytes, offsets_[i]);
        }
        if (::fdatasync(fd_) != 0 && errno != EINVAL)
            fail(DS_ERR_IO, "offloaded states file %s (unlinked): fdatasync: %s", file_.c_str(), std::strerror(errno));
    } catch (...) {
        ::close(fd_);
        fd_ = -1;
        throw;
    }
    stage_block_.reset();
    stage_ = nullptr;
    // Everything is on disk: give the pages back.
    const size_t page = page_size();
    for (const StateBuffer& b : buffers_) {
        kinds_ |= b.kind;
        disk_[static_cast<int>(b.category)] += static_cast<int64_t>(b.bytes);
        const uintptr_t begin = (reinterpret_cast<uintptr_t>(b.data) + page - 1) / page * page;
        const uintptr_t end = (reinterpret_cast<uintptr_t>(b.data) + b.bytes) / page * page;
        if (end > begin && ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) == 0)
            released_[static_cast<int>(b.category)] += static_cast<int64_t>(end - begin);
    }
}

StateSwap::~StateSwap() {
    if (fd_ >= 0) ::close(fd_);
}

void StateSwap::transfer(bool write, uint8_t* data, size_t bytes, int64_t offset) {
    size_t done = 0;
    while (done < bytes) {
        const size_t n = std::min(stage_bytes_, bytes - done);
        const size_t io = aio_round_up(n);
        if (write) {
            std::memcpy(stage_, data + done, n);
            std::memset(stage_ + n, 0, io - n);
        }
        backend_->transfer(fd_, file_ + " (unlinked)", write, stage_, io, offset + static_cast<int64_t>(done));
        if (!write) std::memcpy(data + done, stage_, n);
        done += n;
    }
}

void StateSwap::reload() {
    size_t widest = 0;
    for (const StateBuffer& b : buffers_) widest = std::max(widest, b.bytes);
    stage_bytes_ = std::min(kStageBytes, aio_round_up(std::max<size_t>(widest, 1)));
    stage_block_ = alloc_.allocate_block(stage_bytes_ + kAioAlignment, Device::cpu(), MemCategory::Buffers);
    const uintptr_t p = reinterpret_cast<uintptr_t>(stage_block_.get());
    stage_ = reinterpret_cast<uint8_t*>((p + kAioAlignment - 1) / kAioAlignment * kAioAlignment);
    try {
        for (size_t i = 0; i < buffers_.size(); ++i) {
            StateBuffer& b = buffers_[i];
            transfer(false, static_cast<uint8_t*>(b.data), b.bytes, offsets_[i]);
            DS_CHECK(crc32c(0, b.data, b.bytes) == crcs_[i], DS_ERR_IO,
                     "ds_engine_reload_states: the %s read back from %s (unlinked) do not match what was written "
                     "(CRC32C mismatch): the states stay offloaded",
                     b.what.c_str(), file_.c_str());
        }
    } catch (...) {
        stage_block_.reset();
        stage_ = nullptr;
        throw;
    }
    stage_block_.reset();
    stage_ = nullptr;
}

}  // namespace ds::zero
