// Writing safetensors files: a compact header (metadata first, then the
// tensors in data order), space-padded so the data section starts 8-byte
// aligned, then the tensors' bytes streamed in order.
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "core/json/json_writer.h"

namespace ds::ckpt {

namespace {

uint64_t spec_bytes(const StTensorSpec& s) {
    return static_cast<uint64_t>(checked_numel(s.shape, s.name.c_str())) * dtype_size(s.dtype);
}

}  // namespace

std::string make_safetensors_header(const std::vector<StTensorSpec>& specs,
                                    const std::map<std::string, std::string>& metadata) {
    std::string json = "{";
    bool first = true;
    if (!metadata.empty()) {
        json += "\"__metadata__\":{";
        for (const auto& [k, v] : metadata) {
            if (!first) json += ',';
            first = false;
            json::append_quoted(json, k);
            json += ':';
            json::append_quoted(json, v);
        }
        json += '}';
        first = false;
    }
    uint64_t offset = 0;
    for (const StTensorSpec& s : specs) {
        DS_CHECK(!s.name.empty() && s.name != "__metadata__", DS_ERR_INVALID_ARGUMENT,
                 "tensor name '%s' cannot be stored in safetensors", s.name.c_str());
        if (!first) json += ',';
        first = false;
        json::append_quoted(json, s.name);
        json += ":{\"dtype\":\"";
        json += st_dtype_name(s.dtype);
        json += "\",\"shape\":[";
        for (size_t i = 0; i < s.shape.size(); ++i) {
            if (i) json += ',';
            json += std::to_string(s.shape[i]);
        }
        const uint64_t end = offset + spec_bytes(s);
        json += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
        offset = end;
    }
    json += '}';
    while (json.size() % 8 != 0) json += ' ';
    // The reader's limit: a file it would refuse is not written.
    DS_CHECK(json.size() <= kMaxSafetensorsHeader, DS_ERR_INVALID_ARGUMENT,
             "safetensors header of %zu bytes (%zu tensors) exceeds %llu bytes, the most a reader accepts "
             "(shorter parameter names, or fewer parameters)",
             json.size(), specs.size(), static_cast<unsigned long long>(kMaxSafetensorsHeader));
    std::string out(8, '\0');
    uint64_t n = json.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFFu);
    return out + json;
}

SafetensorsWriter::SafetensorsWriter(std::string path, const std::vector<StTensorSpec>& specs,
                                     const std::map<std::string, std::string>& metadata)
    : file_(std::move(path)) {
    const std::string header = make_safetensors_header(specs, metadata);
    expected_size_ = header.size();
    for (const StTensorSpec& s : specs) expected_size_ += spec_bytes(s);
    file_.write(header.data(), header.size());
}

void SafetensorsWriter::write(const void* data, size_t n) {
    DS_CHECK(file_.written() + n <= expected_size_, DS_ERR_INTERNAL,
             "'%s': more tensor bytes written than the header declares", file_.path().c_str());
    file_.write(data, n);
}

FileSummary SafetensorsWriter::finish() {
    DS_CHECK(file_.written() == expected_size_, DS_ERR_INTERNAL,
             "'%s': %llu bytes written, the header declares %llu", file_.path().c_str(),
             static_cast<unsigned long long>(file_.written()), static_cast<unsigned long long>(expected_size_));
    return file_.finish();
}

}  // namespace ds::ckpt
