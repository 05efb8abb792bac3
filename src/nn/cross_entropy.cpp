#include "nn/cross_entropy.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace ds::nn {

float CrossEntropyLoss::forward(const Tensor& logits, const Tensor& targets, RunContext& ctx) {
    check_activation(logits, ctx, "CrossEntropyLoss", "logits");
    DS_CHECK(logits.dim() >= 2, DS_ERR_INVALID_ARGUMENT, "CrossEntropyLoss logits: shape %s, expected [rows, V]",
             shape_to_string(logits.shape()).c_str());
    const int64_t V = logits.shape().back();
    const int64_t rows = V > 0 ? logits.numel() / V : 0;
    DS_CHECK(targets.defined(), DS_ERR_INVALID_ARGUMENT, "CrossEntropyLoss targets: tensor is undefined");
    DS_CHECK(targets.dtype() == DType::I32 || targets.dtype() == DType::I64, DS_ERR_INVALID_ARGUMENT,
             "CrossEntropyLoss targets: dtype %s, expected int32 or int64", dtype_name(targets.dtype()));
    DS_CHECK(targets.is_contiguous(), DS_ERR_INVALID_ARGUMENT, "CrossEntropyLoss targets: must be contiguous");
    check_on_run_device(targets, ctx, "CrossEntropyLoss", "targets");
    DS_CHECK(targets.numel() == rows, DS_ERR_INVALID_ARGUMENT,
             "CrossEntropyLoss targets: shape %s has %lld elements, logits %s have %lld rows",
             shape_to_string(targets.shape()).c_str(), static_cast<long long>(targets.numel()),
             shape_to_string(logits.shape()).c_str(), static_cast<long long>(rows));
    const int tdt = targets.dtype() == DType::I32 ? DSK_I32 : DSK_I64;
    Tensor lse = new_activation({rows}, ctx);
    int64_t count = 0;
    const double sum = ctx.kernels.softmax_xent_fwd(logits.data<float>(), targets.data_ptr(), tdt,
                                                    static_cast<size_t>(rows), static_cast<size_t>(V),
                                                    ignore_index_, nullptr, lse.data<float>(), &count);
    last_numel_ = logits.numel();
    count_ = count;
    if (ctx.training) {
        // The model's output: counted here when this loss is its only keeper.
        logits_.keep(logits, ctx, /*counted=*/output_donated_);
        targets_.keep(targets, ctx, false);
        lse_.keep(lse, ctx);
    } else {
        clear_saved();
    }
    if (count == 0) return std::numeric_limits<float>::quiet_NaN();
    return static_cast<float>(sum / static_cast<double>(count));
}

Tensor CrossEntropyLoss::backward(float dloss, RunContext& ctx) {
    DS_CHECK(lse_.defined(), DS_ERR_INVALID_ARGUMENT,
             "CrossEntropyLoss backward: no training-mode forward to differentiate (eval forward, or backward "
             "already ran)");
    const Tensor& logits = logits_.get();
    const int64_t V = logits.shape().back();
    const int64_t rows = logits.numel() / V;
    const int tdt = targets_.get().dtype() == DType::I32 ? DSK_I32 : DSK_I64;
    // Donated logits are overwritten by their gradient (the kernel reads
    // each element before writing it); else a new buffer.
    Tensor dl = output_donated_ ? logits : new_activation(logits.shape(), ctx);
    const float scale = count_ > 0 ? static_cast<float>(static_cast<double>(dloss) / count_) : 0.0f;
    ctx.kernels.softmax_xent_bwd(logits.data<float>(), targets_.get().data_ptr(), tdt, lse_.get().data<float>(),
                                 static_cast<size_t>(rows), static_cast<size_t>(V), ignore_index_, scale,
                                 dl.data<float>());
    clear_saved();
    return dl;
}

void CrossEntropyLoss::clear_saved() {
    logits_.reset();
    targets_.reset();
    lse_.reset();
}

OpCount CrossEntropyLoss::op_count() const {
    OpCount c;
    c.flops = static_cast<double>(last_numel_);
    return c;
}

float MSELoss::forward(const Tensor& pred, const Tensor& target, RunContext& ctx) {
    check_activation(pred, ctx, "MSELoss", "pred");
    check_same_shape(target, pred.shape(), ctx, "MSELoss", "target");
    const size_t n = static_cast<size_t>(pred.numel());
    const double s = ctx.kernels.mse_fwd(pred.data<float>(), target.data<float>(), n);
    last_numel_ = pred.numel();
    if (ctx.training) {
        pred_.keep(pred, ctx, false);
        target_.keep(target, ctx, false);
    } else {
        clear_saved();
    }
    return n == 0 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(s / static_cast<double>(n));
}

Tensor MSELoss::backward(float dloss, RunContext& ctx) {
    DS_CHECK(pred_.defined(), DS_ERR_INVALID_ARGUMENT,
             "MSELoss backward: no training-mode forward to differentiate (eval forward, or backward already ran)");
    const Tensor& pred = pred_.get();
    const size_t n = static_cast<size_t>(pred.numel());
    Tensor d = new_activation(pred.shape(), ctx);
    const float scale = n > 0 ? static_cast<float>(2.0 * dloss / static_cast<double>(n)) : 0.0f;
    ctx.kernels.mse_bwd(pred.data<float>(), target_.get().data<float>(), n, scale, d.data<float>());
    clear_saved();
    return d;
}

void MSELoss::clear_saved() {
    pred_.reset();
    target_.reset();
}

OpCount MSELoss::op_count() const {
    OpCount c;
    c.flops = 3.0 * static_cast<double>(last_numel_);
    return c;
}

}  // namespace ds::nn
