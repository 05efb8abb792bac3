// ZeRO model-states memory estimators (DEEPSPEED_SEMANTICS.md §10): DeepSpeed 0.19.6's
// estimate_zero2_model_states_mem_needs (runtime/zero/stage_1_and_2.py) and
// estimate_zero3_model_states_mem_needs (runtime/zero/stage3.py), with the
// same integer/float evaluation order so results agree to the byte, and the
// tables their *_all_cold functions print.
#pragma once

#include <cstdint>
#include <string>

namespace ds::zero {

// DeepSpeed's additional_buffer_factor default.
constexpr double kDefaultAdditionalBufferFactor = 1.5;

// Parameter counts above this are rejected: every integer the formulas form
// (18 * params) stays exactly representable in a double, so the float steps
// round exactly as Python's int/float arithmetic does.
constexpr int64_t kMaxEstimatorParams = (int64_t{1} << 53) / 18;

struct MemEstimate {
    int64_t cpu_bytes = 0;            // per node (CPU RAM)
    int64_t gpu_bytes = 0;            // per GPU
    int64_t largest_layer_bytes = 0;  // ZeRO-3 only: 4 * largest_layer_params
};

// ZeRO-2, T = nodes * gpus_per_node, f = factor:
//   cpu_offload: gpu = 2P, cpu = P * max(4T, 16) * f
//   otherwise:   gpu = 2P + int(18P / T), cpu = 4P * gpus_per_node * f
// Arguments are checked (DS_ERR_INVALID_ARGUMENT naming the argument):
// 0 <= total_params <= kMaxEstimatorParams, gpus_per_node >= 1, num_nodes >= 1,
// factor finite and >= 0.
MemEstimate estimate_zero2_model_states_mem(int64_t total_params, int32_t gpus_per_node, int32_t num_nodes,
                                            bool cpu_offload, double additional_buffer_factor);

// ZeRO-3, L = largest layer's params, LL = 4L, gf = 1 / num_nodes (DEEPSPEED_SEMANTICS.md §10 table).
// With cpu_offload false, cpu_offload_params is ignored (as in DeepSpeed).
MemEstimate estimate_zero3_model_states_mem(int64_t total_params, int64_t largest_layer_params,
                                            int32_t gpus_per_node, int32_t num_nodes, bool cpu_offload,
                                            bool cpu_offload_params, bool zero_init,
                                            double additional_buffer_factor);

// The text estimate_zero2_model_states_mem_needs_all_cold prints (header,
// column titles, one row per option: offload then no offload), each line
// ending in '\n'. Rows are " %7.2fGB | %6.2fGB | <options>" in GiB.
std::string format_zero2_estimates(int64_t total_params, int32_t gpus_per_node, int32_t num_nodes,
                                   double additional_buffer_factor);

// The text estimate_zero3_model_states_mem_needs_all_cold prints: six rows in
// DeepSpeed's order (offload_optimizer cpu then none; offload_param cpu then
// none; zero_init 1 then 0; offload_param=cpu without offload_optimizer is skipped).
std::string format_zero3_estimates(int64_t total_params, int64_t largest_layer_params, int32_t gpus_per_node,
                                   int32_t num_nodes, double additional_buffer_factor);

}  // namespace ds::zero
