// ZeRO memory estimators (DEEPSPEED_SEMANTICS.md §10): DeepSpeed's published tables for a
// 2851M-parameter model on 1 node x 8 GPUs, byte values evaluated with
// CPython float semantics, the §10 formulas in exact integer arithmetic
// where they are exact, and the C API's argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <utility>
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "deepspeed_c.h"
#include "zero/mem_estimator.h"

using namespace ds::zero;

namespace {

constexpr double kGiB = 1073741824.0;

std::string read_data(const std::string& name) {
    std::ifstream in(std::string(DS_TEST_DATA_DIR) + "/mem_estimator/" + name);
    EXPECT_TRUE(in.good()) << name;
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::vector<std::string> lines(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

std::string rstrip(std::string s) {
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
}

}  // namespace

// DeepSpeed docs (memory.rst), estimate_zero3_model_states_mem_needs_all_cold(
// total_params=2851e6, largest_layer_params=32e6, num_gpus_per_node=8, num_nodes=1).
TEST(MemEstimatorTable, Zero3PublishedTableVerbatim) {
    const std::string published =
        "Estimated memory needed for params, optim states and gradients for a:\n"
        "HW: Setup with 1 node, 8 GPUs per node.\n"
        "SW: Model with 2851M total params, 32M largest layer params.\n"
        "  per CPU  |  per GPU |   Options\n"
        "   71.69GB |   0.12GB | offload_param=cpu , offload_optimizer=cpu , zero_init=1\n"
        "  127.45GB |   0.12GB | offload_param=cpu , offload_optimizer=cpu , zero_init=0\n"
        "   63.72GB |   0.78GB | offload_param=none, offload_optimizer=cpu , zero_init=1\n"
        "  127.45GB |   0.78GB | offload_param=none, offload_optimizer=cpu , zero_init=0\n"
        "    1.43GB |   6.09GB | offload_param=none, offload_optimizer=none, zero_init=1\n"
        "  127.45GB |   6.09GB | offload_param=none, offload_optimizer=none, zero_init=0\n";
    EXPECT_EQ(format_zero3_estimates(2851000000, 32000000, 8, 1, 1.5), published);
    EXPECT_EQ(format_zero3_estimates(2851000000, 32000000, 8, 1, NAN), published);  // NaN = default 1.5
    EXPECT_EQ(read_data("zero3_2851M_32M_1node_8gpus_published.txt"), published);
}

// The published ZeRO-2 table predates DeepSpeed PR #5099: its no-offload GPU
// value (15.93GB) is 4P + int(16P/T); 0.19.6 (and DEEPSPEED_SEMANTICS.md §10) use
// 2P + int(18P/T) = 11.28GB. Everything else matches the published text
// (the docs strip the trailing space of "cpu ").
TEST(MemEstimatorTable, Zero2PublishedTable) {
    const std::string published =
        "Estimated memory needed for params, optim states and gradients for a:\n"
        "HW: Setup with 1 node, 8 GPUs per node.\n"
        "SW: Model with 2851M total params.\n"
        "  per CPU  |  per GPU |   Options\n"
        "  127.45GB |   5.31GB | offload_optimizer=cpu\n"
        "  127.45GB |  15.93GB | offload_optimizer=none\n";
    EXPECT_EQ(read_data("zero2_2851M_1node_8gpus_published.txt"), published);
    const auto want = lines(published);
    const auto got = lines(format_zero2_estimates(2851000000, 8, 1, 1.5));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i + 1 < want.size(); ++i) EXPECT_EQ(rstrip(got[i]), want[i]) << "line " << i;
    EXPECT_EQ(got[4], "  127.45GB |   5.31GB | offload_optimizer=cpu ");
    EXPECT_EQ(got[5], "  127.45GB |  11.28GB | offload_optimizer=none");
    // The published 15.93 is the pre-#5099 formula, evaluated independently.
    const double P = 2851e6, T = 8;
    char old_gpu[16];
    std::snprintf(old_gpu, sizeof old_gpu, "%6.2f", (4 * P + std::trunc(16 * P / T)) / kGiB);
    EXPECT_EQ(std::string(old_gpu), " 15.93");
    EXPECT_EQ(format_zero2_estimates(2851000000, 8, 1, NAN) + "",
              read_data("zero2_2851M_1node_8gpus_v0.19.6.txt"));
}

TEST(MemEstimatorTable, HeaderSingularsAndPlurals) {
    const auto one = lines(format_zero2_estimates(5000000, 1, 1, 1.5));
    EXPECT_EQ(one[1], "HW: Setup with 1 node, 1 GPU per node.");
    EXPECT_EQ(one[2], "SW: Model with 5M total params.");
    const auto many = lines(format_zero3_estimates(1999999, 999999, 4, 3, 1.5));
    EXPECT_EQ(many[1], "HW: Setup with 3 nodes, 4 GPUs per node.");
    EXPECT_EQ(many[2], "SW: Model with 1M total params, 0M largest layer params.");  // int() truncates
    EXPECT_EQ(many.size(), 10u);
}

// Values computed by evaluating DeepSpeed 0.19.6's expressions in CPython 3
// (int products exact, float products and true division rounded to double,
// int() truncation). 1000000001 on 3 nodes exercises float rounding: the exact
// rational 16P/3*1.5 is 8000000008 but the float evaluation truncates to ...07.
TEST(MemEstimatorBytes, MatchesCPythonEvaluation) {
    struct Z3 {
        int64_t P, L;
        int32_t G, N;
        bool co, cop, zi;
        int64_t cpu, gpu, ll;
    };
    const Z3 z3[] = {
        {1000000001, 7, 1, 3, true, true, true, 9000000009, 28, 28},
        {1000000001, 7, 1, 3, true, true, false, 9000000009, 28, 28},
        {1000000001, 7, 1, 3, true, false, true, 8000000007, 666666695, 28},
        {999999999, 12345, 3, 7, true, false, false, 17999999982, 95287475, 49380},
        {999999999, 12345, 3, 7, false, false, true, 222210, 857192236, 49380},
        {999999999, 12345, 3, 7, false, false, false, 17999999982, 857192236, 49380},
        {2851000000, 32000000, 8, 1, true, true, true, 76977000000, 128000000, 128000000},
    };
    for (const Z3& c : z3) {
        const MemEstimate m = estimate_zero3_model_states_mem(c.P, c.L, c.G, c.N, c.co, c.cop, c.zi, 1.5);
        EXPECT_EQ(m.cpu_bytes, c.cpu) << c.P << " " << c.N << " " << c.co << c.cop << c.zi;
        EXPECT_EQ(m.gpu_bytes, c.gpu) << c.P << " " << c.N << " " << c.co << c.cop << c.zi;
        EXPECT_EQ(m.largest_layer_bytes, c.ll);
    }
    struct Z2 {
        int64_t P;
        int32_t G, N;
        bool co;
        double f;
        int64_t cpu, gpu;
    };
    const Z2 z2[] = {
        {1000000001, 3, 7, true, 1.5, 126000000126, 2000000002},
        {1000000001, 3, 7, false, 1.5, 18000000018, 2857142860},
        {999999937, 5, 1, false, 1.1, 21999998614, 5599999647},
    };
    for (const Z2& c : z2) {
        const MemEstimate m = estimate_zero2_model_states_mem(c.P, c.G, c.N, c.co, c.f);
        EXPECT_EQ(m.cpu_bytes, c.cpu) << c.P;
        EXPECT_EQ(m.gpu_bytes, c.gpu) << c.P;
    }
}

// The §10 table in exact integer arithmetic, for sizes where every step is
// exact (P and L multiples of 2 * nodes * gpus, factor 1.5 or 2).
TEST(MemEstimatorBytes, ReferenceTableExactCases) {
    for (int32_t N : {1, 2, 4})
        for (int32_t G : {1, 2, 3, 8})
            for (double f : {1.5, 2.0}) {
                const int64_t T = int64_t{N} * G;
                const int64_t P = 2 * T * 1000003, L = 2 * T * 1009;
                const int64_t f2 = static_cast<int64_t>(f * 2);  // 2f, integral
                auto half = [&](int64_t x) { return x * f2 / 2; };
                // ZeRO-2
                auto m = estimate_zero2_model_states_mem(P, G, N, true, f);
                EXPECT_EQ(m.gpu_bytes, 2 * P);
                EXPECT_EQ(m.cpu_bytes, half(P * std::max<int64_t>(4 * T, 16)));
                m = estimate_zero2_model_states_mem(P, G, N, false, f);
                EXPECT_EQ(m.gpu_bytes, 2 * P + 18 * P / T);
                EXPECT_EQ(m.cpu_bytes, half(4 * P * G));
                // ZeRO-3 (gf = 1/N; P and 18P, 16P divisible by N here)
                const int64_t LL = 4 * L;
                m = estimate_zero3_model_states_mem(P, L, G, N, true, true, true, f);
                EXPECT_EQ(m.gpu_bytes, LL);
                EXPECT_EQ(m.cpu_bytes, half(18 * P / N));
                m = estimate_zero3_model_states_mem(P, L, G, N, true, true, false, f);
                EXPECT_EQ(m.cpu_bytes, half(std::max(4 * G * P, 18 * P / N)));
                m = estimate_zero3_model_states_mem(P, L, G, N, true, false, true, f);
                EXPECT_EQ(m.gpu_bytes, LL + 2 * P / T);
                EXPECT_EQ(m.cpu_bytes, half(16 * P / N));
                m = estimate_zero3_model_states_mem(P, L, G, N, true, false, false, f);
                EXPECT_EQ(m.cpu_bytes, half(std::max(4 * G * P, 16 * P / N)));
                m = estimate_zero3_model_states_mem(P, L, G, N, false, false, true, f);
                EXPECT_EQ(m.gpu_bytes, LL + 18 * P / T);
                EXPECT_EQ(m.cpu_bytes, half(4 * L * G));
                m = estimate_zero3_model_states_mem(P, L, G, N, false, true, false, f);  // cop ignored
                EXPECT_EQ(m.gpu_bytes, LL + 18 * P / T);
                EXPECT_EQ(m.cpu_bytes, half(4 * P * G));
            }
}

TEST(MemEstimatorBytes, InvalidArguments) {
    EXPECT_THROW(estimate_zero2_model_states_mem(-1, 1, 1, true, 1.5), ds::Error);
    EXPECT_THROW(estimate_zero2_model_states_mem(kMaxEstimatorParams + 1, 1, 1, true, 1.5), ds::Error);
    EXPECT_THROW(estimate_zero2_model_states_mem(10, 0, 1, true, 1.5), ds::Error);
    EXPECT_THROW(estimate_zero2_model_states_mem(10, 1, 0, true, 1.5), ds::Error);
    EXPECT_THROW(estimate_zero2_model_states_mem(10, 1, 1, true, -1.0), ds::Error);
    EXPECT_THROW(estimate_zero2_model_states_mem(10, 1, 1, true, INFINITY), ds::Error);
    EXPECT_THROW(estimate_zero3_model_states_mem(10, -1, 1, 1, true, true, true, 1.5), ds::Error);
    // 4 * T * P overflows int64 for huge GPU counts.
    EXPECT_THROW(estimate_zero2_model_states_mem(kMaxEstimatorParams, 2147483647, 2147483647, true, 1.5),
                 ds::Error);
    EXPECT_NO_THROW(estimate_zero2_model_states_mem(kMaxEstimatorParams, 8, 1024, false, 1.5));
}

TEST(MemEstimatorCApi, Zero2AndZero3) {
    int64_t cpu = -1, gpu = -1, ll = -1;
    ASSERT_EQ(ds_estimate_zero2_mem(2851000000, 8, 1, 0, NAN, &cpu, &gpu), DS_OK);
    EXPECT_EQ(cpu, 136848000000);                 // 4P * 8 * 1.5
    EXPECT_EQ(gpu, 5702000000 + 6414750000);      // 2P + 18P/8
    ASSERT_EQ(ds_estimate_zero2_mem(2851000000, 8, 1, 1, 2.0, &cpu, &gpu), DS_OK);
    EXPECT_EQ(cpu, 2851000000LL * 32 * 2);
    EXPECT_EQ(gpu, 5702000000);
    ASSERT_EQ(ds_estimate_zero3_mem(2851000000, 32000000, 8, 1, 1, 1, 1, NAN, &cpu, &gpu, &ll), DS_OK);
    EXPECT_EQ(cpu, 76977000000);  // 18P * 1.5
    EXPECT_EQ(gpu, 128000000);
    EXPECT_EQ(ll, 128000000);
    ASSERT_EQ(ds_estimate_zero3_mem(2851000000, 32000000, 8, 1, 0, 0, 1, NAN, &cpu, &gpu, nullptr), DS_OK);
    EXPECT_EQ(cpu, 32000000LL * 4 * 8 * 3 / 2);
    EXPECT_EQ(gpu, 128000000 + 6414750000);
}

TEST(MemEstimatorCApi, ArgumentErrorsNameTheArgument) {
    int64_t cpu = 0, gpu = 0;
    const std::vector<std::pair<std::function<ds_status_t()>, const char*>> cases = {
        {[&] { return ds_estimate_zero2_mem(10, 1, 1, 1, NAN, nullptr, &gpu); }, "cpu_bytes"},
        {[&] { return ds_estimate_zero2_mem(10, 1, 1, 1, NAN, &cpu, nullptr); }, "gpu_bytes"},
        {[&] { return ds_estimate_zero2_mem(10, 1, 1, 2, NAN, &cpu, &gpu); }, "cpu_offload"},
        {[&] { return ds_estimate_zero2_mem(-5, 1, 1, 1, NAN, &cpu, &gpu); }, "total_params"},
        {[&] { return ds_estimate_zero2_mem(10, 0, 1, 1, NAN, &cpu, &gpu); }, "num_gpus_per_node"},
        {[&] { return ds_estimate_zero2_mem(10, 1, -1, 1, NAN, &cpu, &gpu); }, "num_nodes"},
        {[&] { return ds_estimate_zero2_mem(10, 1, 1, 1, -0.5, &cpu, &gpu); }, "additional_buffer_factor"},
        {[&] { return ds_estimate_zero3_mem(10, 1, 1, 1, 1, 3, 1, NAN, &cpu, &gpu, nullptr); }, "cpu_offload_params"},
        {[&] { return ds_estimate_zero3_mem(10, 1, 1, 1, 1, 1, -1, NAN, &cpu, &gpu, nullptr); }, "zero_init"},
        {[&] { return ds_estimate_zero3_mem(10, -1, 1, 1, 1, 1, 1, NAN, &cpu, &gpu, nullptr); },
         "largest_layer_params"},
    };
    for (const auto& c : cases) {
        EXPECT_EQ(c.first(), DS_ERR_INVALID_ARGUMENT) << c.second;
        EXPECT_NE(std::string(ds_last_error()).find(c.second), std::string::npos)
            << c.second << ": " << ds_last_error();
    }
}
