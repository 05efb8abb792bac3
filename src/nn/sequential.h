// A sequential model: layers applied in order (the basis for DeepSpeed's
// PipelineModule / LayerSpec later), built from a SequentialSpec.
#pragma once

#include <memory>
#include <vector>

#include "nn/model.h"
#include "nn/module.h"

namespace ds::nn {

class Sequential final : public Module {
public:
    const char* type() const override { return "Sequential"; }
    std::vector<Module*> children() override;
    Tensor forward(const Tensor& x, RunContext& ctx) override;
    Tensor backward(const Tensor& dy, RunContext& ctx) override;
    void clear_saved() override;

    // Appends a layer named by its index ("0", "1", ...).
    void add(std::unique_ptr<Module> layer);
    std::vector<std::unique_ptr<Module>>& layers() { return layers_; }

private:
    std::vector<std::unique_ptr<Module>> layers_;
};

// The model of a sequential spec; its transformer layers are the
// checkpointable ones.
std::unique_ptr<Model> build_sequential(const ModelSpec& spec);

}  // namespace ds::nn
