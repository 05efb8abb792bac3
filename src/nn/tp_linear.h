// Megatron-style tensor-parallel linear layers over a TpGroup (nn/tp_group.h).
// Both are Linears (nn/linear.h) holding this rank's block of the unsplit
// layer's weight [out, in]; their parameters keep the unsplit layer's names
// ("weight", "bias"), their shapes are the local block's.
//
// ColumnParallelLinear: a block of the output features (rows of the weight,
//   and the matching bias entries). Forward reads the whole input and returns
//   this rank's output columns (no communication); backward's input gradient
//   is the sum over ranks of each rank's dy_r w_r, so it is all-reduced.
// RowParallelLinear: a block of the input features (columns of the weight)
//   and the whole bias. Forward reads this rank's input columns, all-reduces
//   the partial products and adds the bias once, after the reduction, so the
//   output is whole and equal on every rank; backward's input gradient is
//   local (dy w_r); its bias gradient is the whole sum of dy, the same on
//   every rank (the bias is replicated, the weight split).
// Every rank of the group must run the same forwards and backwards in the
// same order (they are collectives).
#pragma once

#include <cstdint>
#include <memory>

#include "nn/linear.h"
#include "nn/tp_group.h"

namespace ds::nn {

class ColumnParallelLinear : public Linear {
public:
    // Weight [out_local, in] and bias [out_local], zero until set.
    ColumnParallelLinear(int64_t in, int64_t out_local, bool bias, const TpGroup& group);
    // This rank's block of `full`'s current values: the output features are
    // `blocks` equal blocks (3 for a fused q, k, v projection, 1 otherwise),
    // each split into group.size pieces; rank r keeps piece r of each block,
    // in block order. Names and module id are full's. out % (blocks * size)
    // != 0 is DS_ERR_INVALID_ARGUMENT.
    static std::unique_ptr<ColumnParallelLinear> shard(Linear& full, const TpGroup& group, int64_t blocks = 1);

    const char* type() const override { return "ColumnParallelLinear"; }
    Tensor backward(const Tensor& dy, RunContext& ctx) override;
    const TpGroup& group() const { return group_; }
    // The `blocks` shard() split the output features into (checkpoints map
    // the local rows back to the unsplit layer's: engine/shard_layout.h).
    int64_t blocks() const { return blocks_; }

private:
    TpGroup group_;
    int64_t blocks_ = 1;
};

class RowParallelLinear : public Linear {
public:
    // Weight [out, in_local] and bias [out], zero until set.
    RowParallelLinear(int64_t in_local, int64_t out, bool bias, const TpGroup& group);
    // This rank's input columns [r * in / size, (r + 1) * in / size) of
    // `full`'s current weight, and its whole bias. Names and module id are
    // full's. in % size != 0 is DS_ERR_INVALID_ARGUMENT.
    static std::unique_ptr<RowParallelLinear> shard(Linear& full, const TpGroup& group);

    const char* type() const override { return "RowParallelLinear"; }
    Tensor forward(const Tensor& x, RunContext& ctx) override;
    const TpGroup& group() const { return group_; }

private:
    TpGroup group_;
};

}  // namespace ds::nn
