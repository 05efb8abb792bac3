// Helpers shared by the pointwise layers (LayerNorm, GELU, Dropout) and the
// losses: input checks that name the layer, activation allocation from the
// run's allocator, and saved tensors that report their bytes to the
// ActivationMeter.
#pragma once

#include <cstdint>

#include "nn/module.h"

namespace ds::nn {

// x must be a defined, contiguous fp32 tensor on the host with at least one
// dimension; else DS_ERR_INVALID_ARGUMENT "<layer> <what>: ...".
void check_activation(const Tensor& x, const char* layer, const char* what);
// As check_activation, and x's shape equals `want`.
void check_same_shape(const Tensor& x, const Shape& want, const char* layer, const char* what);

// Uninitialised fp32 host tensor from ctx.alloc (the process allocator when
// null), accounted as Buffers.
Tensor new_activation(const Shape& shape, RunContext& ctx);
// fp32 host tensor for a module's own initial parameter values (the engine
// binds gradients; a module allocates none).
Tensor new_param_tensor(const Shape& shape, MemCategory category, float fill);

// A tensor a module keeps from forward to backward; its bytes are added to
// the meter while kept (counted = false: kept but accounted elsewhere, e.g.
// an output that the next layer keeps as its input).
class Saved {
public:
    void keep(const Tensor& t, RunContext& ctx, bool counted = true);
    void reset();
    const Tensor& get() const { return t_; }
    bool defined() const { return t_.defined(); }

private:
    Tensor t_;
    ActivationMeter* meter_ = nullptr;
    int64_t bytes_ = 0;
};

}  // namespace ds::nn
