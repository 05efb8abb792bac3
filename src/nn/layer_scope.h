// Per-layer hooks around the transformer layers' forward and backward: the
// engine's binding uses them to give a layer its fp32 weights only while it
// runs (fp16/bf16 engines convert one layer at a time into a reusable
// buffer) and to hand a layer's gradients to the engine as soon as its
// backward has produced them (so at most one layer's gradients exist twice:
// docs/DESIGN.md, "Built-in models").
//
// LayerScope wraps a layer the way Checkpointed does (outermost), and is
// transparent to whatever walks the module tree (the flops profiler): it
// reports the wrapped module's type, children and op counts, and calls the
// wrapped module's forward/backward directly.
#pragma once

#include <cstddef>
#include <memory>

#include "nn/module.h"

namespace ds::nn {

struct LayerHooks {
    virtual ~LayerHooks() = default;
    // Before layer `index`'s forward (backward: before its backward, which
    // may run its forward again under activation checkpointing).
    virtual void enter(size_t index, bool backward) = 0;
    // After it returned (not called when it threw).
    virtual void leave(size_t index, bool backward) = 0;
};

class LayerScope final : public Module {
public:
    LayerScope(std::unique_ptr<Module> inner, size_t index, LayerHooks* hooks);

    const char* type() const override { return inner_->type(); }
    std::vector<Module*> children() override { return inner_->children(); }
    std::vector<Param*> own_params() override { return inner_->own_params(); }
    Tensor forward(const Tensor& x, RunContext& ctx) override;
    Tensor backward(const Tensor& dy, RunContext& ctx) override;
    void clear_saved() override { inner_->clear_saved(); }
    OpCount op_count() const override { return inner_->op_count(); }

    Module& inner() { return *inner_; }
    std::unique_ptr<Module> release_inner() { return std::move(inner_); }

private:
    std::unique_ptr<Module> inner_;
    size_t index_;
    LayerHooks* hooks_;
};

}  // namespace ds::nn
