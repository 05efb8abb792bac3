// The engine's one entry point to monitoring (DEEPSPEED_SEMANTICS.md §12):
// built from the config, it owns the file monitors (csv_monitor,
// tensorboard; global rank 0 only), the wall_clock_breakdown timers and the
// throughput figures of the steps_per_print line. The engine calls the
// *_begin/*_end pairs around its phases (or holds a Scope) and step_end()
// at the end of every ds_step.
//
// What is written, as DeepSpeed's engine writes it, with x = global_samples:
//   every boundary: Train/Samples/lr (and Train/Samples/loss_scale with fp16);
//   Train/Samples/train_loss: the built-in model's loss averaged over the
//     accumulation window (DeepSpeed <= 0.18.2 wrote it; only when ds_forward ran);
//   with wall_clock_breakdown, every boundary: Train/Samples/elapsed_time_ms_
//     {forward,backward,backward_inner,backward_allreduce,step} (the window's sums).
// With wall_clock_breakdown rank 0 also logs the micro-step timers after every
// ds_step and the per-boundary ones at every boundary ("time (ms) | fwd: ...").
// A monitor that fails to write logs an error naming the file and stops
// writing; training goes on (the step already happened).
#pragma once

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "config/config.h"
#include "core/log.h"
#include "monitor/flops_profiler.h"
#include "monitor/monitor_event.h"
#include "monitor/timers.h"

namespace ds::monitor {

class CsvMonitor;
class TensorBoardMonitor;

enum class Phase { Forward, Backward, BackwardInner, BackwardAllreduce, Step };

// What the engine knows at the end of a ds_step.
struct StepInfo {
    bool boundary = false;
    int64_t steps_at_entry = 0;   // global_steps when ds_step began (the flops profiler's step)
    int64_t global_steps = 0;
    int64_t global_samples = 0;
    double lr = 0.0;
    std::optional<double> loss_scale;  // fp16 only
};

class MonitorHub {
public:
    // Creates the monitors' directories and files on rank 0 (DS_ERR_IO naming
    // the path when that fails).
    MonitorHub(const config::Config& c, int32_t rank, int32_t world_size, const Logger& log);
    ~MonitorHub();
    MonitorHub(const MonitorHub&) = delete;
    MonitorHub& operator=(const MonitorHub&) = delete;

    // True when csv_monitor or tensorboard writes on this rank.
    bool writing() const { return csv_ != nullptr || tb_ != nullptr; }
    bool timing() const { return timing_; }

    void begin(Phase p);
    void end(Phase p);
    // begin() now, end() when it goes out of scope (also on an exception).
    class Scope {
    public:
        Scope(MonitorHub& h, Phase p) : h_(h), p_(p) { h_.begin(p_); }
        ~Scope() { h_.end(p_); }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        MonitorHub& h_;
        Phase p_;
    };

    // The forward of a built-in model (ds_forward): forward_begin() with the
    // engine's global_steps and the model's root (the flops profiler starts
    // when global_steps == flops_profiler.profile_step, on rank 0), then
    // forward_end() with this rank's tokens (0: not token ids), its loss
    // (NaN: none) and the model FLOPs of its forward + backward (0: unknown),
    // or forward_failed() when the forward threw.
    void forward_begin(int64_t global_steps, nn::Module* root);
    void forward_end(int64_t tokens, double loss, double train_flops);
    void forward_failed();
    // The hooks the model's modules run under (the profiler while it profiles), or null.
    nn::ForwardHooks* forward_hooks();

    // At the end of every ds_step (after the counters moved).
    void step_end(const StepInfo& s);

    // ", loss=..., loss_scale=..., samples/s=..., tokens/s=..., TFLOPS=..."
    // for the progress line of a boundary (called before step_end): the
    // window's mean loss when a built-in model gave one, the loss scale
    // (fp16) and the throughput since the previous call.
    std::string progress_fields(int64_t global_samples, std::optional<double> loss_scale);
    // This window's mean loss (the last window's once it closed); NaN: none.
    double current_loss() const;

    Timers& timers() { return timers_; }
    const std::string& csv_dir() const;
    const std::string& tensorboard_file() const;

private:
    void write(const Events& ev);
    void flops_report(const StepInfo& s);

    const Logger& log_;
    int32_t rank_ = 0;
    int32_t world_size_ = 1;
    bool fp16_ = false;
    bool timing_ = false;  // wall_clock_breakdown
    std::unique_ptr<CsvMonitor> csv_;
    std::unique_ptr<TensorBoardMonitor> tb_;
    Timers timers_;

    double window_loss_sum_ = 0.0;  // this accumulation window's losses
    int64_t window_losses_ = 0;
    double last_loss_ = NAN;        // the last window's mean loss
    int64_t tokens_since_print_ = 0;
    double flops_since_print_ = 0.0;  // model FLOPs of this rank's forwards + backwards
    config::FlopsProfilerConfig prof_cfg_;
    int64_t micro_batch_ = 1;
    std::unique_ptr<FlopsProfiler> profiler_;  // rank 0 with flops_profiler.enabled
    std::chrono::steady_clock::time_point last_print_time_;
    int64_t last_print_samples_ = 0;
};

// Forward + backward FLOPs of one token of a GPT (docs/DESIGN.md,
// monitoring): 6*N for the weight matmuls (2 forward, 4 backward per
// parameter) plus 12*L*T*C for attention (QK^T and AV: 2*2*T*C per layer
// forward, twice that backward), N = parameters, L = layers, T = sequence
// length, C = embedding width.
double gpt_flops_per_token(double n_params, int64_t n_layer, int64_t seq_len, int64_t n_embd);

}  // namespace ds::monitor
