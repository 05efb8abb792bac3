// Opaque handle structs behind the C ABI and the registry of live handles.
// A handle is valid only while registered, so a NULL, destroyed or foreign
// pointer is detected without dereferencing it.
#pragma once

#include <cstdint>
#include <memory>

#include "core/error.h"
#include "engine/engine.h"

struct ds_engine {
    static constexpr uint32_t kMagic = 0x45535044u;  // "DSPE"
    uint32_t magic = kMagic;
    std::unique_ptr<ds::Engine> impl;
};

namespace ds::api {

void register_handle(const void* h);
// Returns true if it was registered (and removes it).
bool unregister_handle(const void* h);
bool is_registered(const void* h);

// The engine behind a handle, or throw DS_ERR_INVALID_HANDLE naming the argument.
ds::Engine& engine_of(ds_engine_t* e, const char* arg = "engine");
const ds::Engine& engine_of(const ds_engine_t* e, const char* arg = "engine");

}  // namespace ds::api
