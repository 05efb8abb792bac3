// Consolidation to one fp32 safetensors file (DeepSpeed's zero_to_fp32):
// each trainable parameter from its fp32 master fragments, gathered from
// every optim_rank<R>.safetensors in offset order (any world size), each
// frozen parameter (or one without fragments) from model.safetensors widened
// to fp32. Streams one parameter at a time: peak memory is about the largest
// parameter, not the model.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace ds::ckpt {

struct ConsolidateStats {
    size_t params = 0;
    uint64_t output_bytes = 0;
    uint64_t peak_buffer_bytes = 0;  // the largest staging buffer held at once
    std::string tag;
};

// Called after each parameter: (parameters done, total, bytes done, bytes total).
using ConsolidateProgress = std::function<void(size_t, size_t, uint64_t, uint64_t)>;

// Reads checkpoint <dir>/<tag> (tag empty: the one <dir>/latest names),
// verifies every file it reads against the manifest (size, CRC32C, header),
// and writes `output` (under a temporary name, fsynced, renamed into place).
// Errors as ds_load_checkpoint (DS_ERR_NOT_FOUND, DS_ERR_FORMAT, DS_ERR_IO).
ConsolidateStats consolidate_fp32(const std::string& dir, const std::string& tag, const std::string& output,
                                  const ConsolidateProgress& progress = {});

}  // namespace ds::ckpt
