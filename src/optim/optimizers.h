// The concrete optimizers (one .cpp each) and the factory.
#pragma once

#include "optim/optimizer.h"

namespace ds::optim {

class AdamOptimizer final : public Optimizer {
public:
    AdamOptimizer(const config::OptimizerConfig& c, DType model_dtype);
    const char* name() const override { return c_.adamw_mode ? "AdamW" : "Adam"; }
    std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
    int state_dtype() const override { return state_dtype_; }
    bool has_betas() const override { return true; }
    void update(const ParamBuffers& p, const StepContext& ctx) override;

private:
    int state_dtype_;
};

class LambOptimizer final : public Optimizer {
public:
    using Optimizer::Optimizer;
    const char* name() const override { return "Lamb"; }
    bool elementwise() const override { return false; }
    std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
    bool has_betas() const override { return true; }
    void update(const ParamBuffers& p, const StepContext& ctx) override;
};

class SgdOptimizer final : public Optimizer {
public:
    using Optimizer::Optimizer;
    const char* name() const override { return "SGD"; }
    std::vector<std::string> state_names() const override;
    bool has_betas() const override { return false; }
    void update(const ParamBuffers& p, const StepContext& ctx) override;
};

class LionOptimizer final : public Optimizer {
public:
    using Optimizer::Optimizer;
    const char* name() const override { return "Lion"; }
    std::vector<std::string> state_names() const override { return {"exp_avg"}; }
    bool has_betas() const override { return true; }
    void update(const ParamBuffers& p, const StepContext& ctx) override;
};

}  // namespace ds::optim
