// The C ABI shim's guard: every exported function runs its body through
// ds::api::guarded(), which converts any exception into a status code and
// records the message as this thread's ds_last_error(). Nothing throws,
// aborts or exits across the ABI.
#pragma once

#include <new>
#include <string>

#include "api/handles.h"
#include "core/error.h"

namespace ds::api {

// Record `message` (prefixed with the failing function's name) as this
// thread's last error and return `status`.
ds_status_t set_error(const char* function, ds_status_t status, const char* message);

template <class F>
ds_status_t guarded(const char* function, F&& body) noexcept {
    CallScope scope(function);  // releases the handle engine_of() took, after the catch below
    try {
        body();
        scope.leave();
        return DS_OK;
    } catch (const ds::Error& e) {
        return set_error(function, e.status(), e.what());
    } catch (const std::bad_alloc&) {
        return set_error(function, DS_ERR_OUT_OF_MEMORY, "out of host memory");
    } catch (const std::exception& e) {
        return set_error(function, DS_ERR_INTERNAL, (std::string("internal error: ") + e.what()).c_str());
    } catch (...) {
        return set_error(function, DS_ERR_INTERNAL, "internal error: unknown exception");
    }
}

// Argument checks for the shim.
inline void require_arg(const void* p, const char* name) {
    DS_CHECK(p != nullptr, DS_ERR_INVALID_ARGUMENT, "argument '%s' is NULL", name);
}

// The frame of every ds_*_create* function: *out is NULL unless the call
// succeeds; `out` is checked first, then `make()` returns the new handle.
template <class T, class F>
ds_status_t guarded_create(const char* function, T** out, F&& make) noexcept {
    if (out) *out = nullptr;
    return guarded(function, [&]() {
        require_arg(out, "out");
        *out = make();
    });
}

}  // namespace ds::api

#define DS_GUARDED(...) ::ds::api::guarded(__func__, [&]() __VA_ARGS__)
#define DS_GUARDED_CREATE(out, ...) ::ds::api::guarded_create(__func__, out, [&]() __VA_ARGS__)
