#include "comm/comms_logger.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/json/json_writer.h"

namespace ds::comm {

namespace {

const char* const kOps[] = {"all_reduce", "reduce_scatter_tensor", "all_gather_into_tensor", "broadcast",
                            "all_to_all_single", "barrier", "send", "recv"};

thread_local const char* t_caller = nullptr;

// Python's "{:<20}" of a string and "{:<20.2f}" of a float.
std::string left20(const std::string& s) { return s.size() >= 20 ? s : s + std::string(20 - s.size(), ' '); }
std::string left20(double v) { return left20(format("%.2f", v)); }

}  // namespace

bool is_comm_op_name(const std::string& name) {
    for (const char* op : kOps)
        if (name == op) return true;
    return false;
}

const char* comm_op_names_list() {
    return "all_reduce, reduce_scatter_tensor, all_gather_into_tensor, broadcast, all_to_all_single, barrier, "
           "send, recv";
}

Bandwidth comm_bandwidth(const std::string& op, uint64_t bytes, double ms, int n) {
    Bandwidth b;
    if (ms <= 0.0 || n < 1) return b;
    const double s = static_cast<double>(bytes);
    const double share = static_cast<double>(n - 1) / n;
    if (op == "all_reduce") {
        b.algbw = 2.0 * s / ms;
        b.busbw = s / ms * 2.0 * share;
    } else if (op == "all_gather_into_tensor") {
        b.algbw = s * n / ms;
        b.busbw = b.algbw * share;
    } else if (op == "reduce_scatter_tensor" || op == "all_to_all_single") {
        b.algbw = s / ms;
        b.busbw = b.algbw * share;
    } else {  // broadcast, send, recv, barrier
        b.algbw = s / ms;
        b.busbw = b.algbw;
    }
    b.algbw *= 8.0 / 1e6;  // bytes per ms -> Gbit/s
    b.busbw *= 8.0 / 1e6;
    return b;
}

std::string convert_size(uint64_t bytes) {
    if (bytes == 0) return "0B";
    static const char* const names[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
    // As Python's math.log(size, 1024): log(size) / log(1024) in doubles.
    const int i = static_cast<int>(std::floor(std::log(static_cast<double>(bytes)) / std::log(1024.0)));
    const double p = std::pow(1024.0, i);
    const double s = std::nearbyint(static_cast<double>(bytes) / p * 100.0) / 100.0;
    return json::format_number(s) + " " + names[i];
}

double trim_mean(std::vector<double> v, double trim) {
    const size_t n = v.size();
    if (n == 0) return 0.0;
    std::sort(v.begin(), v.end());
    const size_t k = static_cast<size_t>(std::nearbyint(static_cast<double>(n) * trim));  // half to even
    if (2 * k >= n) return NAN;  // numpy's mean of nothing
    double sum = 0.0;
    for (size_t i = k; i < n - k; ++i) sum += v[i];
    return sum / static_cast<double>(n - 2 * k);
}

CommsLogger::CommsLogger(const CommsLoggerOptions& o, const Logger& log, int rank, int world_size)
    : opt_(o), log_(log), rank_(rank), world_size_(world_size) {}

bool CommsLogger::wants(const char* op) const {
    if (opt_.prof_all) return true;
    return std::find(opt_.prof_ops.begin(), opt_.prof_ops.end(), op) != opt_.prof_ops.end();
}

std::string CommsLogger::record_name(const char* op) const {
    if (!opt_.debug) return op;
    const char* caller = CallerScope::current();
    return std::string(op) + " | [Caller Func: " + (caller ? caller : "unknown") + "]";
}

void CommsLogger::append(const std::string& op, const std::string& record, double latency_ms, uint64_t bytes) {
    const Bandwidth b = comm_bandwidth(op, bytes, latency_ms, world_size_);
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = records_.find(record);
        if (it == records_.end()) {
            order_.push_back(record);
            it = records_.emplace(record, std::map<uint64_t, Record>{}).first;
        }
        Record& r = it->second[bytes];
        ++r.count;
        r.latency_ms.push_back(latency_ms);
        r.algbw.push_back(b.algbw);
        r.busbw.push_back(b.busbw);
    }
    if (opt_.verbose && rank_ == 0)
        DS_LOG(log_, DS_LOG_INFO,
               "comm op: %s | time (ms): %.2f | msg size: %s | algbw (Gbps): %.2f | busbw (Gbps): %.2f",
               record.c_str(), latency_ms, convert_size(bytes).c_str(), b.algbw, b.busbw);
}

std::vector<std::string> CommsLogger::summary_lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    out.push_back(left20("Comm. Op") + left20("Message Size") + left20("Count") + left20("Total Latency(ms)") +
                  left20("Avg Latency(ms)") + left20("tput_avg (Gbps)") + left20("busbw_avg (Gbps)"));
    for (const std::string& name : order_) {
        out.push_back(name);
        for (const auto& [bytes, r] : records_.at(name)) {  // sizes ascending, as DeepSpeed sorts them
            double total = 0.0;
            for (double l : r.latency_ms) total += l;
            out.push_back(left20(" ") + left20(convert_size(bytes)) + left20(std::to_string(r.count)) + left20(total) +
                          left20(trim_mean(r.latency_ms, 0.1)) + left20(trim_mean(r.algbw, 0.1)) +
                          left20(trim_mean(r.busbw, 0.1)));
        }
    }
    return out;
}

int64_t CommsLogger::total_ops() const {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t n = 0;
    for (const auto& [name, sizes] : records_)
        for (const auto& [bytes, r] : sizes) n += r.count;
    return n;
}

CallerScope::CallerScope(const char* what) : prev_(t_caller) { t_caller = what; }
CallerScope::~CallerScope() { t_caller = prev_; }
const char* CallerScope::current() { return t_caller; }

}  // namespace ds::comm
