// Fuzz target for the safetensors reader (ckpt/safetensors_read.cpp). Any
// input must either parse into tensors that lie inside the input and tile
// its data section, or be rejected with DS_ERR_FORMAT; nothing else (no
// crash, no other exception, no out-of-bounds read under the sanitizers).
// Built for libFuzzer as `fuzz_safetensors` with clang; replay_main.cpp runs
// it over tests/fuzz/corpus/safetensors as an ordinary test.
#include <cstddef>
#include <cstdint>

#include "ckpt/safetensors.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const ds::ckpt::StHeader h = ds::ckpt::parse_safetensors(data, size, "fuzz-input");
        uint64_t pos = 0;
        for (const ds::ckpt::StTensor& t : h.tensors) {
            if (t.begin != pos || t.end < t.begin || h.data_start + t.end > size) __builtin_trap();
            if (h.find(t.name) != &t) __builtin_trap();
            pos = t.end;
        }
        if (h.data_start + pos != size) __builtin_trap();
    } catch (const ds::Error& e) {
        if (e.status() != DS_ERR_FORMAT) __builtin_trap();
    }
    return 0;
}
