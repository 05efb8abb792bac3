// Dropout with inverted scaling: in training each element is zeroed with
// probability p and the rest multiplied by 1/(1-p); the identity when
// !ctx.training or p == 0 (the input tensor itself is returned).
//
// The mask is never stored: it is a pure function of (ctx.seed,
// ctx.forward_index, id(), element index) through Philox4x32-10
// (kernels/nn_ops.h, docs/DESIGN.md "Dropout RNG"), so backward regenerates
// it. That saves the mask's memory (torch keeps a bool per element: n bytes;
// a float mask would be 4n), and recomputation (activation checkpointing) or
// a run resumed from a checkpoint reproduce exactly the same mask. id() must
// be unique in the model and the module run once per forward.
#pragma once

#include "nn/layer_util.h"
#include "nn/module.h"
#include "nn_ops.h"

namespace ds::nn {

class Dropout : public Module {
public:
    // p in [0, 1], else DS_ERR_INVALID_ARGUMENT.
    explicit Dropout(float p);

    const char* type() const override { return "Dropout"; }
    Tensor forward(const Tensor& x, RunContext& ctx) override;
    Tensor backward(const Tensor& dy, RunContext& ctx) override;
    void clear_saved() override {
        has_key_ = false;
        identity_ = false;
    }

    float p() const { return p_; }

    // The stream key of module `module_id` in this forward.
    static dsk_dropout_key key(const RunContext& ctx, uint32_t module_id);
    // Dropout in place on a whole buffer (attention probabilities): the same
    // mask as forward with that key would draw. p in [0, 1].
    static void apply_inplace(Tensor& x, float p, const dsk_dropout_key& key, RunContext& ctx);

private:
    float p_;
    bool has_key_ = false;  // a training forward with p > 0 ran; backward pending
    bool identity_ = false; // the last forward was the identity
    dsk_dropout_key key_{};
    Shape shape_;
};

}  // namespace ds::nn
