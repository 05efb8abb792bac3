// Tensor parallelism for the built-in transformer layer (issue 15, item 4),
// Megatron's split of attention and MLP over the topology's `model` axis:
//   attention: c_attn (fused [3C, C] q, k, v) column-parallel, rank r keeping
//              the q, k and v rows of heads [r*H/size, (r+1)*H/size), so it
//              computes H/size whole heads; c_proj row-parallel over those
//              heads' channels (one all-reduce in forward);
//   MLP:       c_fc column-parallel (a block of the inner features), c_proj
//              row-parallel (one all-reduce in forward);
//   LayerNorms and dropouts stay whole: after each row-parallel all-reduce
//   every rank holds the whole activation, so the hidden dropout masks
//   (keyed by seed, forward_index, module id, element) are the unsplit
//   layer's on every rank; the attention-probability dropout of a local head
//   is indexed by its global head (nn/attention.h), so it is too.
// Backward all-reduces the input gradient of each column-parallel layer (two
// per layer), so the layer's input gradient is whole and equal on all ranks.
// Parameter gradients: the split ones are this rank's block of the unsplit
// gradient; the replicated ones (tp_param_split below) are whole and equal on
// every rank. Reducing gradients over the data axis only and computing the
// norm across model ranks is the engine's part.
#pragma once

#include <vector>

#include "comm/communicator.h"
#include "nn/transformer_layer.h"

namespace ds::nn {

// Splits a built and initialised `layer` over the group (c, rank, size)
// (nn/tp_group.h's make_tp_group rules): replaces its four Linears by
// parallel ones holding this rank's slices of their current values (same
// names, module ids), and makes the attention run on its local heads.
// An MoE layer in place of the MLP (replace_mlp) stays whole: DeepSpeed's
// default (enable_expert_tensor_parallelism false) does not split experts;
// its input is whole and equal on every rank after the attention's
// row-parallel all-reduce, so it computes the same outputs everywhere, and
// its parameters are replicated (tp_param_split) with equal gradients.
// Every rank of the group must shard the same layer (same config, same
// values) and then run its forwards and backwards together.
// Errors: heads % size != 0 or (dense MLP) intermediate_size % size != 0 ->
// DS_ERR_INVALID_ARGUMENT naming them; a layer already sharded ->
// DS_ERR_INVALID_STATE. Gradient buffers of the new parameters are not
// bound (as for any new module: the owner binds them).
void shard_transformer_layer(TransformerLayer& layer, comm::Communicator* c, int rank, int size);

// The parameters of `root` and its descendants (in all_params order) by how
// tensor parallelism holds them: `split` are the blocks of column- and
// row-parallel layers (each rank holds a different block: their squared
// norms add over the model axis), `replicated` everything else (LayerNorms,
// row-parallel biases, MoE layers, any unsharded module: the same on every
// rank, counted once). A list rather than a flag on Param, so Param stays as it is.
struct TpParamSplit {
    std::vector<Param*> split;
    std::vector<Param*> replicated;
};
TpParamSplit tp_param_split(Module& root);

}  // namespace ds::nn
