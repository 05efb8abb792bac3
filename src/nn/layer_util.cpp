#include "nn/layer_util.h"

#include "core/error.h"

namespace ds::nn {

void check_activation(const Tensor& x, const char* layer, const char* what) {
    DS_CHECK(x.defined(), DS_ERR_INVALID_ARGUMENT, "%s %s: tensor is undefined", layer, what);
    DS_CHECK(x.dtype() == DType::F32, DS_ERR_INVALID_ARGUMENT, "%s %s: dtype %s, expected float32", layer, what,
             dtype_name(x.dtype()));
    DS_CHECK(x.device().is_cpu(), DS_ERR_UNSUPPORTED, "%s %s: only host tensors are supported by the CPU layers",
             layer, what);
    DS_CHECK(x.dim() >= 1, DS_ERR_INVALID_ARGUMENT, "%s %s: a scalar (0-d) tensor, expected [..., features]", layer,
             what);
    DS_CHECK(x.is_contiguous(), DS_ERR_INVALID_ARGUMENT, "%s %s: shape %s is not contiguous", layer, what,
             shape_to_string(x.shape()).c_str());
}

void check_same_shape(const Tensor& x, const Shape& want, const char* layer, const char* what) {
    check_activation(x, layer, what);
    DS_CHECK(x.shape() == want, DS_ERR_INVALID_ARGUMENT, "%s %s: shape %s, expected %s", layer, what,
             shape_to_string(x.shape()).c_str(), shape_to_string(want).c_str());
}

Tensor new_activation(const Shape& shape, RunContext& ctx) {
    Allocator& a = ctx.alloc != nullptr ? *ctx.alloc : Allocator::process();
    return Tensor::empty(shape, DType::F32, Device::cpu(), a, MemCategory::Buffers);
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
