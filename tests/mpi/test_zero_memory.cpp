// Per-rank memory of the ZeRO stages under mpirun (2 and 3 ranks), measured
// by the engine's own allocator counters, against the ZeRO paper's per-rank
// model-states formulas (Rajbhandari et al., 2020, §5 / Figure 1) within 5%.
//
// The model: ~1.0M parameters in tensors of prime sizes (the largest primes
// below 10000, plus 7; no tensor exceeds the 10000-element reduction bucket and
// the flat buffer's padding to a multiple of 2N is exercised on every N).
// AdamW (two fp32 moments). reduce_bucket_size = 10000 keeps ZeRO-2's bucket
// (counted as "buffers", reported apart from the model states) negligible;
// the test asserts buffers <= 2 x bucket x element size.
//
// Why the paper and not DeepSpeed's estimator: DeepSpeed's
// estimate_zero2_model_states_mem_needs counts 18 bytes per partitioned
// element (fp32 master 4 + moments 8 + a 4-byte fp32 gradient copy + the
// 16-bit gradient partition 2) on top of 2 bytes per replicated 16-bit
// weight. This engine's fused
// unscale/clip/Adam kernels read the 16-bit (or fp32) gradient partition
// directly and never materialise that fp32 gradient copy, so the engine is
// compared with the paper's formula; the estimator's number (ZeRO-1/2:
// estimate_zero2, ZeRO-3: estimate_zero3, default buffer factor) is printed
// beside it for the record.
//
// Bytes are measured twice: right after init, and after one full training
// step (accumulate, backward, step): the model states must not grow.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/error.h"
#include "engine/engine.h"
#include "mpi_gtest_main.h"
#include "zero/mem_estimator.h"

namespace {

constexpr int64_t kBucket = 10000;  // reduce_bucket_size (elements)

// Primes below 10000, largest first, until they add up to >= 1,000,000,
// then 7.
std::vector<int64_t> prime_sizes() {
    const int64_t limit = 10000;
    std::vector<bool> composite(static_cast<size_t>(limit), false);
    for (int64_t i = 2; i * i < limit; ++i)
        if (!composite[static_cast<size_t>(i)])
            for (int64_t j = i * i; j < limit; j += i) composite[static_cast<size_t>(j)] = true;
    std::vector<int64_t> sizes;
    int64_t total = 0;
    for (int64_t p = limit - 1; p >= 2 && total < 1000000; --p)
        if (!composite[static_cast<size_t>(p)]) {
            sizes.push_back(p);
            total += p;
        }
    sizes.push_back(7);  // those add up to a multiple of 12: 7 makes the flat buffer need padding
    return sizes;
}

// The ZeRO paper's per-rank bytes, split by the engine's categories, as
// (bytes per element held whole on every rank) x Psi + (bytes per element of
// a partition) x Psi / N. "params" = working copy + fp32 master (the paper's
// K = 12 puts the master with the optimizer state; the engine's allocator
// counts it as a parameter), "states" = Adam's exp_avg + exp_avg_sq.
//
//  16-bit (fp16/bf16) training, K = 12 (master 4 + exp_avg 4 + exp_avg_sq 4):
//   stage | params (16-bit w + fp32 master) | grads (16-bit) | states      | paper total
//   0     | 2Psi + 4Psi                     | 2Psi           | 8Psi        | (2 + 2 + K)Psi
//   1     | 2Psi + 4Psi/N                   | 2Psi           | 8Psi/N      | 2Psi + 2Psi + K Psi/N
//   2     | 2Psi + 4Psi/N                   | 2Psi/N         | 8Psi/N      | 2Psi + (2 + K)Psi/N
//   3     | (2 + 4)Psi/N                    | 2Psi/N         | 8Psi/N      | (2 + 2 + K)Psi/N
//  fp32 training (the master doubles as the working copy where it is whole):
//   0     | 4Psi                            | 4Psi           | 8Psi        | 16Psi
//   1     | 4Psi + 4Psi/N                   | 4Psi           | 8Psi/N      | 8Psi + 12Psi/N
//   2     | 4Psi + 4Psi/N                   | 4Psi/N         | 8Psi/N      | 4Psi + 16Psi/N
//   3     | 4Psi/N (master = working part.) | 4Psi/N         | 8Psi/N      | 16Psi/N
struct PerElement {
    double whole;  // x Psi
    double part;   // x Psi / N
};
struct Formula {
    int stage;
    bool half;  // 16-bit training
    PerElement params, grads, states;
};

const Formula kFormulas[] = {
    {0, true, {6, 0}, {2, 0}, {8, 0}},  {1, true, {2, 4}, {2, 0}, {0, 8}},
    {2, true, {2, 4}, {0, 2}, {0, 8}},  {3, true, {0, 6}, {0, 2}, {0, 8}},
    {0, false, {4, 0}, {4, 0}, {8, 0}}, {1, false, {4, 4}, {4, 0}, {0, 8}},
    {2, false, {4, 4}, {0, 4}, {0, 8}}, {3, false, {0, 4}, {0, 4}, {0, 8}},
};

const Formula& formula(int stage, bool half) {
    for (const Formula& f : kFormulas)
        if (f.stage == stage && f.half == half) return f;
    throw std::logic_error("no formula");
}

double bytes_of(PerElement e, double psi, double n) { return e.whole * psi + e.part * psi / n; }

std::string config(int stage, const std::string& dtype) {
    std::string prec;
    if (dtype == "fp16") prec = ", \"fp16\": {\"enabled\": true}";
    if (dtype == "bf16") prec = ", \"bf16\": {\"enabled\": true}";
    // ZeRO-3: no parameter persists whole (DeepSpeed's default threshold of
    // 1e5 elements would keep every tensor here gathered on every rank).
    const std::string persist = stage == 3 ? ", \"stage3_param_persistence_threshold\": 0" : "";
    return "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_accumulation_steps\": 1, "
           "\"gradient_clipping\": 1.0" + prec +
           ", \"zero_optimization\": {\"stage\": " + std::to_string(stage) + persist +
           ", \"reduce_bucket_size\": " + std::to_string(kBucket) + ", \"overlap_comm\": false}" +
           ", \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001, \"weight_decay\": 0.01}}}";
}

struct Measured {
    int64_t params, grads, states, buffers, total;
    int64_t model_states() const { return params + grads + states; }
};

Measured measure(const ds::Engine& e) {
    const ds::Allocator& a = e.allocator();
    return {a.bytes(ds::MemCategory::Params), a.bytes(ds::MemCategory::Grads),
            a.bytes(ds::MemCategory::OptimizerState), a.bytes(ds::MemCategory::Buffers), a.total()};
}

DLTensor f32_1d(float* data, int64_t* shape) {
    DLTensor t{};
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
    return t;
}

void print_header_once(int64_t psi) {
    static bool printed = false;
    if (printed || ds_mpi_test::world_rank() != 0) return;
    printed = true;
    std::printf("\nbytes per rank, Psi = %lld parameters, AdamW; paper = the ZeRO paper's formula\n",
                static_cast<long long>(psi));
    std::printf("%-5s %-5s %2s %12s %12s %12s %10s %12s %12s %6s %14s\n", "stage", "dtype", "N", "params",
                "grads", "optim_state", "buffers", "model_states", "paper", "ratio", "ds_estimator");
}

// One engine: lay it out, measure, train one step, measure again.
void run_case(int stage, const std::string& dtype) {
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    const bool half = dtype != "fp32";
    const std::string json = config(stage, dtype);
    if (stage == 3) {
        try {
            ds::config::check_supported(ds::config::parse(json, world));
        } catch (const ds::Error& err) {
            if (err.status() == DS_ERR_UNSUPPORTED) GTEST_SKIP() << "ZeRO stage 3 not accepted yet: " << err.what();
            throw;
        }
    }
    const std::vector<int64_t> sizes = prime_sizes();
    int64_t psi = 0;
    for (int64_t s : sizes) psi += s;

    ds::EngineOptions o;
    o.log_level = DS_LOG_WARN;
    ds::Engine e(json, o, nullptr);
    ASSERT_EQ(e.world_size(), world);
    std::vector<float> buf(static_cast<size_t>(kBucket));
    for (size_t i = 0; i < sizes.size(); ++i) {
        for (int64_t j = 0; j < sizes[i]; ++j)
            buf[static_cast<size_t>(j)] = 0.1f * std::sin(static_cast<float>(j) + static_cast<float>(i));
        int64_t shape = sizes[i];
        DLTensor t = f32_1d(buf.data(), &shape);
        e.add_param(("w" + std::to_string(i)).c_str(), &t, DS_PARAM_TRAINABLE);
    }
    e.init();
    const Measured m = measure(e);

    // The paper's bytes for this rank, per category and in total.
    const Formula& f = formula(stage, half);
    const double n = world;
    const double want_params = bytes_of(f.params, psi, n), want_grads = bytes_of(f.grads, psi, n),
                 want_states = bytes_of(f.states, psi, n);
    const double want = want_params + want_grads + want_states;
    const double ratio = static_cast<double>(m.model_states()) / want;
    const char* where = " (stage, dtype, N) = ";
    EXPECT_NEAR(ratio, 1.0, 0.05) << where << stage << ", " << dtype << ", " << world;
    EXPECT_NEAR(m.params / want_params, 1.0, 0.05) << "params" << where << stage << ", " << dtype << ", " << world;
    EXPECT_NEAR(m.grads / want_grads, 1.0, 0.05) << "grads" << where << stage << ", " << dtype << ", " << world;
    EXPECT_NEAR(m.states / want_states, 1.0, 0.05) << "optimizer_state" << where << stage << ", " << dtype << ", "
                                                   << world;
    const int64_t elem = half ? 2 : 4;
    EXPECT_LE(m.buffers, 2 * kBucket * elem) << "buffers" << where << stage << ", " << dtype << ", " << world;
    EXPECT_EQ(m.total, m.model_states() + m.buffers);

    // DeepSpeed's estimator, printed for comparison (not asserted).
    int64_t estimator = -1;
    if (stage == 1 || stage == 2)
        estimator = ds::zero::estimate_zero2_model_states_mem(psi, world, 1, false, 1.5).gpu_bytes;
    if (stage == 3)
        estimator = ds::zero::estimate_zero3_model_states_mem(psi, sizes.front(), world, 1, false, false, false, 1.5)
                        .gpu_bytes;
    print_header_once(psi);
    if (rank == 0) {
        char est[32] = "n/a";
        if (estimator >= 0) std::snprintf(est, sizeof est, "%lld", static_cast<long long>(estimator));
        std::printf("%-5d %-5s %2d %12lld %12lld %12lld %10lld %12lld %12.0f %6.4f %14s\n", stage, dtype.c_str(), world,
                    static_cast<long long>(m.params), static_cast<long long>(m.grads),
                    static_cast<long long>(m.states), static_cast<long long>(m.buffers),
                    static_cast<long long>(m.model_states()), want, ratio, est);
    }

    // ZeRO-3: nothing is gathered here (no persistent parameters, and the
    // host never calls gather), before and after the step.
    const float g = 0.01f * static_cast<float>(e.loss_scale());
    std::fill(buf.begin(), buf.end(), g);
    for (size_t i = 0; i < sizes.size(); ++i) {
        int64_t shape = sizes[i];
        DLTensor t = f32_1d(buf.data(), &shape);
        e.accumulate_grad(("w" + std::to_string(i)).c_str(), &t);
    }
    e.backward(nullptr);
    const ds::StepResult r = e.step();
    EXPECT_TRUE(r.stepped && !r.skipped);
    const Measured after = measure(e);
    EXPECT_EQ(after.params, m.params) << where << stage << ", " << dtype << ", " << world;
    EXPECT_EQ(after.grads, m.grads) << where << stage << ", " << dtype << ", " << world;
    EXPECT_EQ(after.states, m.states) << where << stage << ", " << dtype << ", " << world;
    EXPECT_EQ(after.buffers, m.buffers) << where << stage << ", " << dtype << ", " << world;
}

TEST(ZeroMemory, Fp16MatchesPaper) {
    for (int stage : {0, 1, 2}) run_case(stage, "fp16");
}

TEST(ZeroMemory, Bf16MatchesPaper) {
    for (int stage : {0, 1, 2}) run_case(stage, "bf16");
}

TEST(ZeroMemory, Fp32MatchesPaper) {
    for (int stage : {0, 1, 2}) run_case(stage, "fp32");
}

TEST(ZeroMemory, Stage3MatchesPaper) {
    for (const char* dtype : {"fp16", "bf16", "fp32"}) {
        run_case(3, dtype);
        if (::testing::Test::IsSkipped()) return;
    }
}

// ZeRO-2's reduction buffers are reduce_bucket_size elements whatever the
// largest parameter (before: never smaller than it, a GPT's tied embedding
// set the bucket): a parameter larger than the bucket is reduced in pieces
// through it. fp32 without overlap_comm: the bucket and the out-of-place
// all-reduce's result buffer; 16-bit: the bucket alone. The reduced mean
// gradient of every parameter, pieces included, equals the float64 mean of
// the ranks' gradients.
TEST(ZeroMemory, Stage2BucketIsReduceBucketSizeWhateverTheLargestParameter) {
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    const int64_t bucket = 1000;
    const std::vector<int64_t> sizes = {17, 5003, 999, 2500, 3};  // 5003 and 2500 exceed the bucket
    for (const std::string dtype : {"fp32", "bf16"}) {
        SCOPED_TRACE(dtype);
        const std::string prec = dtype == "bf16" ? ", \"bf16\": {\"enabled\": true}" : "";
        const std::string json =
            "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_accumulation_steps\": 1, \"gradient_clipping\": 0.0" +
            prec + ", \"zero_optimization\": {\"stage\": 2, \"reduce_bucket_size\": " + std::to_string(bucket) +
            ", \"overlap_comm\": false}, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001}}}";
        ds::EngineOptions o;
        o.log_level = DS_LOG_WARN;
        ds::Engine e(json, o, nullptr);
        std::vector<float> buf(5003, 0.5f);
        for (size_t i = 0; i < sizes.size(); ++i) {
            int64_t shape = sizes[i];
            DLTensor t = f32_1d(buf.data(), &shape);
            e.add_param(("w" + std::to_string(i)).c_str(), &t, DS_PARAM_TRAINABLE);
        }
        e.init();
        const int64_t want = dtype == "fp32" ? 2 * bucket * 4 : bucket * 2;
        EXPECT_EQ(measure(e).buffers, want) << "ZeRO-2 reduction buffers, reduce_bucket_size " << bucket;
        // Rank r's gradient of parameter i, element j; exact in bf16 (multiples of 1/64, |x| < 4).
        auto g = [](int r, size_t i, int64_t j) {
            return static_cast<float>(((j * 7 + static_cast<int64_t>(i) * 13 + r * 5) % 97) - 48) / 64.0f;
        };
        for (size_t i = 0; i < sizes.size(); ++i) {
            for (int64_t j = 0; j < sizes[i]; ++j) buf[static_cast<size_t>(j)] = g(rank, i, j);
            int64_t shape = sizes[i];
            DLTensor t = f32_1d(buf.data(), &shape);
            e.accumulate_grad(("w" + std::to_string(i)).c_str(), &t);
        }
        e.backward(nullptr);
        for (size_t i = 0; i < sizes.size(); ++i) {
            std::vector<float> got(static_cast<size_t>(sizes[i]));
            int64_t shape = sizes[i];
            DLTensor t = f32_1d(got.data(), &shape);
            e.get_full(ds::FullTensor::Grad, ("w" + std::to_string(i)).c_str(), nullptr, &t);  // collective
            for (int64_t j = 0; j < sizes[i]; ++j) {
                double mean = 0.0;
                for (int r = 0; r < world; ++r) mean += g(r, i, j);
                mean /= world;
                // fp32: exact for 2 ranks (halves of multiples of 1/64); bf16: the sum rounds to 8 bits.
                const double tol = dtype == "fp32" ? 1e-7 : std::ldexp(std::fabs(mean), -8) + 1e-7;
                ASSERT_NEAR(got[static_cast<size_t>(j)], mean, tol) << "w" << i << "[" << j << "]";
            }
        }
        EXPECT_EQ(measure(e).buffers, want);
    }
}

}  // namespace
