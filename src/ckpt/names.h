// Limits on what a checkpoint stores, shared by the entry checks (tags at
// save, parameter names and shapes at ds_engine_add_param) and the readers,
// so that whatever a save accepts, a load accepts too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace ds::ckpt {

// A temporary of the commit protocol is "<name>.tmp-<16 hex>" (or
// ".old-<16 hex>"): 21 bytes more than the name, and a file name is at most
// 255 bytes (NAME_MAX), so tags (and ds_save_16bit_model file names) are at
// most 234 bytes.
constexpr size_t kTempSuffixBytes = 21;
constexpr size_t kMaxNameBytes = 255;
constexpr size_t kMaxTagBytes = kMaxNameBytes - kTempSuffixBytes;

// JSON numbers are exact integers below 2^53: the largest dimension (and
// data offset) the safetensors and manifest readers accept.
constexpr uint64_t kMaxDim = (uint64_t{1} << 53) - 1;

// Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF):
// what the JSON readers accept in strings.
bool valid_utf8(std::string_view s);

// Upper bound of the bytes the entry of tensor `name` with `ndim`
// dimensions takes in a safetensors header written here (escaped name,
// dtype, shape and data offsets of any size, separators).
uint64_t st_entry_bound(std::string_view name, size_t ndim);

// A parameter's name and shape as ds_engine_add_param receives them:
// DS_ERR_INVALID_ARGUMENT naming the parameter and the limit when the name is
// empty, "__metadata__" (reserved by safetensors), not valid UTF-8, or when a
// dimension exceeds kMaxDim. `header_bytes` is the sum of st_entry_bound
// over the parameters added so far; a parameter that would take the model
// file's header past the reader's limit (kMaxSafetensorsHeader) is refused
// too. Returns this parameter's st_entry_bound (add it once it is added).
uint64_t check_param_entry(const std::string& name, const Shape& shape, uint64_t header_bytes);

}  // namespace ds::ckpt
