// Opaque handle structs behind the C ABI and the registry of live handles.
// A handle is valid only while registered, so a NULL, destroyed or foreign
// pointer is detected without dereferencing it.
//
// Calls and lifetime (DESIGN.md "Threads"): every ds_* entry point runs
// inside a CallScope (api_guard.h). engine_of() takes a reference on the
// handle for the rest of the call and marks it in use: a mutating call
// (non-const handle) is exclusive; const getters share it with each other.
// A second, conflicting entry from another thread fails with
// DS_ERR_INVALID_STATE "concurrent call on engine (another thread is inside
// ds_xxx)". ds_engine_destroy unregisters the handle at once (later calls get
// DS_ERR_INVALID_HANDLE) and drops the registry's reference; the last call
// to leave frees the engine, so nothing is freed under a running call and
// destroy never waits.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/error.h"
#include "engine/engine.h"

struct ds_engine {
    static constexpr uint32_t kMagic = 0x45535044u;  // "DSPE"
    uint32_t magic = kMagic;
    std::unique_ptr<ds::Engine> impl;
    // References: 1 held by the registry while live, plus 1 per call inside.
    std::atomic<int64_t> refs{1};
    // Use: -1 = one mutating call inside; n > 0 = n const calls inside; 0 = idle.
    std::atomic<int32_t> use{0};
    // The public name of a call inside (for the concurrent-entry message).
    std::atomic<const char*> inside{""};
};

namespace ds::api {

void register_handle(ds_engine_t* h);
// Unregisters a live handle and drops the registry's reference (the engine
// is freed now, or when the last call inside leaves). False if not live.
bool destroy_handle(ds_engine_t* h);

// The engine behind a handle for the rest of the current ds_* call, or throw
// DS_ERR_INVALID_HANDLE naming the argument / DS_ERR_INVALID_STATE on a
// concurrent call. Non-const: exclusive use; const: shared with const calls.
ds::Engine& engine_of(ds_engine_t* e, const char* arg = "engine");
const ds::Engine& engine_of(const ds_engine_t* e, const char* arg = "engine");

// Per-call bookkeeping, one per ds_* call on the caller's stack (made by
// guarded()); releases what engine_of() took when the call leaves.
class CallScope {
public:
    explicit CallScope(const char* function) noexcept;
    ~CallScope();
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;

    const char* function() const { return function_; }
    // A successful call's end on its engine (Engine::call_ends); may throw.
    // The destructor does it, quietly, for a call that failed.
    void leave();

private:
    friend struct HandleAccess;
    const char* function_;
    CallScope* prev_;
    ds_engine_t* held_ = nullptr;  // at most one engine per call
    bool exclusive_ = false;
    bool left_ = false;
};

}  // namespace ds::api
