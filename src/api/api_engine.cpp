// C ABI: engine creation, destruction and introspection. Argument checks and
// handle validation only; the logic lives in src/engine.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "api/api_guard.h"
#include "api/comm_handles.h"
#include "api/engine_create.h"
#include "api/handles.h"
#include "api/struct_abi.h"

using ds::api::engine_of;
using ds::api::require_arg;

namespace {

// Copy the caller's options, reading min(struct_size, known) bytes; the
// engine keeps a reference on the communicator, if one is given.
static_assert(sizeof(ds_engine_options_t) == DS_ENGINE_OPTIONS_SIZE_V0 &&
                  offsetof(ds_engine_options_t, log_level) == 48 &&
                  offsetof(ds_engine_options_t, reserved0) == 52,
              "ds_engine_options_t v0 layout is frozen");

ds::EngineOptions read_options(const ds_engine_options_t* caller,
                               std::shared_ptr<ds::comm::Communicator>* comm) {
    ds::EngineOptions out;
    if (!caller) return out;
    ds_engine_options_t local;
    ds_engine_options_init(&local, sizeof local);
    const ds_engine_options_t* o = &local;
    ds::api::read_versioned(caller, DS_ENGINE_OPTIONS_SIZE_V0, sizeof local, "options", &local);
    DS_CHECK(o->reserved0 == 0, DS_ERR_ABI_MISMATCH,
             "options.reserved0 (offset %zu) = %d must be 0: call ds_engine_options_init(&opts, "
             "sizeof opts)",
             offsetof(ds_engine_options_t, reserved0), o->reserved0);
    if (o->comm) *comm = ds::api::comm_retain(o->comm, "options.comm");
    // Read the enum's bytes as an integer: a caller may pass any value, and
    // loading an out-of-range enum is undefined behaviour.
    static_assert(sizeof(o->device.device_type) == sizeof(int32_t), "DLDeviceType is 32-bit");
    std::memcpy(&out.device_type, &o->device.device_type, sizeof(int32_t));
    out.device_index = o->device.device_id;
    out.cuda_stream = o->cuda_stream;
    out.log_callback = o->log_callback;
    out.log_user_data = o->log_user_data;
    out.log_level = o->log_level;
    if (out.log_level != DS_UNSET_I32)
        DS_CHECK(out.log_level >= DS_LOG_OFF && out.log_level <= DS_LOG_DEBUG, DS_ERR_INVALID_ARGUMENT,
                 "options.log_level = %d is out of range [0, 4] (or DS_UNSET_I32)", out.log_level);
    return out;
}

}  // namespace

namespace ds::api {

ds_engine_t* create_engine(const std::string& json, const ds_engine_options_t* opts,
                           const std::function<void(ds::Engine&)>& setup) {
    std::shared_ptr<ds::comm::Communicator> comm;
    ds::EngineOptions options = read_options(opts, &comm);
    auto handle = std::make_unique<ds_engine>();
    handle->impl = std::make_unique<ds::Engine>(json, options, std::move(comm));
    const int64_t tp = handle->impl->config().sections.tensor_parallel.autotp_size;
    DS_CHECK(tp <= 1, DS_ERR_UNSUPPORTED,
             "tensor_parallel.autotp_size = %lld: tensor parallelism splits a built-in GPT model's layers "
             "(ds_engine_create_with_model); host-driven parameters cannot be split",
             static_cast<long long>(tp));
    if (setup) setup(*handle->impl);
    handle->impl->call_ends();  // a model's initial copies before the caller's stream uses them
    ds::api::register_handle(handle.get());
    return handle.release();
}

ds_engine_t* create_engine_with(const ds_engine_options_t* opts, const EngineMaker& make) {
    std::shared_ptr<ds::comm::Communicator> comm;
    ds::EngineOptions options = read_options(opts, &comm);
    auto handle = std::make_unique<ds_engine>();
    handle->impl = make(options, std::move(comm));
    ds::api::register_handle(handle.get());
    return handle.release();
}

}  // namespace ds::api

using ds::api::create_engine;

extern "C" {

DS_API void ds_engine_options_init(ds_engine_options_t* o, size_t struct_size) {
    ds_engine_options_t d = ds::api::zeroed<ds_engine_options_t>(struct_size);
    d.comm = nullptr;
    d.device.device_type = kDLCPU;
    d.device.device_id = 0;
    d.cuda_stream = nullptr;
    d.log_callback = nullptr;
    d.log_user_data = nullptr;
    d.log_level = DS_UNSET_I32;
    ds::api::init_versioned(o, struct_size, sizeof d, &d);
}

DS_API ds_status_t ds_engine_create(const char* config_json, const ds_engine_options_t* opts,
                                    ds_engine_t** out) {
    return DS_GUARDED_CREATE(out, {
        require_arg(config_json, "config_json");
        return create_engine(config_json, opts);
    });
}

DS_API ds_status_t ds_engine_create_from_file(const char* path, const ds_engine_options_t* opts,
                                              ds_engine_t** out) {
    return DS_GUARDED_CREATE(out, {
        require_arg(path, "path");
        std::ifstream f(path, std::ios::binary);
        DS_CHECK(f.good(), DS_ERR_IO, "cannot open config file '%s': %s", path, std::strerror(errno));
        std::ostringstream ss;
        ss << f.rdbuf();
        DS_CHECK(!f.bad(), DS_ERR_IO, "cannot read config file '%s'", path);
        try {
            return create_engine(ss.str(), opts);
        } catch (const ds::Error& e) {
            throw ds::Error(e.status(), std::string(path) + ": " + e.what());
        }
    });
}

DS_API void ds_engine_destroy(ds_engine_t* engine) {
    // Local and non-blocking: a call still inside on another thread keeps the
    // engine alive and frees it when it leaves (handles.h).
    if (engine) ds::api::destroy_handle(engine);
}

DS_API ds_status_t ds_engine_config_json(const ds_engine_t* engine, const char** out) {
    return DS_GUARDED({
        const ds::Engine& e = engine_of(engine);
        require_arg(out, "out");
        *out = e.resolved_config_json().c_str();
    });
}

DS_API ds_status_t ds_engine_comms_log_summary(ds_engine_t* engine, const char** out) {
    return DS_GUARDED({
        ds::Engine& e = engine_of(engine);
        const std::string& text = e.log_comms_summary();
        if (out) *out = text.c_str();
    });
}

DS_API ds_status_t ds_engine_rank(const ds_engine_t* engine, int32_t* out) {
    return DS_GUARDED({
        const ds::Engine& e = engine_of(engine);
        require_arg(out, "out");
        *out = e.rank();
    });
}

DS_API ds_status_t ds_engine_world_size(const ds_engine_t* engine, int32_t* out) {
    return DS_GUARDED({
        const ds::Engine& e = engine_of(engine);
        require_arg(out, "out");
        *out = e.world_size();
    });
}

}  // extern "C"
