// DeepSpeed's communication logger (`comms_logger` config section;
// deepspeed/utils/comms_logging.py): every operation a Communicator starts
// is timed from its start to its completion (the first wait()/test() that
// sees it done) and recorded per operation name and message size: count,
// latencies, algorithmic and bus bandwidth. summary_lines() is DeepSpeed's
// log_all() table; with `verbose` each operation is logged as it completes.
//
// Names are DeepSpeed's (torch.distributed's function names): all_reduce,
// reduce_scatter_tensor, all_gather_into_tensor, broadcast,
// all_to_all_single, barrier, send, recv; `prof_ops` selects among them when
// `prof_all` is false; `debug` appends " | [Caller Func: <what the engine
// was doing>]" (CallerScope) to the record name.
//
// Message size: the bytes of the operation's input tensor, as DeepSpeed
// records it (the whole send buffer of a reduce_scatter, one rank's block of
// an all_gather). Bandwidths (nccl-tests' definitions, Gbps = bytes/ms *
// 8 / 1e6), n = ranks, S = message size:
//   all_reduce:       algbw = 2S/t, busbw = S/t * 2(n-1)/n  (DeepSpeed's)
//   all_gather:       algbw = nS/t, busbw = algbw * (n-1)/n
//   reduce_scatter:   algbw = S/t,  busbw = algbw * (n-1)/n (S already holds every
//                     rank's block; DeepSpeed multiplies it by n once more)
//   all_to_all:       algbw = S/t,  busbw = algbw * (n-1)/n
//   broadcast, send, recv, barrier: algbw = busbw = S/t
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/log.h"

namespace ds::comm {

struct CommsLoggerOptions {
    bool verbose = false;
    bool prof_all = true;
    std::vector<std::string> prof_ops;
    bool debug = false;
};

// The operation names above; true when `name` is one of them.
bool is_comm_op_name(const std::string& name);
const char* comm_op_names_list();  // "all_reduce, reduce_scatter_tensor, ..." for messages

// Algorithmic and bus bandwidth in Gbps of `op` moving `bytes` in `ms` over n ranks (0 when ms <= 0).
struct Bandwidth {
    double algbw = 0.0;
    double busbw = 0.0;
};
Bandwidth comm_bandwidth(const std::string& op, uint64_t bytes, double ms, int n);

// DeepSpeed's convert_size: "0B", "1000.0 B", "4.0 KB", "1.5 MB".
std::string convert_size(uint64_t bytes);
// DeepSpeed's trim_mean: drop round(n * trim) values at each end of the sorted list, average the rest.
double trim_mean(std::vector<double> v, double trim);

class CommsLogger {
public:
    // `log`: where verbose lines go (rank 0 only, as DeepSpeed's log_dist(ranks=[0])).
    CommsLogger(const CommsLoggerOptions& o, const Logger& log, int rank, int world_size);

    bool wants(const char* op) const;
    // The record name of an operation starting now on this thread.
    std::string record_name(const char* op) const;
    void append(const std::string& op, const std::string& record, double latency_ms, uint64_t bytes);

    // DeepSpeed's log_all() table, one string per line.
    std::vector<std::string> summary_lines() const;
    // Operations recorded so far (all names and sizes).
    int64_t total_ops() const;

private:
    struct Record {
        int64_t count = 0;
        std::vector<double> latency_ms, algbw, busbw;
    };
    CommsLoggerOptions opt_;
    Logger log_;
    int rank_ = 0;
    int world_size_ = 1;
    mutable std::mutex mu_;
    std::vector<std::string> order_;                                  // record names, first seen first
    std::map<std::string, std::map<uint64_t, Record>> records_;       // name -> size -> record
};

// What the engine is doing on this thread (the debug caller name): set for
// the scope's lifetime, restored after.
class CallerScope {
public:
    explicit CallerScope(const char* what);
    ~CallerScope();
    CallerScope(const CallerScope&) = delete;
    CallerScope& operator=(const CallerScope&) = delete;
    static const char* current();

private:
    const char* prev_;
};

}  // namespace ds::comm
