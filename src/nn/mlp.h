// Mlp: the transformer's feed-forward block, c_fc Linear(C, I) -> GELU (tanh)
// -> c_proj Linear(I, C) -> dropout. With gelu_checkpoint (DeepSpeed's
// option) the GELU keeps no input: backward recomputes c_fc's output from the
// input c_fc keeps anyway (one extra [rows, C] x [C, I] matmul) instead of
// holding the [rows, I] pre-activation. Same numbers either way.
#pragma once

#include <cstdint>
#include <memory>

#include "nn/dropout.h"
#include "nn/gelu.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace ds::nn {

class Mlp : public Module {
public:
    // hidden, inner >= 1; pdrop in [0, 1) (DS_ERR_INVALID_ARGUMENT otherwise).
    Mlp(int64_t hidden, int64_t inner, float pdrop, bool bias, bool gelu_checkpoint = false);

    const char* type() const override { return "MLP"; }
    std::vector<Module*> children() override;
    Tensor forward(const Tensor& x, RunContext& ctx) override;
    Tensor backward(const Tensor& dy, RunContext& ctx) override;
    void clear_saved() override;

    // Names the children "<prefix>c_fc", "<prefix>gelu", "<prefix>c_proj",
    // "<prefix>dropout" and the Linears' parameters.
    void set_names(const std::string& prefix);
    bool gelu_checkpoint() const { return gelu_checkpoint_; }

    // Tensor parallelism (nn/tp_transformer.h): a column-parallel `c_fc`
    // (this rank's block of the inner features) and a row-parallel `c_proj`
    // (reading that block) replace the Linears. DS_ERR_INVALID_ARGUMENT when
    // their shapes do not chain (c_fc's out = c_proj's in, the hidden size kept).
    void shard(std::unique_ptr<Linear> c_fc, std::unique_ptr<Linear> c_proj);
    bool sharded() const { return sharded_; }

    Linear& c_fc() { return *c_fc_; }
    Linear& c_proj() { return *c_proj_; }
    Dropout& dropout() { return *drop_; }

private:
    bool gelu_checkpoint_ = false;
    bool sharded_ = false;
    std::unique_ptr<Linear> c_fc_, c_proj_;
    std::unique_ptr<Gelu> gelu_;
    std::unique_ptr<Dropout> drop_;
    Tensor x_;  // gelu_checkpoint: the input c_fc keeps (shared storage, not counted again)
};

}  // namespace ds::nn
