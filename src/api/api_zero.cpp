// C ABI: ZeRO memory estimators. Argument checks only; the formulas live in
// src/zero/mem_estimator.
#include <cmath>

#include "api/api_guard.h"
#include "zero/mem_estimator.h"

using ds::api::require_arg;

namespace {

bool flag(int32_t value, const char* name) {
    DS_CHECK(value == 0 || value == 1, DS_ERR_INVALID_ARGUMENT, "argument '%s' = %d must be 0 or 1", name, value);
    return value == 1;
}

double factor_or_default(double f) { return std::isnan(f) ? ds::zero::kDefaultAdditionalBufferFactor : f; }

}  // namespace

extern "C" {

DS_API ds_status_t ds_estimate_zero2_mem(int64_t total_params, int32_t num_gpus_per_node, int32_t num_nodes,
                                         int32_t cpu_offload, double additional_buffer_factor,
                                         int64_t* cpu_bytes, int64_t* gpu_bytes) {
    return DS_GUARDED({
        require_arg(cpu_bytes, "cpu_bytes");
        require_arg(gpu_bytes, "gpu_bytes");
        const ds::zero::MemEstimate m = ds::zero::estimate_zero2_model_states_mem(
            total_params, num_gpus_per_node, num_nodes, flag(cpu_offload, "cpu_offload"),
            factor_or_default(additional_buffer_factor));
        *cpu_bytes = m.cpu_bytes;
        *gpu_bytes = m.gpu_bytes;
    });
}

DS_API ds_status_t ds_estimate_zero3_mem(int64_t total_params, int64_t largest_layer_params,
                                         int32_t num_gpus_per_node, int32_t num_nodes, int32_t cpu_offload,
                                         int32_t cpu_offload_params, int32_t zero_init,
                                         double additional_buffer_factor, int64_t* cpu_bytes,
                                         int64_t* gpu_bytes, int64_t* largest_layer_bytes) {
    return DS_GUARDED({
        require_arg(cpu_bytes, "cpu_bytes");
        require_arg(gpu_bytes, "gpu_bytes");
        const ds::zero::MemEstimate m = ds::zero::estimate_zero3_model_states_mem(
            total_params, largest_layer_params, num_gpus_per_node, num_nodes, flag(cpu_offload, "cpu_offload"),
            flag(cpu_offload_params, "cpu_offload_params"), flag(zero_init, "zero_init"),
            factor_or_default(additional_buffer_factor));
        *cpu_bytes = m.cpu_bytes;
        *gpu_bytes = m.gpu_bytes;
        if (largest_layer_bytes) *largest_layer_bytes = m.largest_layer_bytes;
    });
}

}  // extern "C"
