// Helpers shared by the engine benchmarks: wall-clock timing, the median of
// per-rep figures, and a status check that exits with the library's message.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "deepspeed_c.h"

namespace bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

inline void check(ds_status_t s, const char* what) {
    if (s != DS_OK) {
        std::fprintf(stderr, "%s: %s\n", what, ds_last_error());
        std::exit(1);
    }
}

}  // namespace bench
