// Helpers shared by the pointwise layers (LayerNorm, GELU, Dropout) and the
// losses: input checks that name the layer, activation allocation from the
// run's allocator, and saved tensors that report their bytes to the
// ActivationMeter.
#pragma once

#include <cstdint>

#include "nn/module.h"

namespace ds::nn {

// x must be a defined, contiguous fp32 tensor on the run's device (ctx.device)
// with at least one dimension; else DS_ERR_INVALID_ARGUMENT "<layer> <what>: ...".
void check_activation(const Tensor& x, const RunContext& ctx, const char* layer, const char* what);
// As check_activation, and x's shape equals `want`.
void check_same_shape(const Tensor& x, const Shape& want, const RunContext& ctx, const char* layer, const char* what);
// t is on the run's device; else DS_ERR_INVALID_ARGUMENT naming both devices.
void check_on_run_device(const Tensor& t, const RunContext& ctx, const char* layer, const char* what);

// ctx.alloc, or the process allocator when null.
Allocator& run_allocator(const RunContext& ctx);
// Uninitialised fp32 tensor on ctx.device from run_allocator(ctx), accounted
// as Buffers.
Tensor new_activation(const Shape& shape, RunContext& ctx);
// A copy of a small host tensor (positions, one id) on the run's device, or
// `host` itself when the run is on the host (core/tensor_transfer.h's
// copy_to_device with run_allocator(ctx)).
Tensor on_run_device(const Tensor& host, RunContext& ctx);
// Element i of an int32/int64 tensor on any device, read on the host (an
// error message's bad id: one element crosses).
int64_t id_element(const Tensor& ids, int64_t i);
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
