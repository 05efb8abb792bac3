// ZeRO model-states memory estimators (DEEPSPEED_SEMANTICS.md §10). See mem_estimator.h.
//
// DeepSpeed evaluates these in Python: products of ints stay exact ints, a
// product with a float converts the int to float first, `/` is true division
// and int() truncates. The code below keeps that order step by step; with
// params <= kMaxEstimatorParams every int operand is exact in a double, so
// each float operation rounds exactly as Python's does.
#include "zero/mem_estimator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace ds::zero {

namespace {

void check_common(int64_t total_params, int32_t gpus_per_node, int32_t num_nodes, double factor) {
    DS_CHECK(total_params >= 0 && total_params <= kMaxEstimatorParams, DS_ERR_INVALID_ARGUMENT,
             "total_params = %lld is out of range [0, %lld]", static_cast<long long>(total_params),
             static_cast<long long>(kMaxEstimatorParams));
    DS_CHECK(gpus_per_node >= 1, DS_ERR_INVALID_ARGUMENT, "num_gpus_per_node = %d must be >= 1", gpus_per_node);
    DS_CHECK(num_nodes >= 1, DS_ERR_INVALID_ARGUMENT, "num_nodes = %d must be >= 1", num_nodes);
    DS_CHECK(std::isfinite(factor) && factor >= 0.0, DS_ERR_INVALID_ARGUMENT,
             "additional_buffer_factor = %g must be finite and >= 0", factor);
}

// Exact int * int (Python ints do not overflow; ours must not either).
int64_t mul(int64_t a, int64_t b, const char* what) {
    int64_t out = 0;
    DS_CHECK(!__builtin_mul_overflow(a, b, &out), DS_ERR_INVALID_ARGUMENT,
             "%s overflows a 64-bit byte count", what);
    return out;
}

// Python int(x) for the final byte counts.
int64_t to_bytes(double x, const char* what) {
    DS_CHECK(x >= 0.0 && x < 9223372036854775808.0, DS_ERR_INVALID_ARGUMENT,
             "%s estimate (%g bytes) does not fit a 64-bit byte count", what, x);
    return static_cast<int64_t>(x);
}

// Python int(a / b) for non-negative ints a (exact in a double) and b >= 1.
int64_t int_true_div(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<double>(a) / static_cast<double>(b));
}

// Python `P * max(int_term, float_term) * f`: max() keeps the int unless the
// float is strictly larger, and the type it returns decides whether P * it is
// an exact int product or a float product.
double times_max(int64_t P, int64_t int_term, double float_term, double f, const char* what) {
    if (float_term > static_cast<double>(int_term)) return static_cast<double>(P) * float_term * f;
    return static_cast<double>(mul(P, int_term, what)) * f;
}

std::string format_row(const MemEstimate& m, const std::string& options) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " %7.2fGB | %6.2fGB | ", static_cast<double>(m.cpu_bytes) / 1073741824.0,
                  static_cast<double>(m.gpu_bytes) / 1073741824.0);
    return buf + options + "\n";
}

// f'{OffloadDeviceEnum.cpu:4}' -> "cpu " (str-Enum formatted as its value, width 4).
const char* device_name(bool offloaded) { return offloaded ? "cpu " : "none"; }

std::string header(int32_t gpus_per_node, int32_t num_nodes) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "Estimated memory needed for params, optim states and gradients for a:\n"
                  "HW: Setup with %d %s, %d %s per node.\n",
                  num_nodes, num_nodes > 1 ? "nodes" : "node", gpus_per_node, gpus_per_node > 1 ? "GPUs" : "GPU");
    return buf;
}

// Python int(n / 1e6).
long long millions(int64_t n) { return static_cast<long long>(static_cast<double>(n) / 1e6); }

double resolve_factor(double f) { return std::isnan(f) ? kDefaultAdditionalBufferFactor : f; }

}  // namespace

MemEstimate estimate_zero2_model_states_mem(int64_t P, int32_t gpus_per_node, int32_t num_nodes, bool cpu_offload,
                                            double f) {
    check_common(P, gpus_per_node, num_nodes, f);
    const int64_t G = gpus_per_node;
    const int64_t T = mul(num_nodes, G, "num_nodes * num_gpus_per_node");
    MemEstimate m;
    if (cpu_offload) {
        m.gpu_bytes = 2 * P;
        const int64_t k = std::max<int64_t>(mul(4, T, "4 * total_gpus"), 16);
        m.cpu_bytes = to_bytes(static_cast<double>(mul(P, k, "cpu estimate")) * f, "cpu");
    } else {
        // 2 = 16-bit params; 18 = 16-bit grads 2 + fp32 grads 4 + fp32 params 4 + Adam states 8.
        m.gpu_bytes = 2 * P + int_true_div(18 * P, T);
        m.cpu_bytes = to_bytes(static_cast<double>(mul(4 * P, G, "cpu estimate")) * f, "cpu");
    }
    return m;
}

MemEstimate estimate_zero3_model_states_mem(int64_t P, int64_t L, int32_t gpus_per_node, int32_t num_nodes,
                                            bool cpu_offload, bool cpu_offload_params, bool zero_init, double f) {
    check_common(P, gpus_per_node, num_nodes, f);
    DS_CHECK(L >= 0 && L <= kMaxEstimatorParams, DS_ERR_INVALID_ARGUMENT,
             "largest_layer_params = %lld is out of range [0, %lld]", static_cast<long long>(L),
             static_cast<long long>(kMaxEstimatorParams));
    const int64_t G = gpus_per_node;
    const int64_t T = mul(num_nodes, G, "num_nodes * num_gpus_per_node");
    const double gf = 1.0 / static_cast<double>(num_nodes);
    const int64_t four_g = mul(4, G, "4 * num_gpus_per_node");
    MemEstimate m;
    m.largest_layer_bytes = 4 * L;
    double cpu = 0.0;
    if (cpu_offload) {
        if (cpu_offload_params) {
            m.gpu_bytes = m.largest_layer_bytes;
            cpu = zero_init ? static_cast<double>(P * 18) * gf * f : times_max(P, four_g, 18 * gf, f, "cpu estimate");
        } else {
            m.gpu_bytes = m.largest_layer_bytes + int_true_div(2 * P, T);
            cpu = zero_init ? static_cast<double>(P * 16) * gf * f : times_max(P, four_g, 16 * gf, f, "cpu estimate");
        }
    } else {
        m.gpu_bytes = m.largest_layer_bytes + int_true_div(18 * P, T);
        cpu = static_cast<double>(mul(zero_init ? L * 4 : P * 4, G, "cpu estimate")) * f;
    }
    m.cpu_bytes = to_bytes(cpu, "cpu");
    return m;
}

std::string format_zero2_estimates(int64_t P, int32_t gpus_per_node, int32_t num_nodes, double f) {
    f = resolve_factor(f);
    std::string out = header(gpus_per_node, num_nodes);
    char sw[128];
    std::snprintf(sw, sizeof sw, "SW: Model with %lldM total params.\n", millions(P));
    out += sw;
    out += "  per CPU  |  per GPU |   Options\n";
    for (bool offload : {true, false}) {
        const MemEstimate m = estimate_zero2_model_states_mem(P, gpus_per_node, num_nodes, offload, f);
        out += format_row(m, std::string("offload_optimizer=") + device_name(offload));
    }
    return out;
}

std::string format_zero3_estimates(int64_t P, int64_t L, int32_t gpus_per_node, int32_t num_nodes, double f) {
    f = resolve_factor(f);
    std::string out = header(gpus_per_node, num_nodes);
    char sw[160];
    std::snprintf(sw, sizeof sw, "SW: Model with %lldM total params, %lldM largest layer params.\n", millions(P),
                  millions(L));
    out += sw;
    out += "  per CPU  |  per GPU |   Options\n";
    for (bool offload : {true, false})
        for (bool offload_params : {true, false}) {
            if (!offload && offload_params) continue;
            for (bool zero_init : {true, false}) {
                const MemEstimate m =
                    estimate_zero3_model_states_mem(P, L, gpus_per_node, num_nodes, offload, offload_params, zero_init, f);
                out += format_row(m, std::string("offload_param=") + device_name(offload_params) +
                                         ", offload_optimizer=" + device_name(offload) +
                                         ", zero_init=" + (zero_init ? "1" : "0"));
            }
        }
    return out;
}

}  // namespace ds::zero
