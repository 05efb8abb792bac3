// C ABI: an engine's per-rank memory report (the allocator's byte counters by
// category). Argument checks only.
#include "api/api_guard.h"
#include "api/handles.h"
#include "api/struct_abi.h"

#include <cstring>

static_assert(sizeof(ds_memory_report_t) == DS_MEMORY_REPORT_SIZE_V0, "ds_memory_report_t v0 layout is frozen");

using ds::api::engine_of;
using ds::api::require_arg;

namespace {

// Both reports: the engine and `out` checked, `fill` writes a zeroed v0
// struct, which is copied out up to the caller's struct_size.
template <class Fill>
void write_report(const ds_engine_t* engine, ds_memory_report_t* out, Fill fill) {
    const ds::Engine& e = engine_of(engine);
    require_arg(out, "out");
    ds::api::checked_output_size(out, DS_MEMORY_REPORT_SIZE_V0, "out");
    ds_memory_report_t local;
    std::memset(&local, 0, sizeof local);
    fill(e, &local);
    ds::api::write_versioned(out, DS_MEMORY_REPORT_SIZE_V0, sizeof local, "out", &local);
}

}  // namespace

extern "C" {

DS_API ds_status_t ds_engine_memory_report(const ds_engine_t* engine, ds_memory_report_t* out) {
    return DS_GUARDED({
        write_report(engine, out, [](const ds::Engine& e, ds_memory_report_t* r) {
            const ds::Allocator& a = e.allocator();
            // Pages ds_engine_offload_states gave back are not in memory.
            auto held = [&](ds::MemCategory c) { return a.bytes(c) - e.offloaded_released_bytes(c); };
            r->params_bytes = held(ds::MemCategory::Params);
            r->grads_bytes = held(ds::MemCategory::Grads);
            r->optimizer_state_bytes = held(ds::MemCategory::OptimizerState);
            r->buffers_bytes = held(ds::MemCategory::Buffers);
            r->total_bytes = a.total();
            for (int c = 0; c < static_cast<int>(ds::MemCategory::Count); ++c)
                r->total_bytes -= e.offloaded_released_bytes(static_cast<ds::MemCategory>(c));
            r->peak_total_bytes = a.peak_total();
        });
    });
}

DS_API ds_status_t ds_engine_disk_report(const ds_engine_t* engine, ds_memory_report_t* out) {
    return DS_GUARDED({
        write_report(engine, out, [](const ds::Engine& e, ds_memory_report_t* r) {
            e.disk_bytes(&r->params_bytes, &r->optimizer_state_bytes);
            // States ds_engine_offload_states moved to NVMe.
            r->params_bytes += e.offloaded_disk_bytes(ds::MemCategory::Params);
            r->grads_bytes += e.offloaded_disk_bytes(ds::MemCategory::Grads);
            r->optimizer_state_bytes += e.offloaded_disk_bytes(ds::MemCategory::OptimizerState);
            r->total_bytes = r->params_bytes + r->grads_bytes + r->optimizer_state_bytes;
            r->peak_total_bytes = r->total_bytes;
        });
    });
}

}  // extern "C"
