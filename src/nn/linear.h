// Linear: y = x w^T + b on x [..., in] (leading dims are rows), weight
// [out, in] as PyTorch stores it. The forward runs dsk_linear_fwd (one
// oneDNN matmul reading the weights as stored, bias fused: reordering them
// into oneDNN's packed layout on every call, as the weights change every
// step, measured slower, docs/PERFORMANCE.md "Linear / GEMM"); backward:
// dx = dy w, dW += dy^T x, db += sum over rows of dy.
// A Linear can borrow another module's Param as its weight (tied
// embeddings: the GPT's lm_head reads the token embedding [vocab, n_embd]);
// its gradient then adds into that Param's grad, and own_params() lists only
// the bias so the shared weight is counted once.
// The weight may be bf16 (a bf16 engine's working weights, bound in place:
// Param::reads_bf16): the bf16 products read it directly; fp32 products
// (matmul_dtype F32) widen it into a temporary first.
#pragma once

#include <cstdint>

#include "nn/module.h"

namespace ds::nn {

class Linear : public Module {
public:
    // Owns its weight [out, in] (and bias [out]): values start at zero (the
    // model initializes them), grads are bound by the owner/engine.
    Linear(int64_t in, int64_t out, bool bias);
    // Reads `shared_weight` ([out, in], owned by another module that outlives
    // this one) as its weight; DS_ERR_INVALID_ARGUMENT for a null or non-2-D one.
    Linear(Param* shared_weight, bool bias);

    const char* type() const override { return "Linear"; }
    std::vector<Param*> own_params() override;
    Tensor forward(const Tensor& x, RunContext& ctx) override;
    Tensor backward(const Tensor& dy, RunContext& ctx) override;
    void clear_saved() override;
    OpCount op_count() const override { return last_ops_; }

    int64_t in_features() const { return in_; }
    int64_t out_features() const { return out_; }
    Param& weight() { return *w_; }
    bool has_bias() const { return has_bias_; }
    Param& bias() { return bias_; }  // meaningful only with has_bias()
    bool weight_is_shared() const { return w_ != &own_w_; }
    // y[rows, out] = x[rows, in] w^T + b with the forward's kernel (bf16 or
    // fp32 products by ctx.matmul_dtype), keeping nothing: the MLP's
    // recomputation of c_fc's output, bit-identical to the forward's.
    // (Without the bias when bias_in_product() is off.)
    void apply(const float* x, float* y, int64_t rows, RunContext& ctx);
    // Whether forward/apply add the bias inside the product (the default).
    bool bias_in_product() const { return bias_in_product_; }

protected:
    // Off: forward returns x w^T alone and the subclass adds the bias itself
    // (the row-parallel layer adds it once, after its all-reduce). Backward
    // is unchanged: db += sum over rows of dy either way.
    void set_bias_in_product(bool on) { bias_in_product_ = on; }

private:
    void check_weights(const char* when, Device dev) const;
    void drop();

    int64_t in_ = 0, out_ = 0;
    bool has_bias_ = false;
    bool bias_in_product_ = true;
    Param own_w_, bias_;
    Param* w_ = &own_w_;
    Tensor saved_x_;  // the input, kept for dW in training mode
    int64_t saved_bytes_ = 0;
    ActivationMeter* saved_meter_ = nullptr;
    OpCount last_ops_;
};

}  // namespace ds::nn
