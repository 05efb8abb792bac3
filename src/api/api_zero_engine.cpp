// C ABI: an engine's per-rank memory report (the allocator's byte counters by
// category). Argument checks only.
#include "api/api_guard.h"
#include "api/handles.h"
#include "api/struct_abi.h"

#include <cstring>

static_assert(sizeof(ds_memory_report_t) == DS_MEMORY_REPORT_SIZE_V0, "ds_memory_report_t v0 layout is frozen");

using ds::api::engine_of;
using ds::api::require_arg;

extern "C" {

DS_API ds_status_t ds_engine_memory_report(const ds_engine_t* engine, ds_memory_report_t* out) {
    return DS_GUARDED({
        const ds::Engine& e = engine_of(engine);
        require_arg(out, "out");
        ds::api::checked_output_size(out, DS_MEMORY_REPORT_SIZE_V0, "out");
        ds_memory_report_t local;
        std::memset(&local, 0, sizeof local);
        const ds::Allocator& a = e.allocator();
        ds_memory_report_t* r = &local;
        r->params_bytes = a.bytes(ds::MemCategory::Params);
        r->grads_bytes = a.bytes(ds::MemCategory::Grads);
        r->optimizer_state_bytes = a.bytes(ds::MemCategory::OptimizerState);
        r->buffers_bytes = a.bytes(ds::MemCategory::Buffers);
        r->total_bytes = a.total();
        r->peak_total_bytes = a.peak_total();
        ds::api::write_versioned(out, DS_MEMORY_REPORT_SIZE_V0, sizeof local, "out", &local);
    });
}

DS_API ds_status_t ds_engine_disk_report(const ds_engine_t* engine, ds_memory_report_t* out) {
    return DS_GUARDED({
        const ds::Engine& e = engine_of(engine);
        require_arg(out, "out");
        ds::api::checked_output_size(out, DS_MEMORY_REPORT_SIZE_V0, "out");
        ds_memory_report_t local;
        std::memset(&local, 0, sizeof local);
        e.disk_bytes(&local.params_bytes, &local.optimizer_state_bytes);
        local.total_bytes = local.params_bytes + local.optimizer_state_bytes;
        local.peak_total_bytes = local.total_bytes;
        ds::api::write_versioned(out, DS_MEMORY_REPORT_SIZE_V0, sizeof local, "out", &local);
    });
}

}  // extern "C"
