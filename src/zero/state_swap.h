// A set of an engine's host buffers moved out of memory to a file under an
// NVMe path and back (ds_engine_offload_states / ds_engine_reload_states,
// DeepSpeed's offload_states / reload_states with device "nvme").
//
// The buffers keep their addresses: their bytes are written to the file,
// then their whole pages are given back to the kernel (madvise
// MADV_DONTNEED: the resident memory goes, the mapping stays), and reload
// reads the bytes back into the same place. Every view of them (the
// Params', ZeRO-3's partitions, a host's DLPack view) stays valid across
// offload/reload; the engine refuses the calls that would read them while
// they are out (engine_offload_states.cpp).
//
// The file is created in <nvme_path>/ds_swap and unlinked at once: nothing
// under the path can delete or truncate it while the engine holds it, and
// a crash leaves nothing behind. Offload writes everything first and only
// then releases memory: a full disk or an I/O error leaves every buffer in
// memory, as it was (DS_ERR_IO naming the file). Reload checks each
// buffer's CRC32C; a failed reload leaves the states offloaded (the file is
// intact) and can be retried.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "zero/aio_file.h"

namespace ds::zero {

// One buffer to move: `bytes` at `data` (host memory), counted in `category`.
struct StateBuffer {
    uint32_t kind = 0;  // the DS_OFFLOAD_* flag it belongs to
    MemCategory category = MemCategory::Params;
    void* data = nullptr;
    size_t bytes = 0;
    std::string what;  // for messages: "fp32 master weights", ...
};

class StateSwap {
public:
    // Writes `buffers` to a new unlinked file under `nvme_path`, then
    // releases their memory. Throws (nothing released, no file left) on a
    // bad path (DS_ERR_INVALID_ARGUMENT naming it) or an I/O error / full
    // disk (DS_ERR_IO naming the file and the bytes).
    StateSwap(const std::string& nvme_path, const AioOptions& aio, std::vector<StateBuffer> buffers,
              Allocator& alloc);
    ~StateSwap();
    StateSwap(const StateSwap&) = delete;
    StateSwap& operator=(const StateSwap&) = delete;

    // Reads every buffer back and checks it; DS_ERR_IO (the states stay out)
    // on an I/O error or a checksum mismatch, naming the buffer.
    void reload();

    uint32_t kinds() const { return kinds_; }
    // Bytes written to the file / pages released from memory, per category.
    int64_t disk_bytes(MemCategory c) const { return disk_[static_cast<int>(c)]; }
    int64_t released_bytes(MemCategory c) const { return released_[static_cast<int>(c)]; }
    const std::string& file() const { return file_; }

private:
    // Moves [data, data + bytes) to or from the file at `offset` through the
    // aligned staging buffer.
    void transfer(bool write, uint8_t* data, size_t bytes, int64_t offset);

    std::vector<StateBuffer> buffers_;
    std::vector<int64_t> offsets_;
    std::vector<uint32_t> crcs_;
    uint32_t kinds_ = 0;
    int64_t disk_[static_cast<int>(MemCategory::Count)] = {};
    int64_t released_[static_cast<int>(MemCategory::Count)] = {};
    Allocator& alloc_;
    std::string file_;  // the name it was created under (unlinked)
    int fd_ = -1;
    std::unique_ptr<AioBackend> backend_;
    std::shared_ptr<void> stage_block_;
    uint8_t* stage_ = nullptr;  // kAioAlignment-aligned, stage_bytes_
    size_t stage_bytes_ = 0;
};

}  // namespace ds::zero
