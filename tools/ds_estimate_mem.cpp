// ds-estimate-mem: DeepSpeed's ZeRO model-states memory estimates for a model
// that need not exist (estimate_zero{2,3}_model_states_mem_needs_all_cold),
// printed in DeepSpeed's table format. DEEPSPEED_SEMANTICS.md §10.
//
//   ds-estimate-mem --params N [--largest-layer-params M] [--gpus-per-node G]
//                   [--nodes K] [--stage 2|3] [--additional-buffer-factor F]
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"
#include "zero/mem_estimator.h"

namespace {

const char* kUsage =
    "usage: ds-estimate-mem --params N [--largest-layer-params M] [--gpus-per-node G]\n"
    "                       [--nodes K] [--stage 2|3] [--additional-buffer-factor F]\n"
    "\n"
    "Prints DeepSpeed's estimate of the memory needed for params, optimizer states and\n"
    "gradients (estimate_zero2/zero3_model_states_mem_needs_all_cold), per CPU (node) and\n"
    "per GPU, for every offload option.\n"
    "  --params N                  total model parameters (integer; 2851e6 style accepted)\n"
    "  --largest-layer-params M    parameters of the largest layer (required for stage 3)\n"
    "  --gpus-per-node G           default 1\n"
    "  --nodes K                   default 1\n"
    "  --stage 2|3                 default 3 when --largest-layer-params is given, else 2\n"
    "  --additional-buffer-factor F  default 1.5\n";

[[noreturn]] void usage_error(const std::string& message) {
    std::fprintf(stderr, "ds-estimate-mem: %s\n\n%s", message.c_str(), kUsage);
    std::exit(2);
}

// An integer, also written as an integral floating-point literal (2851e6).
int64_t parse_count(const std::string& opt, const std::string& text, int64_t min, int64_t max) {
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v != std::floor(v) ||
        v < static_cast<double>(min) || v > static_cast<double>(max))
        usage_error(opt + " = '" + text + "' is not an integer in [" + std::to_string(min) + ", " +
                    std::to_string(max) + "]");
    return static_cast<int64_t>(v);
}

double parse_factor(const std::string& text) {
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v < 0)
        usage_error("--additional-buffer-factor = '" + text + "' is not a finite number >= 0");
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    int64_t params = -1, largest = -1, gpus = 1, nodes = 1, stage = 0;
    double factor = ds::zero::kDefaultAdditionalBufferFactor;
    for (int i = 1; i < argc; ++i) {
        std::string opt = argv[i], value;
        if (opt == "-h" || opt == "--help") {
            std::fputs(kUsage, stdout);
            return 0;
        }
        const size_t eq = opt.find('=');
        if (opt.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = opt.substr(eq + 1);
            opt = opt.substr(0, eq);
        } else {
            if (i + 1 >= argc) usage_error("option " + opt + " needs a value");
            value = argv[++i];
        }
        if (opt == "--params") params = parse_count(opt, value, 0, ds::zero::kMaxEstimatorParams);
        else if (opt == "--largest-layer-params") largest = parse_count(opt, value, 0, ds::zero::kMaxEstimatorParams);
        else if (opt == "--gpus-per-node") gpus = parse_count(opt, value, 1, INT32_MAX);
        else if (opt == "--nodes") nodes = parse_count(opt, value, 1, INT32_MAX);
        else if (opt == "--stage") stage = parse_count(opt, value, 1, 3);
        else if (opt == "--additional-buffer-factor") factor = parse_factor(value);
        else usage_error("unknown option '" + opt + "'");
    }
    if (params < 0) usage_error("--params is required");
    if (stage == 0) stage = largest >= 0 ? 3 : 2;
    if (stage != 2 && stage != 3) usage_error("--stage must be 2 or 3 (DeepSpeed has estimators for ZeRO-2 and ZeRO-3)");
    if (stage == 3 && largest < 0) usage_error("--stage 3 needs --largest-layer-params");
    if (stage == 2 && largest >= 0) usage_error("--largest-layer-params applies to --stage 3 only");
    try {
        const std::string table =
            stage == 2 ? ds::zero::format_zero2_estimates(params, static_cast<int32_t>(gpus),
                                                          static_cast<int32_t>(nodes), factor)
                       : ds::zero::format_zero3_estimates(params, largest, static_cast<int32_t>(gpus),
                                                          static_cast<int32_t>(nodes), factor);
        std::fputs(table.c_str(), stdout);
    } catch (const ds::Error& e) {
        std::fprintf(stderr, "ds-estimate-mem: %s\n", e.what());
        return 1;
    }
    return 0;
}
