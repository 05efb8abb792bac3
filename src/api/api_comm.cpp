// C ABI: communicators. Argument checks and handle validation only; the
// logic lives in src/comm.
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "api/api_guard.h"
#include "api/comm_handles.h"
#include "api/struct_abi.h"
#include "comm/factory.h"

using ds::api::comm_retain;
using ds::api::require_arg;

namespace {

static_assert(static_cast<int32_t>(ds::comm::Backend::Auto) == DS_COMM_BACKEND_AUTO &&
                  static_cast<int32_t>(ds::comm::Backend::Local) == DS_COMM_BACKEND_LOCAL &&
                  static_cast<int32_t>(ds::comm::Backend::Mpi) == DS_COMM_BACKEND_MPI &&
                  static_cast<int32_t>(ds::comm::Backend::Nccl) == DS_COMM_BACKEND_NCCL,
              "ds::comm::Backend must equal the public DS_COMM_BACKEND_* values");

// Options with the environment applied, then the caller's fields
// (min(struct_size, known) bytes; every field has an unset value).
static_assert(DS_COMM_SPLIT_UNDEFINED == ds::comm::kSplitUndefined, "DS_COMM_SPLIT_UNDEFINED");

static_assert(sizeof(ds_comm_options_t) == DS_COMM_OPTIONS_SIZE_V0, "ds_comm_options_t v0 layout is frozen");

ds::comm::Options read_options(const ds_comm_options_t* caller) {
    ds::comm::Options out = ds::comm::options_from_env();
    if (!caller) return out;
    ds_comm_options_t local;
    ds_comm_options_init(&local, sizeof local);
    const ds_comm_options_t* o = &local;
    ds::api::read_versioned(caller, DS_COMM_OPTIONS_SIZE_V0, sizeof local, "options", &local);
    if (o->timeout_ms != DS_UNSET_I32) {
        DS_CHECK(o->timeout_ms > 0, DS_ERR_INVALID_ARGUMENT,
                 "options.timeout_ms = %d must be > 0 (milliseconds) or DS_UNSET_I32", o->timeout_ms);
        out.timeout_ms = o->timeout_ms;
    }
    if (o->debug != DS_UNSET_I32) {
        DS_CHECK(o->debug == 0 || o->debug == 1, DS_ERR_INVALID_ARGUMENT,
                 "options.debug = %d must be 0, 1 or DS_UNSET_I32", o->debug);
        out.debug = o->debug == 1;
    }
    if (o->backend != DS_UNSET_I32) {
        DS_CHECK(o->backend >= DS_COMM_BACKEND_AUTO && o->backend <= DS_COMM_BACKEND_NCCL,
                 DS_ERR_INVALID_ARGUMENT,
                 "options.backend = %d is not a DS_COMM_BACKEND_* value (AUTO 0, LOCAL 1, MPI 2, NCCL 3)",
                 o->backend);
        out.backend = static_cast<ds::comm::Backend>(o->backend);
    }
    if (o->device != DS_UNSET_I32) {
        DS_CHECK(o->device >= 0, DS_ERR_INVALID_ARGUMENT,
                 "options.device = %d must be a CUDA ordinal >= 0 or DS_UNSET_I32", o->device);
        out.device = o->device;
    }
    return out;
}

// ds_comm_finalize is the one communicator call that may not overlap itself
// (rank/size/backend/abort are safe from any thread): a second concurrent
// finalize of the same communicator fails instead of racing the teardown.
class FinalizeGuard {
public:
    explicit FinalizeGuard(const ds::comm::Communicator* c) : c_(c) {
        std::lock_guard<std::mutex> lock(mu());
        DS_CHECK(busy().insert(c).second, DS_ERR_INVALID_STATE,
                 "concurrent call on communicator (another thread is inside ds_comm_finalize)");
    }
    ~FinalizeGuard() {
        std::lock_guard<std::mutex> lock(mu());
        busy().erase(c_);
    }
    FinalizeGuard(const FinalizeGuard&) = delete;
    FinalizeGuard& operator=(const FinalizeGuard&) = delete;

private:
    static std::mutex& mu() {
        static std::mutex m;
        return m;
    }
    static std::unordered_set<const ds::comm::Communicator*>& busy() {
        static auto* s = new std::unordered_set<const ds::comm::Communicator*>();  // never destroyed
        return *s;
    }
    const ds::comm::Communicator* c_;
};

}  // namespace

extern "C" {

DS_API void ds_comm_options_init(ds_comm_options_t* o, size_t struct_size) {
    ds_comm_options_t d = ds::api::zeroed<ds_comm_options_t>(struct_size);
    d.timeout_ms = DS_UNSET_I32;
    d.debug = DS_UNSET_I32;
    d.backend = DS_COMM_BACKEND_AUTO;
    d.device = DS_UNSET_I32;
    ds::api::init_versioned(o, struct_size, sizeof d, &d);
}

DS_API ds_status_t ds_comm_create_world(const ds_comm_options_t* opts, ds_comm_t** out) {
    return DS_GUARDED_CREATE(out, { return ds::api::comm_handle_create(ds::comm::make_world(read_options(opts))); });
}

DS_API ds_status_t ds_comm_create_mpi(int32_t mpi_comm_f, const ds_comm_options_t* opts, ds_comm_t** out) {
    return DS_GUARDED_CREATE(out, {
        return ds::api::comm_handle_create(ds::comm::make_from_mpi(mpi_comm_f, read_options(opts)));
    });
}

DS_API ds_status_t ds_comm_split(const ds_comm_t* comm, int32_t color, int32_t key, ds_comm_t** out) {
    return DS_GUARDED_CREATE(out, {
        auto c = comm_retain(comm);
        std::shared_ptr<ds::comm::Communicator> part = c->split(color, key);
        return part ? ds::api::comm_handle_create(std::move(part)) : nullptr;
    });
}

DS_API ds_status_t ds_comm_rank(const ds_comm_t* comm, int32_t* out) {
    return DS_GUARDED({
        auto c = comm_retain(comm);
        require_arg(out, "out");
        *out = c->rank();
    });
}

DS_API ds_status_t ds_comm_size(const ds_comm_t* comm, int32_t* out) {
    return DS_GUARDED({
        auto c = comm_retain(comm);
        require_arg(out, "out");
        *out = c->size();
    });
}

DS_API ds_status_t ds_comm_backend(const ds_comm_t* comm, int32_t* out) {
    return DS_GUARDED({
        auto c = comm_retain(comm);
        require_arg(out, "out");
        *out = static_cast<int32_t>(c->backend());
    });
}

DS_API ds_status_t ds_comm_finalize(ds_comm_t* comm) {
    return DS_GUARDED({
        auto c = comm_retain(comm);
        FinalizeGuard guard(c.get());
        c->finalize();
    });
}

DS_API ds_status_t ds_comm_abort(ds_comm_t* comm, const char* reason) {
    return DS_GUARDED({
        comm_retain(comm)->abort(reason && *reason ? reason : "ds_comm_abort was called");
    });
}

DS_API void ds_comm_destroy(ds_comm_t* comm) {
    try {
        ds::api::comm_handle_destroy(comm);  // NULL or dead handles are ignored
    } catch (...) {
        // Cannot fail: nothing to report.
    }
}

}  // extern "C"
