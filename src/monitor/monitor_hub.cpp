#include "monitor/monitor_hub.h"

#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "monitor/csv_monitor.h"
#include "monitor/tensorboard_writer.h"

namespace ds::monitor {

namespace {

struct PhaseTimers {
    const char* global;
    const char* micro;
};

PhaseTimers timers_of(Phase p) {
    switch (p) {
        case Phase::Forward: return {kForward, kForwardMicro};
        case Phase::Backward: return {kBackward, kBackwardMicro};
        case Phase::BackwardInner: return {kBackwardInner, kBackwardInnerMicro};
        case Phase::BackwardAllreduce: return {kBackwardAllreduce, kBackwardAllreduceMicro};
        case Phase::Step: break;
    }
    return {kStep, kStepMicro};
}

const std::string kEmpty;

}  // namespace

MonitorHub::MonitorHub(const config::Config& c, int32_t rank, int32_t world_size, const Logger& log)
    : log_(log), rank_(rank), world_size_(world_size), fp16_(c.fp16.enabled), timing_(c.wall_clock_breakdown),
      last_print_time_(std::chrono::steady_clock::now()) {
    const auto& s = c.sections;
    prof_cfg_ = s.flops_profiler;
    micro_batch_ = c.train_micro_batch_size_per_gpu;
    if (rank_ != 0) return;  // only global rank 0 writes and profiles (DeepSpeed's monitors)
    if (prof_cfg_.enabled) profiler_ = std::make_unique<FlopsProfiler>();
    if (s.csv_monitor.enabled) csv_ = std::make_unique<CsvMonitor>(s.csv_monitor.output_path, s.csv_monitor.job_name);
    if (s.tensorboard.enabled)
        tb_ = std::make_unique<TensorBoardMonitor>(s.tensorboard.output_path, s.tensorboard.job_name);
}

MonitorHub::~MonitorHub() = default;

const std::string& MonitorHub::csv_dir() const { return csv_ ? csv_->log_dir() : kEmpty; }
const std::string& MonitorHub::tensorboard_file() const { return tb_ ? tb_->file() : kEmpty; }

void MonitorHub::begin(Phase p) {
    if (!timing_) return;
    const PhaseTimers t = timers_of(p);
    timers_.start(t.micro);
    timers_.start(t.global);
}

void MonitorHub::end(Phase p) {
    if (!timing_) return;
    const PhaseTimers t = timers_of(p);
    timers_.stop(t.micro);
    timers_.stop(t.global);
}

void MonitorHub::forward_begin(int64_t global_steps, nn::Module* root) {
    begin(Phase::Forward);
    if (profiler_ && root && global_steps == prof_cfg_.profile_step) profiler_->start(*root);
}

nn::ForwardHooks* MonitorHub::forward_hooks() { return profiler_ && profiler_->active() ? profiler_.get() : nullptr; }

void MonitorHub::forward_failed() {
    end(Phase::Forward);
    if (profiler_ && profiler_->active()) profiler_->clear();
}

void MonitorHub::forward_end(int64_t tokens, double loss, double train_flops) {
    end(Phase::Forward);
    if (profiler_ && profiler_->active()) profiler_->stop();
    tokens_since_print_ += tokens;
    flops_since_print_ += train_flops;
    if (!std::isnan(loss)) {
        window_loss_sum_ += loss;
        ++window_losses_;
    }
}

void MonitorHub::write(const Events& ev) {
    // A failing monitor is reported once and dropped: the step it reports
    // has already been applied, so the error must not fail ds_step.
    if (csv_) {
        try {
            csv_->write_events(ev);
        } catch (const Error& e) {
            DS_LOG(log_, DS_LOG_ERROR, "csv_monitor disabled: %s", e.what());
            csv_.reset();
        }
    }
    if (tb_) {
        try {
            tb_->write_events(ev);
        } catch (const Error& e) {
            DS_LOG(log_, DS_LOG_ERROR, "tensorboard disabled: %s", e.what());
            tb_.reset();
        }
    }
}

void MonitorHub::flops_report(const StepInfo& s) {
    FlopsProfiler::Facts f;
    f.profile_step = s.steps_at_entry;
    f.world_size = world_size_;
    f.micro_batch = micro_batch_;
    f.recompute_fwd_factor = prof_cfg_.recompute_fwd_factor;
    if (timing_) {  // DeepSpeed takes the latencies from the engine's timers
        f.fwd_s = timers_.elapsed_ms(kForward, false) / 1000.0;
        f.bwd_s = timers_.elapsed_ms(kBackward, false) / 1000.0;
        f.step_s = timers_.elapsed_ms(kStep, false) / 1000.0;
    }
    const std::vector<std::string> lines =
        profiler_->report(f, prof_cfg_.module_depth, prof_cfg_.top_modules, prof_cfg_.detailed);
    profiler_->clear();
    if (!prof_cfg_.output_file || prof_cfg_.output_file->empty()) {
        for (const std::string& l : lines) DS_LOG(log_, DS_LOG_INFO, "%s", l.c_str());
        return;
    }
    // The file is rewritten ("w", as DeepSpeed); its directory is created.
    const std::string& path = *prof_cfg_.output_file;
    std::error_code ec;
    const std::filesystem::path parent = std::filesystem::absolute(path, ec).parent_path();
    if (!ec) std::filesystem::create_directories(parent, ec);
    std::FILE* fp = ec ? nullptr : std::fopen(path.c_str(), "w");
    bool ok = fp != nullptr;
    for (const std::string& l : lines)
        if (ok) ok = std::fprintf(fp, "%s\n", l.c_str()) >= 0;
    if (fp && std::fclose(fp) != 0) ok = false;
    if (!ok)
        DS_LOG(log_, DS_LOG_ERROR, "flops_profiler.output_file: cannot write the profile to '%s'%s%s", path.c_str(),
               ec ? ": " : "", ec ? ec.message().c_str() : "");
}

void MonitorHub::step_end(const StepInfo& s) {
    if (profiler_ && profiler_->has_profile() && !profiler_->active() && s.steps_at_entry == prof_cfg_.profile_step)
        flops_report(s);
    if (s.boundary) {
        if (window_losses_ > 0) last_loss_ = window_loss_sum_ / static_cast<double>(window_losses_);
        if (writing()) {
            Events ev{{"Train/Samples/lr", s.lr, s.global_samples}};
            if (fp16_ && s.loss_scale) ev.push_back({"Train/Samples/loss_scale", *s.loss_scale, s.global_samples});
            if (window_losses_ > 0) ev.push_back({"Train/Samples/train_loss", last_loss_, s.global_samples});
            write(ev);
        }
        window_loss_sum_ = 0.0;
        window_losses_ = 0;
    }
    if (!timing_) return;
    if (rank_ == 0) DS_LOG(log_, DS_LOG_INFO, "%s", timers_.log_line(micro_timer_names()).c_str());
    else for (const std::string& n : micro_timer_names()) timers_.elapsed_ms(n, true);
    if (!s.boundary) return;
    if (writing()) {
        const char* names[] = {"forward", "backward", "backward_inner", "backward_allreduce", "step"};
        Events ev;
        for (size_t i = 0; i < global_timer_names().size(); ++i)
            ev.push_back({std::string("Train/Samples/elapsed_time_ms_") + names[i],
                          timers_.elapsed_ms(global_timer_names()[i], false), s.global_samples});
        write(ev);
    }
    if (rank_ == 0) DS_LOG(log_, DS_LOG_INFO, "%s", timers_.log_line(global_timer_names()).c_str());
    else for (const std::string& n : global_timer_names()) timers_.elapsed_ms(n, true);
}

double MonitorHub::current_loss() const {
    return window_losses_ > 0 ? window_loss_sum_ / static_cast<double>(window_losses_) : last_loss_;
}

std::string MonitorHub::progress_fields(int64_t global_samples, std::optional<double> loss_scale) {
    const auto now = std::chrono::steady_clock::now();
    const double secs = std::chrono::duration<double>(now - last_print_time_).count();
    const double samples = static_cast<double>(global_samples - last_print_samples_);
    std::string out;
    const double loss = current_loss();
    if (!std::isnan(loss)) out += format(", loss=%.4f", loss);
    if (fp16_ && loss_scale) out += format(", loss_scale=%g", *loss_scale);
    if (secs > 0.0 && samples > 0.0) {
        const double sps = samples / secs;
        out += format(", samples/s=%.2f", sps);
        // Tokens counted by this rank's forwards; the other ranks run as many.
        if (tokens_since_print_ > 0)
            out += format(", tokens/s=%.1f", static_cast<double>(tokens_since_print_) * world_size_ / secs);
        // Every rank runs as many FLOPs as this one.
        if (flops_since_print_ > 0.0) out += format(", TFLOPS=%.3f", flops_since_print_ * world_size_ / secs / 1e12);
    }
    last_print_time_ = now;
    last_print_samples_ = global_samples;
    tokens_since_print_ = 0;
    flops_since_print_ = 0.0;
    return out;
}

double gpt_flops_per_token(double n_params, int64_t n_layer, int64_t seq_len, int64_t n_embd) {
    return 6.0 * n_params + 12.0 * static_cast<double>(n_layer) * static_cast<double>(seq_len) *
                                static_cast<double>(n_embd);
}

}  // namespace ds::monitor
