// Expert parallelism for the built-in MoE layer (issue 15, item 3; DeepSpeed's
// deepspeed/moe MOELayer with ep_size > 1): the E experts are split over an
// expert group of `size` ranks, rank r holding experts [r*E/size,
// (r+1)*E/size). Each rank gates its OWN tokens (capacity from its local token
// count, l_aux local), and then:
//   dispatch: the kept routes' tokens, laid out [E, rows, C] (expert e's in
//             rows [0, n_e)), go by one all-to-all to the ranks holding their
//             experts; rows is the largest n_e over the group (one allgather
//             of the per-expert counts), so every block has the same size;
//   experts:  each local expert runs once on its tokens from every rank (in
//             rank order), padding rows skipped;
//   combine:  one all-to-all back; each rank combines its routes' outputs
//             with its own gate weights, as the unsplit layer does.
// Backward mirrors it (the reverse all-to-alls carry the outputs' gradients
// to the experts and the tokens' gradients back). So each rank's output,
// input gradient, l_aux and gate/residual gradients equal the unsplit
// layer's on that rank's input, and a local expert's parameter gradient is
// the SUM over the group of the unsplit layer's gradients of that expert on
// each rank's input: the engine reduces expert gradients over the
// expert-data-parallel group only (moe_expert_params below).
// With dropout inside the experts (pdrop > 0) the masks are drawn over the
// concatenated tokens, so they differ from the unsplit layer's (DeepSpeed's
// do too: its experts also see every rank's tokens at once).
#pragma once

#include <vector>

#include "comm/communicator.h"
#include "nn/moe_layer.h"

namespace ds::nn {

// Splits a built and initialised `layer` over the group (c, rank, size)
// (nn/ep_group.h's make_ep_group rules): keeps only this rank's experts (the
// other experts' modules are destroyed). Parameter names are unchanged: a
// local expert keeps its GLOBAL index, "...deepspeed_experts.<global j>.".
// DeepSpeed's live module numbers a rank's experts locally from 0 (its
// module.state_dict() says deepspeed_experts.0 on every rank) and renames
// them to the global index only in its expert checkpoint files
// (layer_<l>_expert_<global j>_mp_rank_XX_model_states.pt), which these
// names therefore match. Module ids are unchanged too. Every
// rank of the group must shard the same layer (same config and values) and
// then run its forwards and backwards together. size == 1: nothing changes.
// Errors: num_experts % size != 0 -> DS_ERR_INVALID_ARGUMENT naming both; a
// layer already sharded -> DS_ERR_INVALID_STATE. Gradient buffers stay
// bound to the kept parameters; a flat buffer over the whole layer must be
// rebuilt by its owner (shard before binding).
void shard_moe_layer(MoeLayer& layer, comm::Communicator* c, int rank, int size);

// The parameters of `root` and its descendants (in all_params order) by how
// expert parallelism holds them: `expert` are every MoE layer's (local)
// experts' parameters (a different set on each rank of the expert group:
// reduced over the expert-data-parallel group only), `replicated` everything
// else (gates, residual MLPs and coefficients, all non-MoE modules: reduced
// over the whole data-parallel group). Unsharded layers' experts are listed
// as `expert` too (DeepSpeed marks them so whatever ep_size).
struct MoeParamSplit {
    std::vector<Param*> expert;
    std::vector<Param*> replicated;
};
MoeParamSplit moe_expert_params(Module& root);

}  // namespace ds::nn
