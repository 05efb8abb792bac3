// Embedding: token ids (int32 or int64, any shape) -> rows of a [num, dim]
// table, output [..., dim]. An id outside [0, num) is DS_ERR_INVALID_ARGUMENT
// naming the id and its position. Backward scatter-adds dy into the weight's
// gradient (deterministically, dsk_embedding_bwd) and returns an undefined
// Tensor: ids have no gradient. weight() is what a tied lm_head borrows.
#pragma once

#include <cstdint>

#include "nn/module.h"

namespace ds::nn {

class Embedding : public Module {
public:
    // Weight values start at zero (the model initializes them); the grad is
    // bound by the owner/engine.
    Embedding(int64_t num, int64_t dim);

    const char* type() const override { return "Embedding"; }
    std::vector<Param*> own_params() override { return {&w_}; }
    Tensor forward(const Tensor& ids, RunContext& ctx) override;
    Tensor backward(const Tensor& dy, RunContext& ctx) override;
    void clear_saved() override;

    int64_t num_embeddings() const { return num_; }
    int64_t embedding_dim() const { return dim_; }
    Param& weight() { return w_; }

private:
    void drop();

    int64_t num_ = 0, dim_ = 0;
    Param w_;
    Tensor saved_ids_;
    int64_t saved_bytes_ = 0;
    ActivationMeter* saved_meter_ = nullptr;
};

}  // namespace ds::nn
