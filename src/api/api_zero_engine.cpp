// C ABI: an engine's per-rank memory report (the allocator's byte counters by
// category). Argument checks only.
#include "api/api_guard.h"
#include "api/handles.h"

using ds::api::engine_of;
using ds::api::require_arg;

extern "C" {

DS_API ds_status_t ds_engine_memory_report(const ds_engine_t* engine, ds_memory_report_t* out) {
    return DS_GUARDED({
        const ds::Engine& e = engine_of(engine);
        require_arg(out, "out");
        DS_CHECK(out->struct_size >= sizeof(ds_memory_report_t), DS_ERR_ABI_MISMATCH,
                 "out->struct_size = %zu is smaller than ds_memory_report_t (%zu bytes): set "
                 "report.struct_size = sizeof report",
                 out->struct_size, sizeof(ds_memory_report_t));
        const ds::Allocator& a = e.allocator();
        out->params_bytes = a.bytes(ds::MemCategory::Params);
        out->grads_bytes = a.bytes(ds::MemCategory::Grads);
        out->optimizer_state_bytes = a.bytes(ds::MemCategory::OptimizerState);
        out->buffers_bytes = a.bytes(ds::MemCategory::Buffers);
        out->total_bytes = a.total();
        out->peak_total_bytes = a.peak_total();
    });
}

}  // extern "C"
