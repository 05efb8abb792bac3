// The NVMe swap file of one engine's optimizer state (ZeRO-Infinity,
// DESIGN.md "ZeRO-Infinity"): a rank's fp32 master weights and optimizer
// moments, cut into sub-groups, each stored as one record of
// `tensors` aligned blocks (master, state 0, state 1, ...).
//
// With `atomic_step` (the default) every sub-group has two record slots
// in the file. A step reads each sub-group from its committed slot, lets
// the caller update it in a buffer, and writes it to the other slot; only
// when every sub-group has been written are the committed slots switched.
// A failed step (disk full, I/O error, a file deleted or truncated under
// the engine) leaves the committed state as it was and says which file
// and why. Without it (our extension, offload_optimizer.dsc_atomic_step
// false) each sub-group has one slot, written in place: the file is half
// the size, and a failed step leaves sub-groups [0, done) updated.
//
// Sub-groups stream through `buffer_count` aligned buffers with one I/O
// thread: with pipeline_read the next sub-group is read while the caller
// works on this one, with pipeline_write the previous one is written
// meanwhile. Memory is the buffers, whatever the model size.
//
// Files live in <nvme_path>/ds_swap/<host>-<pid>-<n>-rank<R>/; the
// directory is removed by the destructor, and directories of dead
// processes of this host are removed when the next swapper starts there.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/allocator.h"
#include "zero/aio_file.h"

namespace ds::zero {

struct SwapOptions {
    std::string nvme_path;          // an existing writable directory
    int32_t rank = 0;
    int64_t buffer_count = 4;
    bool pipeline_read = false;
    bool pipeline_write = false;
    bool atomic_step = true;        // two slots per sub-group (false: one, written in place)
    AioOptions aio;
};

// One sub-group: elements [begin, begin + count) of the rank's range.
struct SubGroup {
    int64_t begin = 0;
    int64_t count = 0;
};

class NvmeSwapper {
public:
    // Per sub-group call: element pointers into the buffer, one per tensor
    // (`tensors.size()` of them), `g.count` elements each.
    using GroupFn = std::function<void(size_t index, const SubGroup& g, uint8_t* const* tensors)>;

    // `elem_sizes`: bytes per element of each tensor (master first).
    // Creates the directory and reserves the file (DS_ERR_IO naming the
    // file and the bytes when the disk is too small); buffers come from
    // `alloc` as optimizer state.
    NvmeSwapper(const SwapOptions& opts, std::vector<size_t> elem_sizes, std::vector<SubGroup> groups,
                Allocator& alloc);
    ~NvmeSwapper();
    NvmeSwapper(const NvmeSwapper&) = delete;
    NvmeSwapper& operator=(const NvmeSwapper&) = delete;

    // Writes every sub-group's initial values (`fill` sets the buffer) to
    // its committed slot.
    void initialize(const GroupFn& fill);
    // One optimizer pass: read, `update`, write to the other slot; switches
    // the slots when all succeeded. On failure nothing is switched, the
    // error is rethrown, and `*done` (if given) holds how many sub-groups
    // `update` had already run on (the caller restores what it changed).
    // Single-slot: the write goes to the same slot, so after a failure
    // sub-groups [0, *done) hold the new state (the last one possibly only
    // in part) and the rest the old.
    void step(const GroupFn& update, size_t* done = nullptr);
    // Reads sub-groups [0, n) from their committed slots (no write).
    void read_committed(size_t n, const GroupFn& visit);
    // Elements [begin, begin + count) of tensor `t` of the committed state,
    // in or out (the sub-groups that overlap them are read; written back in
    // place for write_range).
    void read_range(size_t t, int64_t begin, int64_t count, void* dst);
    void write_range(size_t t, int64_t begin, int64_t count, const void* src);

    // DS_ERR_IO when the swap file was deleted or truncated under the engine.
    void check_file() const;

    const std::vector<SubGroup>& groups() const { return groups_; }
    const std::string& file() const { return file_; }
    const std::string& dir() const { return dir_; }
    const char* backend() const { return backend_->name(); }
    bool direct_io() const { return direct_; }
    int64_t disk_bytes() const { return file_bytes_; }
    bool atomic_step() const { return slots_ == 2; }
    // The part of disk_bytes() holding tensor `t` (every slot of every sub-group).
    int64_t tensor_disk_bytes(size_t t) const {
        const size_t end = t + 1 < tensor_offset_.size() ? tensor_offset_[t + 1] : record_bytes_;
        return static_cast<int64_t>(slots_ * groups_.size() * (end - tensor_offset_[t]));
    }
    int64_t buffer_bytes() const { return static_cast<int64_t>(record_bytes_ * buffers_.size()); }

    // Removes <nvme_path>/ds_swap/<this host>-<pid>-* of processes that no
    // longer run; returns how many directories were removed.
    static int remove_stale(const std::string& nvme_path);

private:
    int64_t slot_offset(size_t g, int slot) const {
        return static_cast<int64_t>((slots_ * g + static_cast<size_t>(slot)) * record_bytes_);
    }
    // The slot a new state of sub-group g goes to: the other one, or in place.
    int write_slot(size_t g) const { return slots_ == 2 ? 1 - committed_[g] : committed_[g]; }
    void pointers(uint8_t* buf, std::vector<uint8_t*>& out) const;
    // Queues an I/O on the worker thread.
    std::future<void> submit(bool write, uint8_t* buf, int64_t offset);
    void worker();

    SwapOptions opts_;
    std::vector<size_t> elem_sizes_;
    std::vector<size_t> tensor_offset_;  // byte offset of each tensor inside a record
    std::vector<SubGroup> groups_;
    size_t record_bytes_ = 0;
    size_t slots_ = 2;                // record slots per sub-group
    std::vector<uint8_t> committed_;  // slot (0/1) holding each sub-group's state
    std::string dir_, file_;
    int fd_ = -1;
    bool direct_ = false;
    int64_t file_bytes_ = 0;
    std::unique_ptr<AioBackend> backend_;
    std::vector<std::shared_ptr<void>> blocks_;  // allocator blocks behind buffers_
    std::vector<uint8_t*> buffers_;              // aligned, record_bytes_ each

    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::packaged_task<void()>> queue_;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace ds::zero
