// NvmeSwapper (nvme_swapper.h): the swap directory, the record file (two
// slots per sub-group, or one), and the pipelined read -> update -> write pass over sub-groups.
#include "zero/nvme_swapper.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>

#include "core/error.h"

namespace ds::zero {

namespace {

std::string host_name() {
    char h[256] = {0};
    if (gethostname(h, sizeof h - 1) != 0 || !h[0]) return "host";
    for (char* c = h; *c; ++c)
        if (*c == '/' || *c == '-') *c = '_';
    return h;
}

const char* kSwapSubdir = "ds_swap";
const char* kSwapFile = "optimizer_state.swp";

// Removes a swap directory this library made: its one file, then itself.
void remove_swap_dir(const std::string& dir) {
    ::unlink((dir + "/" + kSwapFile).c_str());
    ::rmdir(dir.c_str());
}

}  // namespace

int NvmeSwapper::remove_stale(const std::string& nvme_path) {
    const std::string root = nvme_path + "/" + kSwapSubdir;
    DIR* d = ::opendir(root.c_str());
    if (!d) return 0;
    const std::string prefix = host_name() + "-";
    int removed = 0;
    while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name.compare(0, prefix.size(), prefix) != 0) continue;
        const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
        if (pid <= 0) continue;
        // Alive (or not ours to signal): keep.
        if (pid == static_cast<long>(::getpid()) || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)
            continue;
        remove_swap_dir(root + "/" + name);
        ++removed;
    }
    ::closedir(d);
    return removed;
}

NvmeSwapper::NvmeSwapper(const SwapOptions& opts, std::vector<size_t> elem_sizes, std::vector<SubGroup> groups,
                         Allocator& alloc)
    : opts_(opts), elem_sizes_(std::move(elem_sizes)), groups_(std::move(groups)), slots_(opts.atomic_step ? 2 : 1) {
    const std::string& path = opts_.nvme_path;
    struct stat st {};
    DS_CHECK(::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode), DS_ERR_INVALID_CONFIG,
             "zero_optimization.offload_optimizer.nvme_path: \"%s\" is not an existing directory", path.c_str());
    DS_CHECK(::access(path.c_str(), W_OK | X_OK) == 0, DS_ERR_INVALID_CONFIG,
             "zero_optimization.offload_optimizer.nvme_path: \"%s\" is not writable (%s)", path.c_str(),
             std::strerror(errno));
    remove_stale(path);

    int64_t widest = 0;
    for (const SubGroup& g : groups_) widest = std::max(widest, g.count);
    size_t off = 0;
    for (size_t es : elem_sizes_) {
        tensor_offset_.push_back(off);
        off += aio_round_up(static_cast<size_t>(widest) * es);
    }
    record_bytes_ = std::max(off, kAioAlignment);
    committed_.assign(groups_.size(), 0);

    // The directory: unique per engine (host, pid, a process-wide counter, rank).
    static std::atomic<int> serial{0};
    const std::string root = path + "/" + kSwapSubdir;
    if (::mkdir(root.c_str(), 0700) != 0 && errno != EEXIST)
        fail(DS_ERR_IO, "zero_optimization.offload_optimizer.nvme_path: cannot create %s: %s", root.c_str(),
             std::strerror(errno));
    dir_ = root + "/" + host_name() + "-" + std::to_string(::getpid()) + "-" + std::to_string(serial++) + "-rank" +
           std::to_string(opts_.rank);
    if (::mkdir(dir_.c_str(), 0700) != 0)
        fail(DS_ERR_IO, "NVMe swap directory %s: cannot create: %s", dir_.c_str(), std::strerror(errno));
    file_ = dir_ + "/" + kSwapFile;
    fd_ = ::open(file_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
    direct_ = fd_ >= 0;
    if (fd_ < 0 && errno == EINVAL)  // the file system has no O_DIRECT (tmpfs): buffered
        fd_ = ::open(file_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) {
        const int err = errno;
        ::rmdir(dir_.c_str());
        fail(DS_ERR_IO, "NVMe swap file %s: cannot create: %s", file_.c_str(), std::strerror(err));
    }
    file_bytes_ = static_cast<int64_t>(slots_ * groups_.size() * record_bytes_);
    if (file_bytes_ > 0) {
        const int r = ::posix_fallocate(fd_, 0, file_bytes_);
        if (r != 0 && r != EOPNOTSUPP && r != EINVAL) {
            ::close(fd_);
            remove_swap_dir(dir_);
            fail(DS_ERR_IO, "NVMe swap file %s: cannot reserve %lld bytes (%zu slot(s) of %zu sub-groups of %zu "
                 "bytes): %s%s", file_.c_str(), static_cast<long long>(file_bytes_), slots_, groups_.size(),
                 record_bytes_, std::strerror(r),
                 slots_ == 2 ? " (zero_optimization.offload_optimizer.dsc_atomic_step false needs half)" : "");
        }
    }
    std::string why;
    try {
        backend_ = make_aio_backend(opts_.aio, &why);
        const size_t n = static_cast<size_t>(std::max<int64_t>(1, opts_.buffer_count));
        for (size_t i = 0; i < n; ++i) {
            blocks_.push_back(alloc.allocate_block(record_bytes_ + kAioAlignment, Device::cpu(), MemCategory::OptimizerState));
            const uintptr_t p = reinterpret_cast<uintptr_t>(blocks_.back().get());
            buffers_.push_back(reinterpret_cast<uint8_t*>((p + kAioAlignment - 1) / kAioAlignment * kAioAlignment));
            std::memset(buffers_.back(), 0, record_bytes_);
        }
    } catch (...) {
        ::close(fd_);
        remove_swap_dir(dir_);
        throw;
    }
    thread_ = std::thread([this] { worker(); });
}

NvmeSwapper::~NvmeSwapper() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
    remove_swap_dir(dir_);
}

void NvmeSwapper::worker() {
    for (;;) {
        std::packaged_task<void()> task;
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) return;  // stop_ with nothing left
            task = std::move(queue_.front());
            queue_.pop_front();
        }
        task();  // exceptions go to the future
    }
}

std::future<void> NvmeSwapper::submit(bool write, uint8_t* buf, int64_t offset) {
    std::packaged_task<void()> task(
        [this, write, buf, offset] { backend_->transfer(fd_, file_, write, buf, record_bytes_, offset); });
    std::future<void> f = task.get_future();
    {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.push_back(std::move(task));
    }
    cv_.notify_one();
    return f;
}

void NvmeSwapper::pointers(uint8_t* buf, std::vector<uint8_t*>& out) const {
    out.clear();
    for (size_t off : tensor_offset_) out.push_back(buf + off);
}

void NvmeSwapper::check_file() const {
    struct stat st {};
    DS_CHECK(::fstat(fd_, &st) == 0, DS_ERR_IO, "NVMe swap file %s: fstat failed: %s", file_.c_str(),
             std::strerror(errno));
    DS_CHECK(st.st_nlink > 0, DS_ERR_IO,
             "NVMe swap file %s was deleted under the engine: the optimizer state in it is lost to new opens "
             "(nothing was changed by this call)", file_.c_str());
    DS_CHECK(st.st_size >= file_bytes_, DS_ERR_IO,
             "NVMe swap file %s was truncated under the engine to %lld bytes (expected %lld; nothing was changed "
             "by this call)", file_.c_str(), static_cast<long long>(st.st_size), static_cast<long long>(file_bytes_));
}

void NvmeSwapper::initialize(const GroupFn& fill) {
    std::vector<uint8_t*> ptrs;
    for (size_t g = 0; g < groups_.size(); ++g) {
        uint8_t* buf = buffers_[0];
        std::memset(buf, 0, record_bytes_);
        pointers(buf, ptrs);
        fill(g, groups_[g], ptrs.data());
        submit(true, buf, slot_offset(g, committed_[g])).get();
    }
}

// The pass behind step() and read_committed(): sub-group g uses buffer
// g % n. Before a buffer is read into, the write that last used it has
// finished. Every future is waited for before an error leaves (the
// worker must not touch a buffer the next pass uses).
void NvmeSwapper::step(const GroupFn& update, size_t* done) {
    if (done) *done = 0;
    check_file();
    const size_t n = groups_.size();
    const size_t nbuf = buffers_.size();
    const bool ahead = opts_.pipeline_read && nbuf >= 2;
    const bool async_write = opts_.pipeline_write && nbuf >= 2;
    std::vector<std::future<void>> reads(nbuf), writes(nbuf);
    std::exception_ptr error;
    auto wait = [&](std::future<void>& f) {
        if (!f.valid()) return;
        try {
            f.get();
        } catch (...) {
            if (!error) error = std::current_exception();
        }
    };
    auto read = [&](size_t g) {
        const size_t b = g % nbuf;
        wait(writes[b]);
        if (!error) reads[b] = submit(false, buffers_[b], slot_offset(g, committed_[g]));
    };
    std::vector<uint8_t*> ptrs;
    for (size_t g = 0; g < n && !error; ++g) {
        const size_t b = g % nbuf;
        if (g == 0 || !ahead) read(g);
        if (ahead && g + 1 < n && (g + 1) % nbuf != b) read(g + 1);
        wait(reads[b]);
        if (error) break;
        pointers(buffers_[b], ptrs);
        try {
            update(g, groups_[g], ptrs.data());
        } catch (...) {
            error = std::current_exception();
            break;
        }
        if (done) *done = g + 1;
        writes[b] = submit(true, buffers_[b], slot_offset(g, write_slot(g)));
        if (!async_write) wait(writes[b]);
    }
    for (auto& f : reads) wait(f);
    for (auto& f : writes) wait(f);
    if (error) std::rethrow_exception(error);
    if (slots_ == 2)
        for (uint8_t& s : committed_) s = static_cast<uint8_t>(1 - s);
}

void NvmeSwapper::read_committed(size_t n, const GroupFn& visit) {
    std::vector<uint8_t*> ptrs;
    for (size_t g = 0; g < std::min(n, groups_.size()); ++g) {
        submit(false, buffers_[0], slot_offset(g, committed_[g])).get();
        pointers(buffers_[0], ptrs);
        visit(g, groups_[g], ptrs.data());
    }
}

void NvmeSwapper::read_range(size_t t, int64_t begin, int64_t count, void* dst) {
    check_file();
    const size_t es = elem_sizes_[t];
    for (size_t g = 0; g < groups_.size(); ++g) {
        const SubGroup& sg = groups_[g];
        const int64_t a = std::max(begin, sg.begin), b = std::min(begin + count, sg.begin + sg.count);
        if (a >= b) continue;
        submit(false, buffers_[0], slot_offset(g, committed_[g])).get();
        std::memcpy(static_cast<uint8_t*>(dst) + static_cast<size_t>(a - begin) * es,
                    buffers_[0] + tensor_offset_[t] + static_cast<size_t>(a - sg.begin) * es,
                    static_cast<size_t>(b - a) * es);
    }
}

void NvmeSwapper::write_range(size_t t, int64_t begin, int64_t count, const void* src) {
    check_file();
    const size_t es = elem_sizes_[t];
    for (size_t g = 0; g < groups_.size(); ++g) {
        const SubGroup& sg = groups_[g];
        const int64_t a = std::max(begin, sg.begin), b = std::min(begin + count, sg.begin + sg.count);
        if (a >= b) continue;
        // Read-modify-write into the other slot, then switch this sub-group
        // (single-slot: in place).
        submit(false, buffers_[0], slot_offset(g, committed_[g])).get();
        std::memcpy(buffers_[0] + tensor_offset_[t] + static_cast<size_t>(a - sg.begin) * es,
                    static_cast<const uint8_t*>(src) + static_cast<size_t>(a - begin) * es,
                    static_cast<size_t>(b - a) * es);
        submit(true, buffers_[0], slot_offset(g, write_slot(g))).get();
        committed_[g] = static_cast<uint8_t>(write_slot(g));
    }
}

}  // namespace ds::zero
