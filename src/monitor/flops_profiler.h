// DeepSpeed's flops profiler (DEEPSPEED_SEMANTICS.md §11) over a built-in
// model: a ForwardHooks that times every module's forward and collects its
// own MACs/FLOPs (nn::Module::op_count(), the profiler's counting rules), and
// the report DeepSpeed's print_model_profile() prints: the "DeepSpeed Flops
// Profiler" summary (labels left-justified to 70 columns), "Aggregated
// Profile per GPU" (the top_modules module types per depth by params, MACs
// and latency) and, when detailed, the module tree with each module's
// params, MACs, latency (and their shares of the model's) and FLOPS.
//
// As DeepSpeed: a module's params include its descendants' (trainable ones,
// a tied parameter once); its MACs/FLOPs are its own plus its descendants';
// its latency is its measured forward time, or its children's sum when it
// was not timed itself. Numbers print with DeepSpeed's magnitudes
// (T, G, M, K, none, m, u; params use B for G), rounded to 2 decimals, %g.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nn/module.h"

namespace ds::monitor {

// DeepSpeed's number_to_string and its variants.
std::string number_to_string(double num);
std::string macs_to_string(double macs);      // "1.5 MMACs"
std::string flops_to_string(double flops);    // "3.2 GFLOPS"
std::string params_to_string(double params);  // "124.44 M", "1.5 B", "512"
std::string duration_to_string(double secs);  // "12.5 ms"

class FlopsProfiler : public nn::ForwardHooks {
public:
    // Forgets any earlier profile and profiles the forwards of `root` from now on.
    void start(nn::Module& root);
    // Ends profiling (the counts stay until the next start()).
    void stop();
    bool active() const { return active_; }
    bool has_profile() const { return root_ != nullptr; }
    // Forgets the profile (DeepSpeed's end_profile).
    void clear();

    void before_forward(nn::Module& m) override;
    void after_forward(nn::Module& m) override;

    // What the engine knows for the summary.
    struct Facts {
        int64_t profile_step = 1;
        int32_t world_size = 1;
        int64_t micro_batch = 1;
        double recompute_fwd_factor = 0.0;
        // From the engine's timers (wall_clock_breakdown), seconds; unset:
        // the forward latency is the root module's own and the backward,
        // step and iteration figures are left out (as DeepSpeed).
        std::optional<double> fwd_s, bwd_s, step_s;
    };
    // The report's lines (no trailing newlines).
    std::vector<std::string> report(const Facts& f, int64_t module_depth, int64_t top_modules, bool detailed) const;

    // Totals of the profiled model (the root's).
    double total_params() const;
    double total_macs() const;
    double total_flops() const;
    double total_duration() const;

private:
    struct Stats {
        double macs = 0.0, flops = 0.0, duration = 0.0;  // own counts, measured seconds
    };
    double params_of(nn::Module& m) const;
    double macs_of(nn::Module& m) const;
    double flops_of(nn::Module& m) const;
    double duration_of(nn::Module& m) const;
    std::string module_repr(nn::Module& m) const;

    nn::Module* root_ = nullptr;
    bool active_ = false;
    std::map<const nn::Module*, Stats> stats_;
    std::vector<std::pair<const nn::Module*, std::chrono::steady_clock::time_point>> open_;
};

}  // namespace ds::monitor
