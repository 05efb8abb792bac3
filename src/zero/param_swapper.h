// ZeRO-Infinity parameter swapping (offload_param.device "nvme", ZeRO-3):
// a rank's partition of working weights (its chunk of every parameter,
// concatenated) is kept in a swap file, and only the pages in use stay in
// memory.
//
// The partition buffer keeps its address range; the file mirrors it page
// for page and is always current (write-through: whoever changes working
// weights — the optimizer step, a checkpoint load, set_full — writes the
// changed pages back). A page leaves memory by madvise(MADV_DONTNEED) (no
// write needed) when no parameter using it is acquired or pinned, and
// comes back by one read. Pinned pages (the first max_in_cpu elements of
// parameters, in registration order, as DeepSpeed keeps max_in_cpu
// elements in host memory) never leave; neither do the partial pages at
// the buffer's two ends (they hold other allocations' bytes).
//
// Prefetch: a worker thread reads the pages of the parameters named by
// prefetch() (the next ones in last step's gather order, at most
// buffer_count) ahead of their acquire().
//
// The file is created in <nvme_path>/ds_swap and unlinked at once (nothing
// under the path can remove it; a crash leaves nothing). I/O errors are
// DS_ERR_IO naming the file and offset; a page that could not be read
// stays out and the call can be retried. A failed write-back after a step
// keeps every page in memory (nothing is lost; the bound is exceeded) and
// is retried at the next step or release_unused().
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "zero/aio_file.h"

namespace ds::zero {

class ParamSwapper {
public:
    // `base`, `bytes`: the partition buffer (host memory). Writes it all to
    // the file; releases nothing yet (pin() first, then release_unused()).
    ParamSwapper(const std::string& nvme_path, int32_t rank, const AioOptions& aio, uint8_t* base, size_t bytes);
    ~ParamSwapper();
    ParamSwapper(const ParamSwapper&) = delete;
    ParamSwapper& operator=(const ParamSwapper&) = delete;

    // Byte ranges [begin, end) are offsets into the partition buffer.
    void pin(size_t begin, size_t end);      // stays in memory for good
    void acquire(size_t begin, size_t end);  // resident until the matching release
    void release(size_t begin, size_t end);  // and give back what nobody uses
    // The bytes of [begin, end) were changed in memory: write them to the
    // file (whole pages). The pages must be resident (acquired or pinned),
    // or wholly overwritten since they left.
    void write_back(size_t begin, size_t end);
    // Every page nobody uses leaves memory (after the step overwrote all).
    void release_unused();
    // The optimizer step: step_begin() stops the prefetch (the step writes
    // pages that are out); step_done() after the step wrote every byte of
    // the buffer: all of it to the file, then what nobody uses leaves;
    // step_abort() after a failed step that restored what it changed (the
    // file still holds it): the pages that were out leave again.
    void step_begin();
    void step_done();
    void step_abort();
    // Reads the pages of each range ahead (asynchronously); cancelled ones
    // are harmless. Waits for nothing.
    void prefetch(const std::vector<std::pair<size_t, size_t>>& ranges);

    const std::string& file() const { return file_; }
    int64_t disk_bytes() const { return file_bytes_; }
    int64_t resident_bytes() const;  // of the buffer's bytes
    int64_t released_bytes() const { return static_cast<int64_t>(bytes_) - resident_bytes(); }
    // The last write-back failure, while the file is behind memory ("" when current).
    std::string pending_error() const {
        std::lock_guard<std::mutex> lock(mu_);
        return error_;
    }

private:
    enum : uint8_t { kOut = 0, kLoading = 1, kIn = 2 };
    // Swappable pages: [first_, last_) of the page grid starting at base_page_.
    size_t page_of(size_t offset) const;
    void pages(size_t begin, size_t end, size_t* p0, size_t* p1) const;  // wholly-swappable pages touching the range
    void read_pages_locked(std::unique_lock<std::mutex>& lock, size_t p0, size_t p1);
    void write_pages(size_t p0, size_t p1);
    void give_back_locked(size_t p0, size_t p1);
    void quiesce_locked(std::unique_lock<std::mutex>& lock);  // no prefetch queued or in flight
    void flush_dirty_locked();
    void worker();

    uint8_t* base_;
    size_t bytes_;
    size_t page_;
    uintptr_t base_page_ = 0;  // base_ rounded down to a page
    size_t first_ = 0, last_ = 0;
    std::vector<int32_t> users_;   // per swappable page (index - first_)
    std::vector<uint8_t> pinned_;
    std::vector<uint8_t> state_;
    bool dirty_ = false;  // memory newer than the file: every page stays
    std::string error_;
    std::string file_;
    int fd_ = -1;
    int64_t file_bytes_ = 0;
    std::unique_ptr<AioBackend> backend_;

    std::mutex io_mu_;  // the backend's ring/context serves one transfer at a time
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<size_t> queue_;  // pages to prefetch
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace ds::zero
