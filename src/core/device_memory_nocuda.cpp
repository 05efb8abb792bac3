// device_memory.h's runtime in a build without CUDA: no device memory. The
// callers (allocator, Tensor, the engine) check available() first and
// report DS_ERR_UNSUPPORTED in their own words; reaching the others is a bug
// of theirs.
#include "core/device_memory.h"
#include "core/error.h"

namespace ds::device_memory::runtime {

bool available() noexcept { return false; }

void* alloc(size_t bytes, int32_t index, const char* what) {
    fail(DS_ERR_INTERNAL, "device_memory::alloc(%zu bytes for %s on cuda:%d) in a build without CUDA", bytes, what,
         index);
}

void free(void*) noexcept {}

void release_kernel_scratch() noexcept {}

void copy(void*, const void*, size_t, const char* what) {
    fail(DS_ERR_INTERNAL, "%s in a build without CUDA", what);
}

void copy_on_stream(void*, const void*, size_t, void*, const char* what) {
    fail(DS_ERR_INTERNAL, "%s in a build without CUDA", what);
}

void order_after(void*, void*, const char* what) { fail(DS_ERR_INTERNAL, "%s in a build without CUDA", what); }

void* stream_create(const char* what) { fail(DS_ERR_INTERNAL, "%s in a build without CUDA", what); }
void stream_destroy(void*) noexcept {}
void* event_create(const char* what) { fail(DS_ERR_INTERNAL, "%s in a build without CUDA", what); }
void event_destroy(void*) noexcept {}
void event_record(void*, void*, const char* what) { fail(DS_ERR_INTERNAL, "%s in a build without CUDA", what); }
void event_synchronize(void*, const char* what) { fail(DS_ERR_INTERNAL, "%s in a build without CUDA", what); }
void stream_wait_event(void*, void*, const char* what) { fail(DS_ERR_INTERNAL, "%s in a build without CUDA", what); }
void copy_async(void*, const void*, size_t, void*, const char* what) {
    fail(DS_ERR_INTERNAL, "%s in a build without CUDA", what);
}

void zero(void*, size_t, const char* what) { fail(DS_ERR_INTERNAL, "%s in a build without CUDA", what); }

void pin(void*, size_t bytes, const char* what) {
    fail(DS_ERR_INTERNAL, "pinning %zu bytes for %s in a build without CUDA", bytes, what);
}

void unpin(void*) noexcept {}

int select(int32_t index) { fail(DS_ERR_INTERNAL, "selecting cuda:%d in a build without CUDA", index); }

void restore(int) noexcept {}

}  // namespace ds::device_memory::runtime
