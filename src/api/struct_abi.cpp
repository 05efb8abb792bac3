#include "api/struct_abi.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace ds::api {

namespace {

size_t struct_size_of(const void* p) {
    size_t n = 0;
    std::memcpy(&n, p, sizeof n);  // struct_size is the first member of every public struct
    return n;
}

void check_size(size_t size, size_t v0_size, const char* name) {
    DS_CHECK(size >= v0_size, DS_ERR_ABI_MISMATCH,
             "%s.struct_size = %zu is smaller than the first released layout (%zu bytes): set it "
             "with sizeof (or the *_options_init function)",
             name, size, v0_size);
    DS_CHECK(size <= kMaxStructSize, DS_ERR_ABI_MISMATCH,
             "%s.struct_size = %zu is not a struct size (more than %zu bytes)", name, size,
             kMaxStructSize);
}

}  // namespace

void read_versioned(const void* src, size_t v0_size, size_t known, const char* name, void* dst) {
    const size_t size = struct_size_of(src);
    check_size(size, v0_size, name);
    std::memcpy(dst, src, std::min(size, known));
    const auto* bytes = static_cast<const unsigned char*>(src);
    for (size_t i = known; i < size; ++i)
        DS_CHECK(bytes[i] == 0, DS_ERR_ABI_MISMATCH,
                 "%s: byte at offset %zu is not zero, but this library knows only the first %zu "
                 "bytes (struct_size %zu): the caller sets a field of a newer version that this "
                 "library does not have",
                 name, i, known, size);
}

size_t checked_output_size(const void* dst, size_t v0_size, const char* name) {
    const size_t size = struct_size_of(dst);
    check_size(size, v0_size, name);
    return size;
}

void init_versioned(void* dst, size_t struct_size, size_t known, const void* defaults) {
    if (!dst || struct_size < sizeof(size_t)) return;
    auto* out = static_cast<unsigned char*>(dst);
    if (struct_size > known) std::memset(out + known, 0, std::min(struct_size, kMaxStructSize) - known);
    std::memcpy(out, defaults, std::min(struct_size, known));
}

void write_versioned(void* dst, size_t v0_size, size_t known, const char* name, const void* src) {
    const size_t size = checked_output_size(dst, v0_size, name);
    auto* out = static_cast<unsigned char*>(dst);
    const size_t n = std::min(size, known);
    // Everything after struct_size, which stays the caller's.
    std::memcpy(out + sizeof(size_t), static_cast<const unsigned char*>(src) + sizeof(size_t),
                n - sizeof(size_t));
    if (size > known) std::memset(out + known, 0, size - known);
}

}  // namespace ds::api
