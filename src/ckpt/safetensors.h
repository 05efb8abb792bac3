// The safetensors format (https://github.com/huggingface/safetensors),
// written and read by this project's own code:
//   8 bytes   N, little-endian u64: the header's length
//   N bytes   a JSON object: {"__metadata__": {str: str}, "<name>":
//             {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...}
//             (padded with spaces to a multiple of 8 bytes)
//   the data  the tensors' bytes, row-major little-endian, at the offsets
//             (relative to the end of the header).
// Reading validates strictly; every violation is DS_ERR_FORMAT naming the
// file (and tensor): header length within 100,000,000 bytes and the file,
// JSON syntax, no duplicate keys, known dtype names, non-negative integral
// shapes, offsets that match dtype x shape, and tensors that tile the data
// section exactly (in offset order, no overlap, no gap, nothing after).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ckpt/file_io.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace ds::ckpt {

constexpr uint64_t kMaxSafetensorsHeader = 100000000;

// "F32", "F16", "BF16", "I8", "U8", "I32", "I64".
const char* st_dtype_name(DType d);
// The DType of a safetensors dtype name, or nullopt for one this library
// does not compute in (BOOL, F64, ...) or an unknown name.
std::optional<DType> st_dtype_to_dtype(const std::string& name);
// Bytes per element of a known safetensors dtype name, 0 for an unknown one.
size_t st_dtype_size(const std::string& name);

struct StTensor {
    std::string name;
    std::string dtype;     // safetensors name
    Shape shape;
    uint64_t begin = 0;    // data_offsets, relative to the data section
    uint64_t end = 0;
    uint64_t nbytes() const { return end - begin; }
};

struct StHeader {
    uint64_t data_start = 0;  // 8 + N: file offset of the data section
    std::vector<StTensor> tensors;  // in data order
    std::map<std::string, std::string> metadata;
    std::unordered_map<std::string, size_t> index;  // name -> position in `tensors`
    // The tensor named `name`, or nullptr.
    const StTensor* find(const std::string& name) const;
};

// Validates and parses a whole file held in memory. `what` names it in errors.
StHeader parse_safetensors(const uint8_t* data, uint64_t size, const std::string& what);
// Reads and validates the header of an open file (for streaming readers).
StHeader read_safetensors_header(const FileReader& file);

// One tensor to write.
struct StTensorSpec {
    std::string name;
    DType dtype;
    Shape shape;
};

// The header JSON for `specs` (in that data order) and `metadata`, padded
// to a multiple of 8 bytes, with the 8-byte length prefix.
std::string make_safetensors_header(const std::vector<StTensorSpec>& specs,
                                    const std::map<std::string, std::string>& metadata);

// Writes a safetensors file in one pass: the header first, then each
// tensor's bytes in spec order (in as many write() calls as convenient).
class SafetensorsWriter {
public:
    SafetensorsWriter(std::string path, const std::vector<StTensorSpec>& specs,
                      const std::map<std::string, std::string>& metadata);
    void write(const void* data, size_t n);
    // fsync + close; DS_ERR_INTERNAL when the bytes written do not match the specs.
    FileSummary finish();
    const std::string& path() const { return file_.path(); }

private:
    FileWriter file_;
    uint64_t expected_size_ = 0;
};

}  // namespace ds::ckpt
