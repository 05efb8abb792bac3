// C ABI: ds_engine_offload_states / ds_engine_reload_states /
// ds_engine_empty_partition_cache (engine/engine_offload_states.cpp).
#include "api/api_guard.h"
#include "api/handles.h"

using ds::api::engine_of;

extern "C" {

DS_API ds_status_t ds_engine_offload_states(ds_engine_t* engine, uint32_t which, int32_t device,
                                            const char* nvme_path) {
    return DS_GUARDED({ engine_of(engine).offload_states(which, device, nvme_path); });
}

DS_API ds_status_t ds_engine_reload_states(ds_engine_t* engine) {
    return DS_GUARDED({ engine_of(engine).reload_states(); });
}

DS_API ds_status_t ds_engine_empty_partition_cache(ds_engine_t* engine) {
    return DS_GUARDED({ engine_of(engine).empty_partition_cache(); });
}

}  // extern "C"
