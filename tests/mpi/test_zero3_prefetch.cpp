// ZeRO-3 parameter prefetch and reuse (zero/prefetch_plan.h,
// zero/stage3.cpp) under mpirun. They change when the all-gathers run (or
// whether a release frees the copy), never what is gathered: every run here
// equals, bit for bit, the same run with prefetch_bucket_size 0 and
// max_reuse_distance 0, in every loss and every fp32 master weight. The gathers are also run in the two test modes: Deferred (data
// moves only when the parameter is asked for: a request that skipped its
// wait would read garbage) and Eager (data moves when the prefetch starts:
// a prefetch kept across a step would hand out the old weights).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "gpt_batches.h"
#include "mpi_gtest_main.h"
#include "zero/prefetch_plan.h"
#include "zero_test_util.h"

namespace {

using ds::zero::PrefetchMode;

const char* kSpec =
    R"({"type": "gpt", "vocab_size": 24, "block_size": 8, "n_layer": 4, "n_head": 2, "n_embd": 16, "seed": 9})";

// Neither prefetch nor reuse: every gather on request, every release frees.
const char* kNeither = ", \"stage3_prefetch_bucket_size\": 0, \"stage3_max_reuse_distance\": 0";

struct GptCase {
    const char* precision;  // "" (fp32), or a ", \"bf16\": ..." member
    int gas;
    bool checkpointing;
    std::string zero_extra;  // more zero_optimization members
    PrefetchMode mode;
};

std::string gpt_config(const GptCase& c, const std::string& prefetch) {
    return "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": " + std::to_string(c.gas) +
           ", \"zero_optimization\": {\"stage\": 3, \"reduce_bucket_size\": 500, "
           "\"stage3_param_persistence_threshold\": 0" +
           prefetch + c.zero_extra + "}" +
           ", \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.002, \"weight_decay\": 0.01}}" +
           c.precision +
           (c.checkpointing ? ", \"activation_checkpointing\": {\"number_checkpoints\": 1}" : "") + "}";
}

struct Trained {
    std::vector<float> losses;
    std::vector<std::vector<float>> masters;
    float held = 0.0f;
    ds::zero::PrefetchCounters counters;
};

Trained train_gpt(const GptCase& c, const std::string& prefetch, PrefetchMode mode, int steps = 5) {
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    ds::zero::set_prefetch_mode_for_testing(mode);
    ds::zero::reset_prefetch_counters();
    Trained t;
    {
        auto e = ds_gpt_test::make(gpt_config(c, prefetch), kSpec, nullptr);
        for (int s = 0; s < steps; ++s) {
            for (int m = 0; m < c.gas; ++m) {
                t.losses.push_back(ds_gpt_test::forward_tokens(*e, 5, (s * c.gas + m) * world + rank));
                e->backward(nullptr);
                e->step();
            }
        }
        e->set_eval(true);
        t.held = ds_gpt_test::forward_tokens(*e, 7, 2);
        for (const ds::Param& p : e->params().all()) {  // collective
            std::vector<float> w(static_cast<size_t>(p.numel));
            std::vector<int64_t> shape = p.shape;
            DLTensor d{};
            d.data = w.data();
            d.device = {kDLCPU, 0};
            d.ndim = static_cast<int32_t>(shape.size());
            d.dtype = {kDLFloat, 32, 1};
            d.shape = shape.data();
            e->get_full(ds::FullTensor::Param, p.name.c_str(), nullptr, &d);
            t.masters.push_back(std::move(w));
        }
    }
    t.counters = ds::zero::prefetch_counters();
    ds::zero::set_prefetch_mode_for_testing(PrefetchMode::Async);
    return t;
}

void expect_same(const Trained& a, const Trained& b, const char* what) {
    ASSERT_EQ(a.losses.size(), b.losses.size());
    for (size_t i = 0; i < a.losses.size(); ++i)
        EXPECT_EQ(std::memcmp(&a.losses[i], &b.losses[i], 4), 0)
            << what << ": loss " << i << ": " << a.losses[i] << " vs " << b.losses[i];
    EXPECT_EQ(std::memcmp(&a.held, &b.held, 4), 0) << what << ": held-out loss " << a.held << " vs " << b.held;
    ASSERT_EQ(a.masters.size(), b.masters.size());
    for (size_t i = 0; i < a.masters.size(); ++i)
        EXPECT_EQ(std::memcmp(a.masters[i].data(), b.masters[i].data(), a.masters[i].size() * 4), 0)
            << what << ": master weights of parameter " << i << " differ";
}

const char* mode_name(PrefetchMode m) {
    return m == PrefetchMode::Async ? "async" : m == PrefetchMode::Deferred ? "deferred" : "eager";
}

class Zero3PrefetchGpt : public ::testing::TestWithParam<GptCase> {};

void PrintTo(const GptCase& c, std::ostream* os) {
    *os << (c.precision[0] ? "bf16" : "fp32") << " gas " << c.gas << (c.checkpointing ? " checkpointing" : "")
        << c.zero_extra << " " << mode_name(c.mode);
}

// Each layer's weights are gathered for its forward and again for its
// backward; from the second window on, each request starts the next
// layer's gathers (the default bucket, 5e7, covers the model).
TEST_P(Zero3PrefetchGpt, TrainsBitForBitAsWithoutPrefetch) {
    const GptCase& c = GetParam();
    // allgather_sequential sets the bucket to 1 (as DeepSpeed's engine does), even over a 0: the reference leaves it out.
    GptCase off = c;
    if (off.zero_extra.find("allgather_sequential") != std::string::npos) off.zero_extra.clear();
    const Trained ref = train_gpt(off, kNeither, PrefetchMode::Async);
    EXPECT_EQ(ref.counters.started, 0);
    EXPECT_EQ(ref.counters.kept, 0);
    const Trained got = train_gpt(c, "", c.mode);
    expect_same(got, ref, mode_name(c.mode));
    EXPECT_LT(ref.losses.back(), ref.losses.front());  // it learns
    EXPECT_GT(got.counters.started, 0) << "nothing was prefetched";
    EXPECT_EQ(got.counters.used + got.counters.dropped, got.counters.started);
    EXPECT_GT(got.counters.reused, 0) << "the default max_reuse_distance keeps each layer for its backward";
    EXPECT_LE(got.counters.reused, got.counters.kept);
    if (ds_mpi_test::world_rank() == 0)
        std::printf("ZeRO-3 x%d prefetch (%s, gas %d%s): %lld gathers started ahead, %lld used, %lld dropped; "
                    "%lld releases kept the copy, %lld requests reused one\n",
                    ds_mpi_test::world_size(), mode_name(c.mode), c.gas, c.checkpointing ? ", checkpointing" : "",
                    static_cast<long long>(got.counters.started), static_cast<long long>(got.counters.used),
                    static_cast<long long>(got.counters.dropped), static_cast<long long>(got.counters.kept),
                    static_cast<long long>(got.counters.reused));
}

const char* kBf16 = ", \"bf16\": {\"enabled\": true}";

INSTANTIATE_TEST_SUITE_P(
    Cases, Zero3PrefetchGpt,
    ::testing::Values(GptCase{"", 1, false, "", PrefetchMode::Async}, GptCase{kBf16, 2, false, "", PrefetchMode::Async},
                      GptCase{"", 1, true, "", PrefetchMode::Async}, GptCase{"", 1, false, "", PrefetchMode::Deferred},
                      GptCase{kBf16, 1, true, "", PrefetchMode::Eager},
                      // one parameter at a time, and a cap on whole copies
                      GptCase{kBf16, 1, false, ", \"stage3_allgather_sequential\": true", PrefetchMode::Async},
                      GptCase{"", 2, false, ", \"stage3_max_live_parameters\": 3000", PrefetchMode::Deferred}));

// The peak of gathered copies (parameter bytes above the partitions) over
// the second of two training windows of the 4-layer GPT, with `zero_extra`
// (the second window replays the first's trace); counts from both windows.
int64_t gathered_peak(const std::string& zero_extra, ds::zero::PrefetchCounters* counters = nullptr) {
    GptCase c{"", 1, false, "", PrefetchMode::Async};
    ds::zero::reset_prefetch_counters();
    auto e = ds_gpt_test::make(gpt_config(c, zero_extra), kSpec, nullptr);
    int64_t peak = 0;
    for (int s = 0; s < 2; ++s) {
        if (s == 1) e->allocator().reset_peaks();
        const int64_t parts = e->allocator().bytes(ds::MemCategory::Params);
        ds_gpt_test::forward_tokens(*e, 5, s);
        e->backward(nullptr);
        e->step();
        peak = e->allocator().peak(ds::MemCategory::Params) - parts;
    }
    if (counters) *counters = ds::zero::prefetch_counters();
    return peak;
}

ds_gpt_test::GptSplit split_of_the_model() {
    auto e = ds_gpt_test::make(gpt_config(GptCase{"", 1, false, "", PrefetchMode::Async}, kNeither), kSpec, nullptr);
    return ds_gpt_test::gpt_split(*e, ds_mpi_test::world_size(), 4);
}

// With a bucket of one layer's weights, the gathered copies at their peak
// are more than without prefetch (outside the layers plus one layer) and at
// most that plus the bucket plus the one parameter that overshoots it.
TEST(Zero3Prefetch, HoldsAtMostTheBucket) {
    const ds_gpt_test::GptSplit m = split_of_the_model();
    const int64_t bucket = m.widest();
    const int64_t peak[2] = {gathered_peak(kNeither),
                             gathered_peak(", \"stage3_max_reuse_distance\": 0, \"stage3_prefetch_bucket_size\": " +
                                           std::to_string(bucket))};
    if (ds_mpi_test::world_rank() == 0)
        std::printf("ZeRO-3 x%d gathered weights at their peak: %lld bytes without prefetch, %lld with a bucket of "
                    "%lld elements (outside the layers %lld, widest layer %lld, largest parameter %lld)\n",
                    ds_mpi_test::world_size(), static_cast<long long>(peak[0]), static_cast<long long>(peak[1]),
                    static_cast<long long>(bucket), static_cast<long long>(m.outside),
                    static_cast<long long>(m.widest()), static_cast<long long>(m.largest));
    EXPECT_LE(peak[0], (m.outside + m.widest()) * 4);
    EXPECT_GT(peak[1], peak[0]);
    EXPECT_LE(peak[1], (m.outside + m.widest() + bucket + m.largest) * 4);
}

// max_reuse_distance without prefetch: a release keeps the copy of a
// parameter the trace asks for again within that many elements. 0 frees
// every layer when it leaves (outside the layers plus one layer at the
// peak); DeepSpeed's default, 1e9, keeps each layer from its forward to its
// backward (the whole model at the forward's end, gathered once per
// window); a distance of one layer keeps only the last layer, whose
// backward comes right after its forward.
TEST(Zero3Prefetch, ReuseKeepsWhatIsAskedForSoon) {
    const int world = ds_mpi_test::world_size();
    const ds_gpt_test::GptSplit m = split_of_the_model();
    const int64_t distances[3] = {0, 1000000000, m.widest()};
    int64_t peak[3] = {0, 0, 0}, kept[3] = {0, 0, 0}, reused[3] = {0, 0, 0};
    for (int i = 0; i < 3; ++i) {
        ds::zero::PrefetchCounters n{};
        peak[i] = gathered_peak(", \"stage3_prefetch_bucket_size\": 0, \"stage3_max_reuse_distance\": " +
                                    std::to_string(distances[i]),
                                &n);
        kept[i] = n.kept;
        reused[i] = n.reused;
    }
    if (ds_mpi_test::world_rank() == 0)
        std::printf("ZeRO-3 x%d gathered weights at their peak: %lld bytes with max_reuse_distance 0, %lld with 1e9, "
                    "%lld with one layer (%lld elements); reused requests %lld, %lld, %lld\n",
                    world, static_cast<long long>(peak[0]), static_cast<long long>(peak[1]),
                    static_cast<long long>(peak[2]), static_cast<long long>(m.widest()),
                    static_cast<long long>(reused[0]), static_cast<long long>(reused[1]),
                    static_cast<long long>(reused[2]));
    EXPECT_EQ(kept[0], 0);
    EXPECT_LE(peak[0], (m.outside + m.widest()) * 4);
    EXPECT_GE(peak[1], m.all * 4 - 4 * world * static_cast<int64_t>(m.layer.size() * 16));  // about the whole model
    EXPECT_LE(peak[1], m.all * 4);
    EXPECT_GT(reused[1], reused[2]);
    EXPECT_GT(reused[2], 0);
    EXPECT_LE(peak[2], (m.outside + 2 * m.widest()) * 4);
}

// Parameters gathered one at a time through ds_engine_gather, in an order
// that changes from window to window: a request out of trace order stops
// the prefetch, the gathers nobody asked for are dropped at the step, and
// the next window follows the new order; a copy kept for reuse goes at the
// step. The gradients are functions of the gathered weights, so a stale or
// unfinished gather changes the result.
void gather_step(ds::Engine& e, int64_t k, const std::vector<size_t>& order) {
    const size_t n = ds_zero_test::kSizes.size();
    const float scale = static_cast<float>(e.loss_scale());
    std::vector<std::vector<float>> grads(n);
    for (size_t i = 0; i < n; ++i)  // not gathered this window: a gradient from the data alone
        for (int64_t j = 0; j < ds_zero_test::kSizes[i]; ++j)
            grads[i].push_back(scale * ds_zero_test::grad_of(0.0f, k, i, j));
    for (size_t i : order) {
        const std::string name = "p" + std::to_string(i);
        const char* cname = name.c_str();
        e.gather(&cname, 1);
        DLTensor v{};
        e.param_view(cname, &v);
        for (int64_t j = 0; j < ds_zero_test::kSizes[i]; ++j)
            grads[i][static_cast<size_t>(j)] = scale * ds_zero_test::grad_of(ds_zero_test::to_f32(v, j), k, i, j);
        e.release(&cname, 1);
    }
    for (size_t i = 0; i < n; ++i) {
        int64_t shape = 0;
        const DLTensor t = ds_zero_test::host_f32(grads[i], &shape);
        e.accumulate_grad(("p" + std::to_string(i)).c_str(), &t);
    }
    e.backward(nullptr);
    e.step();
}

std::vector<std::vector<float>> run_orders(const std::string& json, PrefetchMode mode,
                                           ds::zero::PrefetchCounters* counters) {
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    const std::vector<std::vector<size_t>> orders = {
        {0, 1, 2, 3, 4, 5, 6}, {0, 1, 6, 5}, {0, 2, 3, 4}, {0, 1, 2, 3, 4, 5, 6}, {0, 1, 2, 3, 4, 5, 6},
        {6, 5, 4, 3, 2, 1, 0}, {6, 5, 4, 3, 2, 1, 0}, {0, 1, 2, 3, 4, 5, 6},
        // p0 twice: its first release keeps the copy for the second request
        // (max_reuse_distance); then a window that leaves before it: the kept
        // copy goes with the step, and the next window gathers anew.
        {0, 1, 0, 2, 3, 4, 5, 6}, {0, 1, 0, 2, 3, 4, 5, 6}, {0, 6}, {0, 1, 2, 3, 4, 5, 6}};
    ds::zero::set_prefetch_mode_for_testing(mode);
    ds::zero::reset_prefetch_counters();
    std::vector<std::vector<float>> out;
    {
        auto e = ds_zero_test::make(json, nullptr);
        for (size_t s = 0; s < orders.size(); ++s) gather_step(*e, static_cast<int64_t>(s) * world + rank, orders[s]);
        for (size_t i = 0; i < ds_zero_test::kSizes.size(); ++i)
            out.push_back(ds_zero_test::full(*e, ds::FullTensor::Param, "p" + std::to_string(i), nullptr,
                                             ds_zero_test::kSizes[i]));
    }
    *counters = ds::zero::prefetch_counters();
    ds::zero::set_prefetch_mode_for_testing(PrefetchMode::Async);
    return out;
}

TEST(Zero3Prefetch, OrderChangesBetweenWindows) {
    for (const char* dtype : {"fp32", "bf16"}) {
        const std::string base = ds_zero_test::config(3, dtype, 1, 0.0, false, 500, /*persistence=*/0);
        std::string off = base;
        off.insert(off.find("\"overlap_comm\""), "\"stage3_prefetch_bucket_size\": 0, \"stage3_max_reuse_distance\": 0, ");
        ds::zero::PrefetchCounters none{}, got{};
        const auto ref = run_orders(off, PrefetchMode::Async, &none);
        EXPECT_EQ(none.started, 0);
        for (PrefetchMode mode : {PrefetchMode::Async, PrefetchMode::Deferred, PrefetchMode::Eager}) {
            const auto w = run_orders(base, mode, &got);
            for (size_t i = 0; i < w.size(); ++i)
                EXPECT_EQ(std::memcmp(w[i].data(), ref[i].data(), w[i].size() * 4), 0)
                    << dtype << ", " << mode_name(mode) << ": parameter p" << i << " differs";
            // Window 2 (0 1 6 5) follows the first's trace for one request and
            // starts 1-6; 2, 3 and 4 are never asked for: dropped at its step.
            EXPECT_GE(got.dropped, 3) << mode_name(mode);
            EXPECT_GE(got.kept, 2) << mode_name(mode);
            EXPECT_GE(got.reused, 1) << mode_name(mode);
            EXPECT_GT(got.used, 0) << mode_name(mode);
            EXPECT_EQ(got.used + got.dropped, got.started) << mode_name(mode);
        }
    }
}

// Gathers in flight when the host writes a parameter's weights (set_full),
// empties the partition cache or destroys the engine: the write wins (the
// next request gathers the new weights, not the prefetched old ones), and
// nothing waits forever or leaks. Two windows in order p0..p6 make the
// trace; a request for p0 then starts p1..p6.
TEST(Zero3Prefetch, HostCallsWhileGathersAreInFlight) {
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    const std::vector<size_t> all = {0, 1, 2, 3, 4, 5, 6};
    const std::string json = ds_zero_test::config(3, "fp32", 1, 0.0, false, 500, /*persistence=*/0);
    for (PrefetchMode mode : {PrefetchMode::Async, PrefetchMode::Eager, PrefetchMode::Deferred}) {
        SCOPED_TRACE(mode_name(mode));
        ds::zero::set_prefetch_mode_for_testing(mode);
        ds::zero::reset_prefetch_counters();
        auto e = ds_zero_test::make(json, nullptr);
        int k = 0;
        const char* p0 = "p0";
        auto start_p1_to_p6 = [&] {  // two windows in order (the first ends whatever came before)
            for (int s = 0; s < 2; ++s, ++k) gather_step(*e, k * world + rank, all);
            const int64_t before = ds::zero::prefetch_counters().started;
            e->gather(&p0, 1);
            e->release(&p0, 1);
            EXPECT_EQ(ds::zero::prefetch_counters().started - before, 6);
        };
        // set_full while p2's gather is in flight: the request after it sees the new weights.
        start_p1_to_p6();
        std::vector<float> fresh(static_cast<size_t>(ds_zero_test::kSizes[2]));
        for (size_t j = 0; j < fresh.size(); ++j) fresh[j] = 0.5f + static_cast<float>(j);
        int64_t shape = 0;
        const DLTensor t = ds_zero_test::host_f32(fresh, &shape);
        e->set_full(ds::FullTensor::Param, "p2", nullptr, &t);
        const char* p2 = "p2";
        e->gather(&p2, 1);
        DLTensor v{};
        e->param_view(p2, &v);
        for (size_t j = 0; j < fresh.size(); ++j)
            ASSERT_EQ(ds_zero_test::to_f32(v, static_cast<int64_t>(j)), fresh[j]) << "element " << j;
        e->release(&p2, 1);
        // empty_partition_cache with gathers in flight; then a gather as usual.
        start_p1_to_p6();
        e->empty_partition_cache();
        const char* p5 = "p5";
        e->gather(&p5, 1);
        e->release(&p5, 1);
        // Destroyed with gathers in flight (every rank alike).
        start_p1_to_p6();
        e.reset();
        const ds::zero::PrefetchCounters c = ds::zero::prefetch_counters();
        EXPECT_EQ(c.used + c.dropped, c.started);
    }
    ds::zero::set_prefetch_mode_for_testing(PrefetchMode::Async);
}

// A parameter released but kept for reuse is still not gathered for the
// host: ds_engine_param_view refuses it, as it would without reuse.
TEST(Zero3Prefetch, AKeptCopyIsNotAView) {
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    auto e = ds_zero_test::make(ds_zero_test::config(3, "fp32", 1, 0.0, false, 500, /*persistence=*/0), nullptr);
    ds::zero::reset_prefetch_counters();
    const std::vector<size_t> order = {0, 1, 0};
    gather_step(*e, rank, order);  // records the trace
    const char* p0 = "p0";
    e->gather(&p0, 1);
    e->release(&p0, 1);
    EXPECT_EQ(ds::zero::prefetch_counters().kept, 1) << "p0 comes back two requests later";
    DLTensor v{};
    try {
        e->param_view(p0, &v);
        ADD_FAILURE() << "a view of a released parameter";
    } catch (const ds::Error& err) {
        EXPECT_EQ(err.status(), DS_ERR_INVALID_STATE);
        EXPECT_NE(std::string(err.what()).find("call ds_engine_gather"), std::string::npos) << err.what();
    }
    gather_step(*e, world + rank, {1, 0});  // the window goes on: 1, then 0 from the kept copy
    EXPECT_EQ(ds::zero::prefetch_counters().reused, 1);
}

}  // namespace

