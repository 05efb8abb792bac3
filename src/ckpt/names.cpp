#include "ckpt/names.h"

#include "ckpt/safetensors.h"
#include "core/error.h"

namespace ds::ckpt {

bool valid_utf8(std::string_view s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const size_t n = s.size();
    for (size_t i = 0; i < n;) {
        const unsigned c = p[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        size_t len;
        unsigned cp;
        if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
        else return false;  // a continuation byte, an overlong lead (C0, C1) or past U+10FFFF (F5..FF)
        if (i + len > n) return false;
        for (size_t k = 1; k < len; ++k) {
            if ((p[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return false;  // overlong
        if (cp >= 0xD800 && cp <= 0xDFFF) return false;  // surrogates are not characters
        i += len;
    }
    return true;
}

uint64_t st_entry_bound(std::string_view name, size_t ndim) {
    uint64_t escaped = 2;  // the quotes
    for (char ch : name) {
        const unsigned char c = static_cast<unsigned char>(ch);
        escaped += c < 0x20 ? 6 : (c == '"' || c == '\\') ? 2 : 1;
    }
    // :{"dtype":"BF16","shape":[d,..],"data_offsets":[b,e]}, with every
    // number at most 20 digits.
    constexpr uint64_t kFixed = 64, kNumber = 21;
    return escaped + kFixed + kNumber * (static_cast<uint64_t>(ndim) + 2);
}

uint64_t check_param_entry(const std::string& name, const Shape& shape, uint64_t header_bytes) {
    DS_CHECK(!name.empty(), DS_ERR_INVALID_ARGUMENT, "argument 'name' is empty");
    DS_CHECK(name != "__metadata__", DS_ERR_INVALID_ARGUMENT,
             "parameter name '__metadata__' is reserved by the safetensors format (checkpoints could not "
             "hold it)");
    DS_CHECK(valid_utf8(name), DS_ERR_INVALID_ARGUMENT, "argument 'name': the parameter name is not valid UTF-8");
    for (size_t i = 0; i < shape.size(); ++i)
        DS_CHECK(shape[i] >= 0 && static_cast<uint64_t>(shape[i]) <= kMaxDim, DS_ERR_INVALID_ARGUMENT,
                 "parameter '%.200s': init.shape[%zu] = %lld exceeds %llu (2^53 - 1), the largest dimension a "
                 "checkpoint can record",
                 name.c_str(), i, static_cast<long long>(shape[i]), static_cast<unsigned long long>(kMaxDim));
    const uint64_t entry = st_entry_bound(name, shape.size());
    DS_CHECK(entry <= kMaxSafetensorsHeader - 64 && header_bytes + entry <= kMaxSafetensorsHeader - 64,
             DS_ERR_INVALID_ARGUMENT,
             "parameter '%.200s' (name of %zu bytes): the parameter names would make the model file's "
             "safetensors header larger than %llu bytes, the most a checkpoint reader accepts",
             name.c_str(), name.size(), static_cast<unsigned long long>(kMaxSafetensorsHeader));
    return entry;
}

}  // namespace ds::ckpt
