#include "nn/layer_util.h"

#include "core/error.h"
#include "core/tensor_transfer.h"

namespace ds::nn {

void check_on_run_device(const Tensor& t, const RunContext& ctx, const char* layer, const char* what) {
    DS_CHECK(t.device() == ctx.device, DS_ERR_INVALID_ARGUMENT, "%s %s: tensor is in %s memory, the layers run on %s",
             layer, what, t.device().str().c_str(), ctx.device.str().c_str());
}

void check_activation(const Tensor& x, const RunContext& ctx, const char* layer, const char* what) {
    DS_CHECK(x.defined(), DS_ERR_INVALID_ARGUMENT, "%s %s: tensor is undefined", layer, what);
    DS_CHECK(x.dtype() == DType::F32, DS_ERR_INVALID_ARGUMENT, "%s %s: dtype %s, expected float32", layer, what,
             dtype_name(x.dtype()));
    check_on_run_device(x, ctx, layer, what);
    DS_CHECK(x.dim() >= 1, DS_ERR_INVALID_ARGUMENT, "%s %s: a scalar (0-d) tensor, expected [..., features]", layer,
             what);
    DS_CHECK(x.is_contiguous(), DS_ERR_INVALID_ARGUMENT, "%s %s: shape %s is not contiguous", layer, what,
             shape_to_string(x.shape()).c_str());
}

void check_same_shape(const Tensor& x, const Shape& want, const RunContext& ctx, const char* layer,
                      const char* what) {
    check_activation(x, ctx, layer, what);
    DS_CHECK(x.shape() == want, DS_ERR_INVALID_ARGUMENT, "%s %s: shape %s, expected %s", layer, what,
             shape_to_string(x.shape()).c_str(), shape_to_string(want).c_str());
}

Allocator& run_allocator(const RunContext& ctx) { return ctx.alloc != nullptr ? *ctx.alloc : Allocator::process(); }

Tensor new_activation(const Shape& shape, RunContext& ctx) {
    return Tensor::empty(shape, DType::F32, ctx.device, run_allocator(ctx), MemCategory::Buffers);
}

Tensor on_run_device(const Tensor& host, RunContext& ctx) {
    return copy_to_device(host, ctx.device, run_allocator(ctx));
}

int64_t id_element(const Tensor& ids, int64_t i) {
    Tensor one = ids.view({1}, i);
    if (!ids.device().is_cpu()) {
        Tensor host = Tensor::empty({1}, ids.dtype(), Device::cpu(), Allocator::process(), MemCategory::Buffers);
        host.copy_from(one);
        one = host;
    }
    return one.dtype() == DType::I32 ? one.data<int32_t>()[0] : one.data<int64_t>()[0];
}

Tensor new_param_tensor(const Shape& shape, MemCategory category, float fill) {
    Tensor t = Tensor::empty(shape, DType::F32, Device::cpu(), Allocator::process(), category);
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = fill;
    return t;
}

void Saved::keep(const Tensor& t, RunContext& ctx, bool counted) {
    reset();
    t_ = t;
    if (counted && ctx.meter != nullptr) {
        meter_ = ctx.meter;
        bytes_ = static_cast<int64_t>(t.nbytes());
        meter_->add(bytes_);
    }
}

void Saved::reset() {
    if (meter_ != nullptr) meter_->sub(bytes_);
    meter_ = nullptr;
    bytes_ = 0;
    t_ = Tensor();
}

}  // namespace ds::nn
