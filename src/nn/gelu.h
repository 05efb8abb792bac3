// GELU, tanh approximation (GPT-2's and DeepSpeed's transformer kernels'):
// y = 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))). No parameters.
//
// gelu_checkpoint: built with keep_input = false, forward keeps nothing, and
// the caller, which can recompute (or still holds) the input, differentiates
// with the static backward_from_input(x, dy). backward() on such a layer is
// refused with a message saying so.
#pragma once

#include "nn/layer_util.h"
#include "nn/module.h"

namespace ds::nn {

class Gelu : public Module {
public:
    explicit Gelu(bool keep_input = true) : keep_input_(keep_input) {}

    const char* type() const override { return "GELU"; }
    Tensor forward(const Tensor& x, RunContext& ctx) override;
    Tensor backward(const Tensor& dy, RunContext& ctx) override;
    void clear_saved() override { saved_.reset(); }
    // numel (flops profiler rule).
    OpCount op_count() const override;

    bool keeps_input() const { return keep_input_; }

    // y = gelu(x) without any module state (recomputation).
    static Tensor apply(const Tensor& x, RunContext& ctx);
    // dx = dy * gelu'(x) for the forward's input x.
    static Tensor backward_from_input(const Tensor& x, const Tensor& dy, RunContext& ctx);

private:
    bool keep_input_;
    Saved saved_;
    int64_t last_numel_ = 0;
};

}  // namespace ds::nn
