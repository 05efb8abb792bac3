#include "nn/linear.h"

#include <string>

#include "core/error.h"
#include "nn/layer_util.h"

namespace ds::nn {

namespace {

std::string label(const Module& m) { return "Linear '" + m.name() + "'"; }

void check_param(const Module& m, const Param& p, const Shape& want, const char* what, const char* when,
                 bool bf16_ok, Device dev) {
    DS_CHECK(p.value.defined(), DS_ERR_INVALID_STATE, "%s: %s has no value (%s)", label(m).c_str(), what, when);
    const bool dtype_ok = p.value.dtype() == DType::F32 || (bf16_ok && p.value.dtype() == DType::BF16);
    DS_CHECK(dtype_ok && p.value.device() == dev && p.value.is_contiguous(), DS_ERR_INVALID_ARGUMENT,
             "%s: %s must be a contiguous %s tensor on %s, got %s on %s (%s)", label(m).c_str(), what,
             bf16_ok ? "fp32 or bf16" : "fp32", dev.str().c_str(), dtype_name(p.value.dtype()),
             p.value.device().str().c_str(), when);
    DS_CHECK(p.value.shape() == want, DS_ERR_INVALID_ARGUMENT, "%s: %s has shape %s, expected %s (%s)",
             label(m).c_str(), what, shape_to_string(p.value.shape()).c_str(), shape_to_string(want).c_str(), when);
}

void check_grad(const Module& m, const Param& p, const char* what, Device dev) {
    DS_CHECK(p.grad.defined(), DS_ERR_INVALID_STATE, "%s: %s has no gradient buffer bound (backward)",
             label(m).c_str(), what);
    DS_CHECK(p.grad.dtype() == DType::F32 && p.grad.is_contiguous() && p.grad.shape() == p.shape &&
                 p.grad.device() == dev,
             DS_ERR_INVALID_ARGUMENT, "%s: %s's gradient must be contiguous fp32 of shape %s on %s, got %s on %s",
             label(m).c_str(), what, shape_to_string(p.shape).c_str(), dev.str().c_str(),
             shape_to_string(p.grad.shape()).c_str(), p.grad.device().str().c_str());
}

}  // namespace

Linear::Linear(int64_t in, int64_t out, bool bias) : in_(in), out_(out), has_bias_(bias) {
    DS_CHECK(in > 0 && out > 0, DS_ERR_INVALID_ARGUMENT, "Linear: in_features = %lld and out_features = %lld must be positive",
             static_cast<long long>(in), static_cast<long long>(out));
    own_w_.name = "weight";
    own_w_.shape = {out, in};
    own_w_.reads_bf16 = true;  // every product path reads a bf16 weight too
    own_w_.value = Tensor::zeros(own_w_.shape, DType::F32, Device::cpu(), Allocator::process(), MemCategory::Params);
    if (bias) {
        bias_.name = "bias";
        bias_.shape = {out};
        bias_.value = Tensor::zeros(bias_.shape, DType::F32, Device::cpu(), Allocator::process(), MemCategory::Params);
    }
}

Linear::Linear(Param* shared_weight, bool bias) : has_bias_(bias), w_(shared_weight) {
    DS_CHECK(shared_weight != nullptr, DS_ERR_INVALID_ARGUMENT, "Linear: shared_weight is NULL");
    DS_CHECK(shared_weight->shape.size() == 2 && shared_weight->shape[0] > 0 && shared_weight->shape[1] > 0,
             DS_ERR_INVALID_ARGUMENT, "Linear: shared weight '%s' has shape %s, expected [out, in]",
             shared_weight->name.c_str(), shape_to_string(shared_weight->shape).c_str());
    out_ = shared_weight->shape[0];
    in_ = shared_weight->shape[1];
    if (bias) {
        bias_.name = "bias";
        bias_.shape = {out_};
        bias_.value = Tensor::zeros(bias_.shape, DType::F32, Device::cpu(), Allocator::process(), MemCategory::Params);
    }
}

std::vector<Param*> Linear::own_params() {
    std::vector<Param*> ps;
    if (!weight_is_shared()) ps.push_back(&own_w_);
    if (has_bias_) ps.push_back(&bias_);
    return ps;
}

void Linear::check_weights(const char* when, Device dev) const {
    check_param(*this, *w_, {out_, in_}, "weight", when, /*bf16_ok=*/true, dev);
    if (has_bias_) check_param(*this, bias_, {out_}, "bias", when, /*bf16_ok=*/false, dev);
}

namespace {
// A bf16 weight widened to fp32 for the fp32 products (exact; by the run's
// kernels, so on its device); an fp32 one as is.
Tensor fp32_of(const Tensor& w, const RunContext& ctx) {
    if (w.dtype() == DType::F32) return w;
    Tensor f = Tensor::empty(w.shape(), DType::F32, w.device(), run_allocator(ctx), MemCategory::Buffers);
    ctx.kernels.convert(w.data_ptr(), DSK_BF16, f.data_ptr(), DSK_F32, static_cast<size_t>(w.numel()));
    return f;
}
}  // namespace

void Linear::apply(const float* x, float* y, int64_t rows, RunContext& ctx) {
    check_weights("forward", ctx.device);
    const float* bias = has_bias_ && bias_in_product_ ? bias_.value.data<float>() : nullptr;
    const Tensor& w = w_->value;
    if (ctx.matmul_dtype == DType::BF16 && w.dtype() == DType::BF16)
        ctx.kernels.linear_fwd_bf16w(x, w.data<uint16_t>(), bias, y, rows, in_, out_);
    else if (ctx.matmul_dtype == DType::BF16)
        ctx.kernels.linear_fwd_bf16(x, w.data<float>(), bias, y, rows, in_, out_);
    else
        ctx.kernels.linear_fwd(x, fp32_of(w, ctx).data<float>(), bias, y, rows, in_, out_);
}

Tensor Linear::forward(const Tensor& x, RunContext& ctx) {
    DS_CHECK(x.defined() && x.dim() >= 1, DS_ERR_INVALID_ARGUMENT, "%s: input is undefined or a scalar",
             label(*this).c_str());
    DS_CHECK(x.dtype() == DType::F32 && x.is_contiguous(), DS_ERR_INVALID_ARGUMENT,
             "%s: input must be a contiguous fp32 tensor", label(*this).c_str());
    check_on_run_device(x, ctx, label(*this).c_str(), "input");
    DS_CHECK(x.shape().back() == in_, DS_ERR_INVALID_ARGUMENT, "%s: input shape %s: last dim must be in_features = %lld",
             label(*this).c_str(), shape_to_string(x.shape()).c_str(), static_cast<long long>(in_));
    check_weights("forward", ctx.device);
    const int64_t rows = x.numel() / in_;
    Shape ys = x.shape();
    ys.back() = out_;
    Tensor y = new_activation(ys, ctx);
    apply(x.data<float>(), y.data<float>(), rows, ctx);
    last_ops_.macs = static_cast<double>(x.numel()) * static_cast<double>(out_);
    last_ops_.flops = 2.0 * last_ops_.macs;
    drop();
    if (ctx.training) {
        // Borrowed memory may change before backward: keep a copy of it.
        saved_x_ = x.owns_storage() ? x : x.to(DType::F32, run_allocator(ctx), MemCategory::Buffers);
        saved_bytes_ = static_cast<int64_t>(x.nbytes());
        saved_meter_ = ctx.meter;
        if (saved_meter_) saved_meter_->add(saved_bytes_);
    }
    return y;
}

Tensor Linear::backward(const Tensor& dy, RunContext& ctx) {
    DS_CHECK(saved_x_.defined(), DS_ERR_INVALID_STATE,
             "%s: backward without a training-mode forward (nothing saved)", label(*this).c_str());
    Shape ys = saved_x_.shape();
    ys.back() = out_;
    DS_CHECK(dy.defined() && dy.dtype() == DType::F32 && dy.is_contiguous(), DS_ERR_INVALID_ARGUMENT,
             "%s: output gradient must be a contiguous fp32 tensor", label(*this).c_str());
    check_on_run_device(dy, ctx, label(*this).c_str(), "output gradient");
    DS_CHECK(dy.shape() == ys, DS_ERR_INVALID_ARGUMENT, "%s: output gradient has shape %s, the forward produced %s",
             label(*this).c_str(), shape_to_string(dy.shape()).c_str(), shape_to_string(ys).c_str());
    check_weights("backward", ctx.device);
    check_grad(*this, *w_, "weight", ctx.device);
    if (has_bias_) check_grad(*this, bias_, "bias", ctx.device);
    const int64_t rows = saved_x_.numel() / in_;
    const float* g = dy.data<float>();
    Tensor dx = new_activation(saved_x_.shape(), ctx);
    float* db = has_bias_ ? bias_.grad.data<float>() : nullptr;
    const Tensor& w = w_->value;
    if (ctx.matmul_dtype == DType::BF16 && w.dtype() == DType::BF16) {
        // bf16 products on the bf16 weights in place: dy and x rounded once for both.
        ctx.kernels.linear_bwd_bf16w(g, saved_x_.data<float>(), w.data<uint16_t>(), dx.data<float>(),
                                     w_->grad.data<float>(), db, rows, in_, out_);
    } else if (ctx.matmul_dtype == DType::BF16) {
        // bf16 products: dy, x and w rounded once for both (nn_gemm.h).
        ctx.kernels.linear_bwd_bf16(g, saved_x_.data<float>(), w.data<float>(), dx.data<float>(),
                                    w_->grad.data<float>(), db, rows, in_, out_);
    } else {
        // dx[rows, in] = dy[rows, out] w[out, in]; dW[out, in] += dy^T x
        ctx.kernels.gemm(false, false, rows, in_, out_, 1.0f, g, out_, fp32_of(w, ctx).data<float>(), in_, 0.0f,
                         dx.data<float>(), in_);
        ctx.kernels.gemm(true, false, out_, in_, rows, 1.0f, g, out_, saved_x_.data<float>(), in_, 1.0f,
                         w_->grad.data<float>(), in_);
        if (db != nullptr) ctx.kernels.bias_grad(g, db, rows, out_);
    }
    drop();
    return dx;
}

void Linear::drop() {
    if (!saved_x_.defined()) return;
    if (saved_meter_) saved_meter_->sub(saved_bytes_);
    saved_x_ = Tensor();
    saved_bytes_ = 0;
    saved_meter_ = nullptr;
}

void Linear::clear_saved() { drop(); }

}  // namespace ds::nn
