// The comms logger: bandwidth formulas (nccl-tests' bus factors, checked
// against the float64 formulas written here), DeepSpeed's convert_size and
// trim_mean (expected strings/values computed with Python's own rules), the
// log_summary table layout, operations of a local communicator recorded with
// their names and sizes, prof_ops selection and debug caller names, and the
// engine's config path (prof_ops validation, summary at steps_per_print).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "api_test_util.h"
#include "comm/communicator.h"
#include "comm/comms_logger.h"
#include "deepspeed_c.h"

namespace {

using namespace ds::comm;

TEST(CommsLogger, BandwidthFormulas) {
    const uint64_t S = 1000000;  // bytes
    const double t = 2.0;        // ms
    const int n = 4;
    const double gbps = 8.0 / 1e6;  // bytes/ms -> Gbit/s
    Bandwidth b = comm_bandwidth("all_reduce", S, t, n);
    EXPECT_DOUBLE_EQ(b.algbw, 2.0 * S / t * gbps);
    EXPECT_DOUBLE_EQ(b.busbw, S / t * (2.0 * (n - 1) / n) * gbps);
    b = comm_bandwidth("all_gather_into_tensor", S, t, n);
    EXPECT_DOUBLE_EQ(b.algbw, double(S) * n / t * gbps);
    EXPECT_DOUBLE_EQ(b.busbw, double(S) * n / t * (double(n - 1) / n) * gbps);
    b = comm_bandwidth("reduce_scatter_tensor", S, t, n);
    EXPECT_DOUBLE_EQ(b.algbw, double(S) / t * gbps);
    EXPECT_DOUBLE_EQ(b.busbw, double(S) / t * (double(n - 1) / n) * gbps);
    b = comm_bandwidth("broadcast", S, t, n);
    EXPECT_DOUBLE_EQ(b.algbw, double(S) / t * gbps);
    EXPECT_DOUBLE_EQ(b.busbw, b.algbw);
    b = comm_bandwidth("all_reduce", S, 0.0, n);  // no time measured: no bandwidth
    EXPECT_EQ(b.algbw, 0.0);
    EXPECT_EQ(comm_bandwidth("all_reduce", S, t, 1).busbw, 0.0);  // one rank moves nothing over a bus
}

TEST(CommsLogger, ConvertSizeAsDeepSpeed) {
    // Python: "%s %s" % (round(size / 1024**i, 2), name), i = floor(log(size, 1024)).
    EXPECT_EQ(convert_size(0), "0B");
    EXPECT_EQ(convert_size(1), "1.0 B");
    EXPECT_EQ(convert_size(1000), "1000.0 B");
    EXPECT_EQ(convert_size(1024), "1.0 KB");
    EXPECT_EQ(convert_size(1536), "1.5 KB");
    EXPECT_EQ(convert_size(4000000), "3.81 MB");
    EXPECT_EQ(convert_size(711834010), "678.86 MB");
    EXPECT_EQ(convert_size(1073741824ULL), "1.0 GB");
    EXPECT_EQ(convert_size(1099511627776ULL), "1.0 TB");
}

TEST(CommsLogger, TrimMeanAsDeepSpeed) {
    // n = 10: round(1.0) = 1 dropped at each end.
    EXPECT_DOUBLE_EQ(trim_mean({10, 1, 2, 3, 4, 5, 6, 7, 8, 100}, 0.1), (2 + 3 + 4 + 5 + 6 + 7 + 8 + 10) / 8.0);
    // n = 5: round(0.5) = 0 (half to even): plain mean.
    EXPECT_DOUBLE_EQ(trim_mean({1, 2, 3, 4, 100}, 0.1), 22.0);
    // n = 15: round(1.5) = 2.
    std::vector<double> v;
    for (int i = 1; i <= 15; ++i) v.push_back(i);
    EXPECT_DOUBLE_EQ(trim_mean(v, 0.1), 8.0);
    EXPECT_EQ(trim_mean({}, 0.1), 0.0);
}

TEST(CommsLogger, RecordsLocalOpsAndPrintsDeepSpeedsTable) {
    auto c = make_local(Options{});
    CommsLoggerOptions o;
    auto logger = std::make_shared<CommsLogger>(o, ds::Logger(), 0, 1);
    c->set_comms_logger(logger);
    std::vector<float> a(256, 1.0f), b(256);
    c->allreduce(a.data(), b.data(), 256, ds::DType::F32, Op::Sum);
    c->allreduce(a.data(), b.data(), 256, ds::DType::F32, Op::Sum);
    c->allreduce(a.data(), b.data(), 16, ds::DType::F32, Op::Sum);
    c->allgather(a.data(), b.data(), 8, ds::DType::F32);
    c->barrier();
    EXPECT_EQ(logger->total_ops(), 5);
    const std::vector<std::string> lines = logger->summary_lines();
    ASSERT_EQ(lines.size(), 1u + 3 + 2 + 2);  // header; each op's name, then one row per size
    EXPECT_EQ(lines[0],
              "Comm. Op            Message Size        Count               Total Latency(ms)   Avg Latency(ms)     "
              "tput_avg (Gbps)     busbw_avg (Gbps)    ");
    EXPECT_EQ(lines[1], "all_reduce");
    // Sizes ascending within an op: 64 B (16 floats) then 1.0 KB (256 floats), count 2.
    EXPECT_EQ(lines[2].substr(0, 60), std::string(20, ' ') + "64.0 B              1                   ");
    EXPECT_EQ(lines[3].substr(0, 60), std::string(20, ' ') + "1.0 KB              2                   ");
    EXPECT_EQ(lines[4], "all_gather_into_tensor");
    EXPECT_EQ(lines[5].substr(20, 20), "32.0 B              ");
    EXPECT_EQ(lines[6], "barrier");
    EXPECT_EQ(lines[7].substr(20, 20), "0B                  ");
    c->set_comms_logger(nullptr);
    c->barrier();
    EXPECT_EQ(logger->total_ops(), 5);  // removed: no longer recorded
}

TEST(CommsLogger, ProfOpsSelectsAndDebugNamesTheCaller) {
    auto c = make_local(Options{});
    CommsLoggerOptions o;
    o.prof_all = false;
    o.prof_ops = {"barrier"};
    o.debug = true;
    auto logger = std::make_shared<CommsLogger>(o, ds::Logger(), 0, 1);
    c->set_comms_logger(logger);
    float x = 1.0f;
    c->allreduce(&x, &x, 1, ds::DType::F32, Op::Sum);  // not selected
    {
        CallerScope s("step");
        c->barrier();
    }
    c->barrier();
    const std::vector<std::string> lines = logger->summary_lines();
    ASSERT_EQ(lines.size(), 5u);
    EXPECT_EQ(lines[1], "barrier | [Caller Func: step]");
    EXPECT_EQ(lines[3], "barrier | [Caller Func: unknown]");
    c->set_comms_logger(nullptr);
}

struct Log {
    std::vector<std::string> lines;
};
void sink(int32_t, const char* m, void* u) { static_cast<Log*>(u)->lines.emplace_back(m); }

TEST(CommsLogger, EngineValidatesProfOpsAndPrintsTheSummary) {
    ds_engine_t* e = nullptr;
    EXPECT_EQ(ds_engine_create(R"({"train_batch_size": 1, "comms_logger": {"enabled": true,
                                   "prof_ops": ["all_reduce", "allreduce"]}})",
                               nullptr, &e),
              DS_ERR_INVALID_CONFIG);
    EXPECT_NE(std::string(ds_last_error()).find("comms_logger.prof_ops[1]: \"allreduce\""), std::string::npos)
        << ds_last_error();

    Log log;
    ds_engine_options_t o;
    ds_engine_options_init(&o, sizeof o);
    o.log_callback = sink;
    o.log_user_data = &log;
    o.log_level = DS_LOG_INFO;
    ASSERT_EQ(ds_engine_create(R"({"train_batch_size": 1, "steps_per_print": 1, "comms_logger": {"enabled": true,
                                   "verbose": true}, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})",
                               &o, &e),
              DS_OK)
        << ds_last_error();
    float w = 1.0f, g = 0.5f;
    int64_t shape = 1;
    DLTensor t = api_test::f32_tensor(&w, &shape, 1);
    ASSERT_EQ(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE), DS_OK);
    ASSERT_EQ(ds_engine_init(e), DS_OK);
    t.data = &g;
    ASSERT_EQ(ds_engine_accumulate_grad(e, "w", &t), DS_OK);
    ASSERT_EQ(ds_backward(e, nullptr), DS_OK);
    ds_step_info_t info;
    info.struct_size = sizeof info;
    ASSERT_EQ(ds_step(e, &info), DS_OK);
    ds_engine_destroy(e);
    bool header = false;
    for (const std::string& l : log.lines) header = header || l.rfind("Comm. Op            Message Size", 0) == 0;
    EXPECT_TRUE(header);  // at steps_per_print, after the progress line
}

}  // namespace
