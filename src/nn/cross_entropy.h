// Losses (nn::Loss, model.h: not Modules, they map the model's output and
// targets to a scalar).
//
// CrossEntropyLoss: torch's F.cross_entropy(logits, targets,
// ignore_index=..., reduction="mean") on logits [..., V] and integer targets
// (int32 or int64) with one element per row of logits: the mean of
// log-sum-exp(row) - row[target] over rows whose target is not ignore_index
// (NaN when every row is ignored, as torch). Forward keeps the logits (a
// reference, not a copy) and one log-sum-exp per row; backward recomputes
// the softmax: dlogits = dloss/count * (softmax - onehot), 0 on ignored rows.
//
// MSELoss: mean((pred - target)^2) over all elements (torch's MSELoss).
#pragma once

#include <cstdint>

#include "nn/layer_util.h"
#include "nn/model.h"
#include "nn/module.h"

namespace ds::nn {

class CrossEntropyLoss : public Loss {
public:
    explicit CrossEntropyLoss(int64_t ignore_index = -100) : ignore_index_(ignore_index) {}

    const char* name() const override { return "CrossEntropyLoss"; }
    // A target outside [0, V) that is not ignore_index: DS_ERR_INVALID_ARGUMENT
    // naming the row and the value; shape mismatches likewise.
    float forward(const Tensor& logits, const Tensor& targets, RunContext& ctx) override;
    // dlogits for d(loss) = dloss of the last forward; then drops what forward kept.
    Tensor backward(float dloss, RunContext& ctx) override;
    void clear_saved();
    // Softmax flops: numel of the logits (flops profiler rule).
    OpCount op_count() const;

    int64_t ignore_index() const { return ignore_index_; }
    // Rows counted by the last forward (not ignored).
    int64_t count() const { return count_; }

private:
    int64_t ignore_index_;
    Saved logits_, targets_, lse_;
    int64_t count_ = 0;
    int64_t last_numel_ = 0;
};

class MSELoss : public Loss {
public:
    const char* name() const override { return "MSELoss"; }
    // pred and target: fp32 of the same shape.
    float forward(const Tensor& pred, const Tensor& target, RunContext& ctx) override;
    Tensor backward(float dloss, RunContext& ctx) override;
    void clear_saved();
    // 3 flops an element (subtract, square, sum).
    OpCount op_count() const;

private:
    Saved pred_, target_;
    int64_t last_numel_ = 0;
};

}  // namespace ds::nn
