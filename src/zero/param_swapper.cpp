// ParamSwapper (param_swapper.h): the page-granular swap of a ZeRO-3
// working partition.
#include "zero/param_swapper.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace ds::zero {

ParamSwapper::ParamSwapper(const std::string& nvme_path, int32_t rank, const AioOptions& aio, uint8_t* base,
                           size_t bytes)
    : base_(base), bytes_(bytes) {
    const long ps = ::sysconf(_SC_PAGESIZE);
    page_ = ps > 0 ? static_cast<size_t>(ps) : 4096;
    page_ = std::max(page_, kAioAlignment);
    const uintptr_t b = reinterpret_cast<uintptr_t>(base_);
    base_page_ = b / page_ * page_;
    first_ = b == base_page_ ? 0 : 1;
    last_ = (b + bytes_ - base_page_) / page_;
    if (last_ < first_) last_ = first_;
    const size_t n = last_ - first_;
    users_.assign(n, 0);
    pinned_.assign(n, 0);
    state_.assign(n, kIn);
    file_bytes_ = static_cast<int64_t>(n * page_);

    struct stat st {};
    DS_CHECK(::stat(nvme_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode), DS_ERR_INVALID_CONFIG,
             "zero_optimization.offload_param.nvme_path: \"%s\" is not an existing directory", nvme_path.c_str());
    const std::string root = nvme_path + "/ds_swap";
    if (::mkdir(root.c_str(), 0700) != 0 && errno != EEXIST)
        fail(DS_ERR_IO, "zero_optimization.offload_param.nvme_path: cannot create %s: %s", root.c_str(),
             std::strerror(errno));
    std::string tmpl = root + "/params-rank" + std::to_string(rank) + "-XXXXXX";
    std::vector<char> name(tmpl.begin(), tmpl.end());
    name.push_back('\0');
    fd_ = ::mkostemp(name.data(), O_DIRECT | O_CLOEXEC);
    if (fd_ < 0 && errno == EINVAL) {  // no O_DIRECT here (tmpfs): buffered
        std::copy(tmpl.begin(), tmpl.end(), name.begin());
        fd_ = ::mkostemp(name.data(), O_CLOEXEC);
    }
    if (fd_ < 0)
        fail(DS_ERR_IO, "zero_optimization.offload_param.nvme_path: cannot create a swap file in %s: %s", root.c_str(),
             std::strerror(errno));
    file_ = std::string(name.data()) + " (unlinked)";
    ::unlink(name.data());
    try {
        if (file_bytes_ > 0) {
            const int r = ::posix_fallocate(fd_, 0, file_bytes_);
            if (r != 0 && r != EOPNOTSUPP && r != EINVAL)
                fail(DS_ERR_IO, "parameter swap file %s: cannot reserve %lld bytes: %s", file_.c_str(),
                     static_cast<long long>(file_bytes_), std::strerror(r));
        }
        std::string why;
        backend_ = make_aio_backend(aio, &why);
        if (n > 0) write_pages(first_, last_);
    } catch (...) {
        ::close(fd_);
        throw;
    }
    thread_ = std::thread([this] { worker(); });
}

ParamSwapper::~ParamSwapper() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
        queue_.clear();
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    // Whatever is out comes back as zeros if the buffer is used after this;
    // the buffer dies with the strategy that owns both.
    if (fd_ >= 0) ::close(fd_);
}

size_t ParamSwapper::page_of(size_t offset) const {
    return (reinterpret_cast<uintptr_t>(base_) + offset - base_page_) / page_;
}

void ParamSwapper::pages(size_t begin, size_t end, size_t* p0, size_t* p1) const {
    if (end <= begin) {
        *p0 = *p1 = first_;
        return;
    }
    *p0 = std::max(first_, page_of(begin));
    *p1 = std::min(last_, page_of(end - 1) + 1);
    if (*p1 < *p0) *p1 = *p0;
}

void ParamSwapper::write_pages(size_t p0, size_t p1) {
    if (p1 <= p0) return;
    uint8_t* addr = reinterpret_cast<uint8_t*>(base_page_ + p0 * page_);
    std::lock_guard<std::mutex> io(io_mu_);  // one backend (ring/context): one transfer at a time
    backend_->transfer(fd_, file_, /*write=*/true, addr, (p1 - p0) * page_, static_cast<int64_t>((p0 - first_) * page_));
}

// Reads pages [p0, p1) (all kOut, lock held) in one transfer: marked
// loading while the lock is dropped for the read.
void ParamSwapper::read_pages_locked(std::unique_lock<std::mutex>& lock, size_t p0, size_t p1) {
    for (size_t p = p0; p < p1; ++p) state_[p - first_] = kLoading;
    lock.unlock();
    try {
        uint8_t* addr = reinterpret_cast<uint8_t*>(base_page_ + p0 * page_);
        std::lock_guard<std::mutex> io(io_mu_);
        backend_->transfer(fd_, file_, /*write=*/false, addr, (p1 - p0) * page_,
                           static_cast<int64_t>((p0 - first_) * page_));
    } catch (...) {
        lock.lock();
        for (size_t p = p0; p < p1; ++p) state_[p - first_] = kOut;
        cv_.notify_all();
        throw;
    }
    lock.lock();
    for (size_t p = p0; p < p1; ++p) state_[p - first_] = kIn;
    cv_.notify_all();
}

void ParamSwapper::give_back_locked(size_t p0, size_t p1) {
    if (dirty_) return;  // the file is behind memory: nothing may leave
    size_t run = p0;
    auto flush = [&](size_t end) {
        if (end > run)
            (void)::madvise(reinterpret_cast<void*>(base_page_ + run * page_), (end - run) * page_, MADV_DONTNEED);
    };
    for (size_t p = p0; p < p1; ++p) {
        const size_t i = p - first_;
        if (users_[i] == 0 && !pinned_[i] && state_[i] == kIn) {
            state_[i] = kOut;
            continue;
        }
        flush(p);
        run = p + 1;
    }
    flush(p1);
}

void ParamSwapper::pin(size_t begin, size_t end) {
    size_t p0, p1;
    pages(begin, end, &p0, &p1);
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t p = p0; p < p1; ++p) pinned_[p - first_] = 1;
}

void ParamSwapper::acquire(size_t begin, size_t end) {
    size_t p0, p1;
    pages(begin, end, &p0, &p1);
    std::unique_lock<std::mutex> lock(mu_);
    for (size_t p = p0; p < p1; ++p) ++users_[p - first_];  // nothing gives them back now
    try {
        for (size_t p = p0; p < p1;) {
            cv_.wait(lock, [&] { return state_[p - first_] != kLoading; });
            if (state_[p - first_] == kIn) {
                ++p;
                continue;
            }
            size_t q = p + 1;  // a run of pages that are out
            while (q < p1 && state_[q - first_] == kOut) ++q;
            read_pages_locked(lock, p, q);
            p = q;
        }
    } catch (...) {
        for (size_t p = p0; p < p1; ++p) --users_[p - first_];
        throw;
    }
}

void ParamSwapper::release(size_t begin, size_t end) {
    size_t p0, p1;
    pages(begin, end, &p0, &p1);
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t p = p0; p < p1; ++p)
        if (users_[p - first_] > 0) --users_[p - first_];
    give_back_locked(p0, p1);
}

void ParamSwapper::quiesce_locked(std::unique_lock<std::mutex>& lock) {
    queue_.clear();
    cv_.wait(lock, [&] { return std::none_of(state_.begin(), state_.end(), [](uint8_t s) { return s == kLoading; }); });
}

void ParamSwapper::write_back(size_t begin, size_t end) {
    size_t p0, p1;
    pages(begin, end, &p0, &p1);
    std::unique_lock<std::mutex> lock(mu_);
    quiesce_locked(lock);
    for (size_t p = p0; p < p1; ++p) state_[p - first_] = kIn;
    try {
        write_pages(p0, p1);
    } catch (const std::exception& e) {
        dirty_ = true;  // kept in memory; the next full write-back retries
        error_ = e.what();
    }
}

void ParamSwapper::release_unused() {
    std::unique_lock<std::mutex> lock(mu_);
    quiesce_locked(lock);
    flush_dirty_locked();
    give_back_locked(first_, last_);
}

void ParamSwapper::step_begin() {
    std::unique_lock<std::mutex> lock(mu_);
    quiesce_locked(lock);
}

void ParamSwapper::step_done() {
    std::unique_lock<std::mutex> lock(mu_);
    quiesce_locked(lock);
    // The step wrote every byte: all pages are in memory and new.
    std::fill(state_.begin(), state_.end(), static_cast<uint8_t>(kIn));
    dirty_ = true;
    flush_dirty_locked();
    give_back_locked(first_, last_);
}

// A failed write-back (full disk, I/O error) keeps every page in memory
// (the step's result is safe there) and is retried at the next chance.
void ParamSwapper::flush_dirty_locked() {
    if (!dirty_) return;
    try {
        write_pages(first_, last_);
        dirty_ = false;
        error_.clear();
    } catch (const std::exception& e) {
        error_ = e.what();
    }
}

void ParamSwapper::step_abort() {
    std::unique_lock<std::mutex> lock(mu_);
    quiesce_locked(lock);
    // Pages still marked out may have been faulted in by the failed step;
    // the file holds their content: drop them again.
    for (size_t p = first_; p < last_; ++p)
        if (state_[p - first_] == kOut)
            (void)::madvise(reinterpret_cast<void*>(base_page_ + p * page_), page_, MADV_DONTNEED);
}

void ParamSwapper::prefetch(const std::vector<std::pair<size_t, size_t>>& ranges) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& r : ranges) {
            size_t p0, p1;
            pages(r.first, r.second, &p0, &p1);
            for (size_t p = p0; p < p1; ++p)
                if (state_[p - first_] == kOut) queue_.push_back(p);
        }
    }
    cv_.notify_all();
}

int64_t ParamSwapper::resident_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t out = 0;
    for (uint8_t s : state_)
        if (s == kOut) out += static_cast<int64_t>(page_);
    return static_cast<int64_t>(bytes_) - out;
}

// Prefetch: reads queued pages that are still out; an error leaves the page
// out (the acquire that needs it reads it again and reports).
void ParamSwapper::worker() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        const size_t p = queue_.front();
        queue_.pop_front();
        if (state_[p - first_] != kOut) continue;
        size_t q = p + 1;  // the run of queued pages that follow and are out
        while (!queue_.empty() && queue_.front() == q && q < last_ && state_[q - first_] == kOut) {
            queue_.pop_front();
            ++q;
        }
        try {
            read_pages_locked(lock, p, q);
        } catch (...) {
        }
    }
}

}  // namespace ds::zero
