// C ABI: listing an engine's parameters (name, shape, dtype, flags, numel).
// Reads the ParamStore's registration data, which every ZeRO stage keeps
// whole on every rank (only the values are partitioned).
#include <cstddef>
#include <cstring>

#include "api/api_guard.h"
#include "api/handles.h"
#include "api/struct_abi.h"
#include "core/dtype.h"

using ds::api::engine_of;
using ds::api::require_arg;

static_assert(sizeof(ds_param_info_t) == DS_PARAM_INFO_SIZE_V0 && offsetof(ds_param_info_t, ndim) == 24 &&
                  offsetof(ds_param_info_t, dtype) == 32 && offsetof(ds_param_info_t, numel) == 40,
              "ds_param_info_t v0 layout is frozen");

extern "C" {

DS_API ds_status_t ds_engine_num_params(const ds_engine_t* engine, int64_t* out) {
    return DS_GUARDED({
        const ds::Engine& e = engine_of(engine);
        require_arg(out, "out");
        *out = static_cast<int64_t>(e.params().size());
    });
}

DS_API ds_status_t ds_engine_param_info(const ds_engine_t* engine, int64_t index, ds_param_info_t* out) {
    return DS_GUARDED({
        const ds::Engine& e = engine_of(engine);
        require_arg(out, "out");
        ds::api::checked_output_size(out, DS_PARAM_INFO_SIZE_V0, "out");
        const auto& all = e.params().all();
        const int64_t n = static_cast<int64_t>(all.size());
        DS_CHECK(index >= 0 && index < n, DS_ERR_INVALID_ARGUMENT,
                 "index = %lld is out of range: the engine has %lld parameters", static_cast<long long>(index),
                 static_cast<long long>(n));
        const ds::Param& p = all[static_cast<size_t>(index)];
        ds_param_info_t info;
        std::memset(&info, 0, sizeof info);
        info.name = p.name.c_str();
        info.ndim = static_cast<int32_t>(p.shape.size());
        info.shape = p.shape.empty() ? nullptr : p.shape.data();
        info.flags = (p.trainable ? DS_PARAM_TRAINABLE : 0u) | (p.expert ? DS_PARAM_EXPERT : 0u);
        info.dtype = ds::dtype_to_dl(e.working_dtype());
        info.numel = p.numel;
        ds::api::write_versioned(out, DS_PARAM_INFO_SIZE_V0, sizeof info, "out", &info);
    });
}

}  // extern "C"
