// LayerNorm over the last dimension (torch.nn.LayerNorm(dim, eps,
// elementwise_affine)): y = (x - mean)/sqrt(var + eps) * weight + bias.
// Params "weight" (ones) and "bias" (zeros) when affine; their gradients are
// bound by the owner (backward without them: DS_ERR_INVALID_STATE).
//
// Backward normally uses the saved input. With backward_from_output (the
// DeepSpeed transformer's normalize_invertible) the input is not kept: x̂ is
// recovered from the output as (y - bias)/weight, so the output must not be
// modified in place before backward, and a zero weight element makes
// backward fail with DS_ERR_INVALID_ARGUMENT. Either way forward keeps the
// per-row mean and 1/std (8 bytes a row).
#pragma once

#include "nn/layer_util.h"
#include "nn/module.h"

namespace ds::nn {

class LayerNorm : public Module {
public:
    // dim > 0, eps >= 0, else DS_ERR_INVALID_ARGUMENT.
    explicit LayerNorm(int64_t dim, float eps = 1e-5f, bool affine = true);

    const char* type() const override { return "LayerNorm"; }
    std::vector<Param*> own_params() override;
    Tensor forward(const Tensor& x, RunContext& ctx) override;
    Tensor backward(const Tensor& dy, RunContext& ctx) override;
    void clear_saved() override;
    // numel*5 with affine, numel*4 without (flops profiler rule).
    OpCount op_count() const override;

    // Keep the output instead of the input for backward (normalize_invertible).
    // The output is the next layer's input, which that layer keeps and counts:
    // this layer then adds only its row statistics to the ActivationMeter.
    void set_backward_from_output(bool on) { from_output_ = on; }
    bool backward_from_output() const { return from_output_; }

    int64_t dim() const { return dim_; }
    float eps() const { return eps_; }
    bool affine() const { return affine_; }
    Param& weight() { return weight_; }
    Param& bias() { return bias_; }

private:
    int64_t dim_;
    float eps_;
    bool affine_;
    bool from_output_ = false;
    Param weight_, bias_;
    Saved saved_;  // input x, or output y with backward_from_output
    Saved mean_, rstd_;
    Shape shape_;
    int64_t last_numel_ = 0;
};

}  // namespace ds::nn
