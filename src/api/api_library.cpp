// Library-level C functions: status text, last error, versions, build info.
#include <string>

#include "api/api_guard.h"
#include "api/build_info.h"
#include "core/log.h"

namespace ds::api {

static thread_local std::string t_last_error;

ds_status_t set_error(const char* function, ds_status_t status, const char* message) {
    try {
        t_last_error = std::string(function) + ": " + message;
    } catch (...) {
        // Out of memory while recording the message: keep the status.
    }
    return status;
}

}  // namespace ds::api

extern "C" {

DS_API const char* ds_status_string(ds_status_t s) {
    switch (s) {
        case DS_OK: return "DS_OK: success";
        case DS_ERR_INVALID_ARGUMENT: return "DS_ERR_INVALID_ARGUMENT: invalid argument";
        case DS_ERR_INVALID_HANDLE: return "DS_ERR_INVALID_HANDLE: invalid handle";
        case DS_ERR_INVALID_STATE: return "DS_ERR_INVALID_STATE: call out of order";
        case DS_ERR_INVALID_CONFIG: return "DS_ERR_INVALID_CONFIG: invalid configuration";
        case DS_ERR_UNSUPPORTED: return "DS_ERR_UNSUPPORTED: not supported by this library or build";
        case DS_ERR_NOT_FOUND: return "DS_ERR_NOT_FOUND: not found";
        case DS_ERR_OUT_OF_MEMORY: return "DS_ERR_OUT_OF_MEMORY: out of host memory";
        case DS_ERR_DEVICE_OUT_OF_MEMORY: return "DS_ERR_DEVICE_OUT_OF_MEMORY: out of device memory";
        case DS_ERR_DEVICE: return "DS_ERR_DEVICE: device error";
        case DS_ERR_COMM: return "DS_ERR_COMM: communication error";
        case DS_ERR_TIMEOUT: return "DS_ERR_TIMEOUT: timed out";
        case DS_ERR_IO: return "DS_ERR_IO: input/output error";
        case DS_ERR_FORMAT: return "DS_ERR_FORMAT: corrupt or incompatible data";
        case DS_ERR_ABI_MISMATCH: return "DS_ERR_ABI_MISMATCH: ABI or struct size mismatch";
        case DS_ERR_INTERNAL: return "DS_ERR_INTERNAL: internal error";
        default: return "unknown status";
    }
}

DS_API const char* ds_last_error(void) { return ds::api::t_last_error.c_str(); }

DS_API uint32_t ds_version(void) { return DS_VERSION_NUMBER; }

DS_API const char* ds_version_string(void) {
#define DS_STR2(x) #x
#define DS_STR(x) DS_STR2(x)
    return DS_STR(DS_VERSION_MAJOR) "." DS_STR(DS_VERSION_MINOR) "." DS_STR(DS_VERSION_PATCH);
}

DS_API uint32_t ds_abi_version(void) { return DS_ABI_VERSION; }

DS_API const char* ds_build_info(void) { return ds::api::build_info_json(); }

DS_API void ds_set_log_callback(ds_log_fn fn, void* user_data) { ds::Logger::set_global_sink(fn, user_data); }

}  // extern "C"
