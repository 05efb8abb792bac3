// The flops profiler's report over a small module tree built here with
// known parameters and MACs/FLOPs: DeepSpeed's number formatting (expected
// strings computed with Python's round(.., 2) and '{:g}'), the summary
// fields, the aggregated profile per depth and the detailed tree with each
// module's shares.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "monitor/flops_profiler.h"
#include "nn/module.h"

namespace {

using namespace ds;
using namespace ds::monitor;

constexpr int64_t kRows = 3;  // the activations' rows in this test

// A linear layer in -> out with bias: MACs rows*in*out, FLOPs twice that.
class Lin : public nn::Module {
public:
    Lin(int64_t in, int64_t out) : in_(in), out_(out) {
        w_.shape = {in, out};
        b_.shape = {out};
    }
    const char* type() const override { return "Lin"; }
    std::vector<nn::Param*> own_params() override { return {&w_, &b_}; }
    Tensor forward(const Tensor& x, nn::RunContext&) override {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        return x;
    }
    Tensor backward(const Tensor& dy, nn::RunContext&) override { return dy; }
    nn::OpCount op_count() const override {
        const double macs = static_cast<double>(kRows * in_ * out_);
        return {macs, 2 * macs};
    }

private:
    int64_t in_, out_;
    nn::Param w_, b_;
};

// A layer norm over 4 features: 8 params, 5 flops per element.
class Norm : public nn::Module {
public:
    Norm() {
        g_.shape = {4};
        b_.shape = {4};
    }
    const char* type() const override { return "Norm"; }
    std::vector<nn::Param*> own_params() override { return {&g_, &b_}; }
    Tensor forward(const Tensor& x, nn::RunContext&) override {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return x;
    }
    Tensor backward(const Tensor& dy, nn::RunContext&) override { return dy; }
    nn::OpCount op_count() const override { return {0.0, 5.0 * kRows * 4}; }

private:
    nn::Param g_, b_;
};

// fc1 then fc2, plus its own residual add (rows*4 flops).
class Block : public nn::Module {
public:
    Block() : fc1(4, 8), fc2(8, 4) {}
    const char* type() const override { return "Block"; }
    std::vector<Module*> children() override { return {&fc1, &fc2}; }
    Tensor forward(const Tensor& x, nn::RunContext& ctx) override {
        return nn::call_forward(fc2, nn::call_forward(fc1, x, ctx), ctx);
    }
    Tensor backward(const Tensor& dy, nn::RunContext&) override { return dy; }
    nn::OpCount op_count() const override { return {0.0, static_cast<double>(kRows * 4)}; }
    Lin fc1, fc2;
};

class Net : public nn::Module {
public:
    Net() {
        block.set_name("block");
        block.fc1.set_name("block.fc1");
        block.fc2.set_name("block.fc2");
        norm.set_name("norm");
    }
    const char* type() const override { return "Net"; }
    std::vector<Module*> children() override { return {&block, &norm}; }
    Tensor forward(const Tensor& x, nn::RunContext& ctx) override {
        return nn::call_forward(norm, nn::call_forward(block, x, ctx), ctx);
    }
    Tensor backward(const Tensor& dy, nn::RunContext&) override { return dy; }
    Block block;
    Norm norm;
};

TEST(FlopsProfilerFormat, DeepSpeedNumberFormat) {
    EXPECT_EQ(number_to_string(0), "0 ");
    EXPECT_EQ(number_to_string(1234), "1.23 K");
    EXPECT_EQ(number_to_string(1.5e6), "1.5 M");
    EXPECT_EQ(number_to_string(2.5e9), "2.5 G");
    EXPECT_EQ(number_to_string(3e12), "3 T");
    EXPECT_EQ(number_to_string(0.0123), "12.3 m");
    EXPECT_EQ(number_to_string(5e-7), "0.5 u");
    EXPECT_EQ(number_to_string(999.999), "1000 ");
    EXPECT_EQ(macs_to_string(0), "0 MACs");
    EXPECT_EQ(flops_to_string(3.2e9), "3.2 GFLOPS");
    EXPECT_EQ(duration_to_string(0.0125), "12.5 ms");
    EXPECT_EQ(params_to_string(124439808), "124.44 M");
    EXPECT_EQ(params_to_string(1.5e9), "1.5 B");
    EXPECT_EQ(params_to_string(512), "512");
}

// Lines of `r` that start with `prefix`.
std::vector<std::string> starting(const std::vector<std::string>& r, const std::string& prefix) {
    std::vector<std::string> out;
    for (const auto& l : r)
        if (l.rfind(prefix, 0) == 0) out.push_back(l);
    return out;
}

std::string label(const std::string& l) { return l + std::string(70 - l.size(), ' ') + "  "; }
std::string left_pad(const std::string& v) { return v.size() >= 8 ? v : v + std::string(8 - v.size(), ' '); }

TEST(FlopsProfiler, ReportOverAKnownTree) {
    Net net;
    FlopsProfiler p;
    nn::RunContext ctx;
    ctx.hooks = &p;
    p.start(net);
    nn::call_forward(net, Tensor(), ctx);
    p.stop();
    // params: fc1 4*8+8 = 40, fc2 8*4+4 = 36, norm 8 -> 84; MACs 96 + 96; FLOPs 192+192+12+60.
    EXPECT_EQ(p.total_params(), 84.0);
    EXPECT_EQ(p.total_macs(), 192.0);
    EXPECT_EQ(p.total_flops(), 456.0);
    EXPECT_GT(p.total_duration(), 0.004);

    FlopsProfiler::Facts f;
    f.profile_step = 3;
    f.world_size = 2;
    f.micro_batch = 5;
    f.fwd_s = 0.5;
    f.bwd_s = 1.0;
    f.step_s = 0.5;
    f.recompute_fwd_factor = 1.0;
    const std::vector<std::string> r = p.report(f, -1, 2, true);
    ASSERT_GT(r.size(), 20u);
    EXPECT_EQ(r[1], "-------------------------- DeepSpeed Flops Profiler --------------------------");
    EXPECT_EQ(r[2], "Profile Summary at step 3:");
    EXPECT_EQ(starting(r, "world size: ").at(0), label("world size: ") + "2       ");
    EXPECT_EQ(starting(r, "batch size per GPU: ").at(0), label("batch size per GPU: ") + "5       ");
    EXPECT_EQ(starting(r, "params per GPU: ").at(0), label("params per GPU: ") + "84      ");
    EXPECT_EQ(starting(r, "fwd MACs per GPU: ").at(0), label("fwd MACs per GPU: ") + "192 MACs");
    EXPECT_EQ(starting(r, "fwd flops per GPU: ").at(0), label("fwd flops per GPU: ") + "456     ");
    EXPECT_EQ(starting(r, "fwd latency: ").at(0), label("fwd latency: ") + "500 ms  ");
    // 456 / 0.5 s = 912 FLOPS; bwd: (2 + 1) * 456 / 1.0; iter = 2.0 s: 4 * 456 / 2.0; samples 5*2/2.0.
    EXPECT_EQ(starting(r, "fwd FLOPS per GPU").at(0), label("fwd FLOPS per GPU = fwd flops per GPU / fwd latency: ") + "912 FLOPS");
    EXPECT_EQ(starting(r, "bwd FLOPS per GPU").at(0),
              label("bwd FLOPS per GPU = 3 * fwd flops per GPU / bwd latency: ") + "1.37 KFLOPS");
    EXPECT_EQ(starting(r, "FLOPS per GPU = 4").at(0),
              label("FLOPS per GPU = 4 * fwd flops per GPU / iter latency: ") + "912 FLOPS");
    EXPECT_EQ(starting(r, "iter latency: ").at(0), label("iter latency: ") + "2 s     ");
    EXPECT_EQ(starting(r, "samples/second: ").at(0), label("samples/second: ") + "5.0     ");

    // Aggregated: depths 0 and 1 (DeepSpeed leaves out the deepest), top 2 types by each measure.
    EXPECT_EQ(starting(r, "Top 2 modules").size(), 1u);
    const auto params = starting(r, "    params      - ");
    ASSERT_EQ(params.size(), 2u);
    EXPECT_EQ(params[0], "    params      - {'Net': '84'}");
    EXPECT_EQ(params[1], "    params      - {'Block': '76', 'Norm': '8'}");
    const auto macs = starting(r, "    MACs        - ");
    EXPECT_EQ(macs[1], "    MACs        - {'Block': '192 MACs', 'Norm': '0 MACs'}");

    // The detailed tree, PyTorch's repr layout.
    EXPECT_EQ(starting(r, "Net(").size(), 1u);
    const auto root = starting(r, "  84 = 100% Params, 192 MACs = 100% MACs, ");
    ASSERT_EQ(root.size(), 1u);
    EXPECT_NE(root[0].find(" = 100% latency, "), std::string::npos) << root[0];
    ASSERT_EQ(starting(r, "  (block): Block(").size(), 1u);
    ASSERT_EQ(starting(r, "    76 = 90.48% Params, 192 MACs = 100% MACs, ").size(), 1u);
    const auto fc1 = starting(r, "    (fc1): Lin(40 = 47.62% Params, 96 MACs = 50% MACs, ");
    ASSERT_EQ(fc1.size(), 1u);
    EXPECT_EQ(fc1[0].back(), ')');
    ASSERT_EQ(starting(r, "    (fc2): Lin(36 = 42.86% Params, 96 MACs = 50% MACs, ").size(), 1u);
    ASSERT_EQ(starting(r, "  (norm): Norm(8 = 9.52% Params, 0 MACs = 0% MACs, ").size(), 1u);
    EXPECT_EQ(r.back(), "------------------------------------------------------------------------------");

    // Not detailed, module_depth 1: only depth 0 aggregated, no tree.
    const std::vector<std::string> brief = p.report(f, 1, 1, false);
    EXPECT_EQ(starting(brief, "depth ").size(), 1u);
    EXPECT_TRUE(starting(brief, "Net(").empty());
}

TEST(FlopsProfiler, WithoutTimersUsesTheRootsLatencyAndLeavesOutBackward) {
    Net net;
    FlopsProfiler p;
    nn::RunContext ctx;
    ctx.hooks = &p;
    p.start(net);
    nn::call_forward(net, Tensor(), ctx);
    p.stop();
    nn::call_forward(net, Tensor(), ctx);  // after stop(): not counted
    EXPECT_EQ(p.total_macs(), 192.0);
    const std::vector<std::string> r = p.report(FlopsProfiler::Facts{}, -1, 1, true);
    EXPECT_EQ(starting(r, "fwd latency: ").at(0), label("fwd latency: ") + left_pad(duration_to_string(p.total_duration())));
    EXPECT_TRUE(starting(r, "bwd latency: ").empty());
    EXPECT_TRUE(starting(r, "samples/second: ").empty());
    p.clear();
    EXPECT_TRUE(p.report(FlopsProfiler::Facts{}, -1, 1, true).empty());
}

}  // namespace
