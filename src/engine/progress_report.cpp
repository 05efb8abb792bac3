#include "engine/progress_report.h"

#include <optional>

#include "core/json/json_writer.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/engine.h"

namespace ds {

namespace {

// Python's float repr for the usual values (0.001, 1e-05, 0.9, 3.0).
std::string py_float(double v) { return json::format_number(v); }

}  // namespace

std::string progress_line(const Engine& e) {
    const Counters& k = e.counters();
    const auto& opt = e.config().optimizer;
    std::string mom;
    if (opt && opt->type == "SGD")
        mom = py_float(opt->momentum);
    else if (opt)
        mom = "(" + py_float(e.beta1()) + ", " + py_float(e.beta2()) + ")";
    return format("step=%lld, skipped=%lld, lr=[%s], mom=[%s]", static_cast<long long>(k.global_steps),
                  static_cast<long long>(k.skipped_steps), opt ? py_float(e.lr()).c_str() : "",
                  mom.c_str());
}

const std::string& Engine::log_comms_summary() {
    DS_CHECK(comms_logger_ != nullptr, DS_ERR_INVALID_STATE,
             "ds_engine_comms_log_summary: the comms logger is off (set \"comms_logger\": {\"enabled\": true} in the config)");
    comms_summary_.clear();
    for (const std::string& line : comms_logger_->summary_lines()) {
        if (rank_ == 0) DS_LOG(logger_, DS_LOG_INFO, "%s", line.c_str());
        comms_summary_ += line + "\n";
    }
    return comms_summary_;
}

void report_progress(Engine& e) {
    const auto& every = e.config().steps_per_print;
    if (!every || *every <= 0 || e.rank() != 0) return;
    if (e.counters().global_steps % *every != 0) return;
    std::optional<double> scale;
    if (e.config().fp16.enabled) scale = e.loss_scale();
    const std::string extra = e.monitors().progress_fields(e.counters().global_samples, scale);
    DS_LOG(e.logger(), DS_LOG_INFO, "%s%s", progress_line(e).c_str(), extra.c_str());
    // comms_logger: DeepSpeed's log_summary table (cumulative), one log line per row.
    if (e.comms_logger())
        for (const std::string& line : e.comms_logger()->summary_lines()) DS_LOG(e.logger(), DS_LOG_INFO, "%s", line.c_str());
}

}  // namespace ds
