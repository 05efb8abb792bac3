// What the monitors write: DeepSpeed's (name, value, x) events, x being
// the engine's global_samples (DEEPSPEED_SEMANTICS.md §12), and the
// directory both file monitors write into.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds::monitor {

struct Event {
    std::string name;  // "Train/Samples/lr"
    double value = 0.0;
    int64_t x = 0;     // global_samples
};
using Events = std::vector<Event>;

// os.path.join(output_path, job_name), created with its parents (an empty
// output_path gives job_name relative to the working directory). Throws
// DS_ERR_IO naming `section` and the path when it cannot be created.
std::string make_log_dir(const char* section, const std::string& output_path, const std::string& job_name);

}  // namespace ds::monitor
