// Size-prefixed structs across the ABI (DESIGN.md "ABI evolution"). Every
// public struct starts with size_t struct_size and only grows at the end.
// A caller built against an older header passes a smaller struct_size, one
// built against a newer header a larger one:
//   input structs:  struct_size >= the v0 size (else DS_ERR_ABI_MISMATCH);
//                   the library reads min(struct_size, known) bytes, and the
//                   bytes past `known` must be zero (a newer caller setting a
//                   field this library lacks fails loudly instead of being
//                   silently ignored: the Linux copy_struct_from_user rule);
//   output structs: struct_size >= the v0 size; the library writes
//                   min(struct_size, known) bytes and zeroes the caller's
//                   bytes past `known` (up to struct_size).
#pragma once

#include <cstddef>
#include <cstring>

namespace ds::api {

// Largest struct_size accepted (a bigger one is surely not a struct size).
constexpr size_t kMaxStructSize = 65536;

// Reads the caller's input struct `src` into `dst` (`known` bytes, already
// holding the defaults). `name` names the struct for messages ("options").
void read_versioned(const void* src, size_t v0_size, size_t known, const char* name, void* dst);

// The caller's struct_size of an output struct, checked (>= v0, <= max).
size_t checked_output_size(const void* dst, size_t v0_size, const char* name);

// A *_options_init function: `zeroed` gives the local struct to fill with
// the defaults (all zero, struct_size set); init_versioned writes it into the
// caller's struct `dst` (nothing when dst is NULL or struct_size is smaller
// than a size_t): min(struct_size, known) bytes, and zeroes the caller's
// bytes past `known` (a newer caller's fields this library lacks), up to
// min(struct_size, kMaxStructSize).
template <class T>
T zeroed(size_t struct_size) {
    T d;
    std::memset(&d, 0, sizeof d);
    d.struct_size = struct_size;
    return d;
}
void init_versioned(void* dst, size_t struct_size, size_t known, const void* defaults);

// Writes `src` (`known` bytes, a local struct) into the caller's output
// struct `dst`, keeping dst's struct_size; checks the size as above.
void write_versioned(void* dst, size_t v0_size, size_t known, const char* name, const void* src);

}  // namespace ds::api
