// Optimizers: the per-parameter update rules behind ds_step. Each optimizer
// owns no memory; the engine allocates the state tensors it asks for
// (state_names(), in state_dtype()) and hands one parameter at a time to
// update(), which calls a fused kernel through the kernel table
// (core/kernel_backend.h).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/kernel_backend.h"

namespace ds::optim {

// One parameter as the optimizer sees it.
struct ParamBuffers {
    float* master = nullptr;      // fp32 master weights (updated in place)
    const void* grad = nullptr;   // accumulated gradient
    int grad_dtype = 0;           // DSK_*
    void* w16 = nullptr;          // 16-bit working copy to refresh, or nullptr
    int w_dtype = 0;              // DSK_F16 / DSK_BF16
    size_t numel = 0;
    void* const* states = nullptr;  // state_names().size() buffers of numel elements
};

// Hyper-parameters that may change every step.
struct StepContext {
    int64_t step = 1;        // 1-based optimizer step t (bias correction)
    double lr = 0.0;
    double beta1 = 0.9;      // OneCycle may cycle beta1 (and force beta2 = 0.99)
    double beta2 = 0.999;
    float grad_scale = 1.0f; // fused unscale x clip factor
};

class Optimizer {
public:
    virtual ~Optimizer() = default;

    // Build from the resolved config (type already resolved as DEEPSPEED_SEMANTICS.md §1.7).
    // `model_dtype` is the working dtype (fp32_optimizer_states=false keeps
    // Adam moments in it).
    static std::unique_ptr<Optimizer> create(const config::OptimizerConfig& c,
                                             DType model_dtype);

    virtual const char* name() const = 0;
    // Names of the per-parameter state tensors, in order.
    virtual std::vector<std::string> state_names() const = 0;
    // DSK_* dtype of the state tensors.
    virtual int state_dtype() const { return 0; /* DSK_F32 */ }
    // True when the optimizer has Adam-style betas (OneCycle momentum cycling).
    virtual bool has_betas() const = 0;
    // True when the update of each element depends only on that element, so
    // one call may cover many parameters' flat range (Lamb: per tensor).
    virtual bool elementwise() const { return true; }
    virtual void update(const ParamBuffers& p, const StepContext& ctx) = 0;
    // The kernels update() runs: those of the memory its buffers are in (the
    // CPU's by default; a device-resident engine's strategy sets its device's).
    void use_kernels(const Kernels& k) noexcept { kernels_ = k; }

    // The configured initial values (the engine's schedule owns the live
    // ones). An optimizer without betas (SGD) reports the defaults 0.9 and
    // 0.999 whatever the config holds, as the engine has always seen.
    double lr() const { return c_.lr; }
    double beta1() const { return has_betas() ? c_.beta1 : 0.9; }
    double beta2() const { return has_betas() ? c_.beta2 : 0.999; }

    // Public so that the concrete optimizers inherit it (`using
    // Optimizer::Optimizer`); the class is abstract all the same.
    explicit Optimizer(const config::OptimizerConfig& c) : c_(c) {}

protected:

    // The fields every kernel's hparams struct has: lr, weight decay, the
    // fused grad scale; set_betas for those with beta1/beta2.
    template <class H>
    void set_common(H& h, const StepContext& ctx) const {
        h.lr = static_cast<float>(ctx.lr);
        h.weight_decay = static_cast<float>(c_.weight_decay);
        h.grad_scale = ctx.grad_scale;
    }
    template <class H>
    static void set_betas(H& h, const StepContext& ctx) {
        h.beta1 = static_cast<float>(ctx.beta1);
        h.beta2 = static_cast<float>(ctx.beta2);
    }

    const config::OptimizerConfig c_;
    // The table for the memory of the buffers update() gets (use_kernels).
    Kernels kernels_ = cpu_kernels();
};

}  // namespace ds::optim
