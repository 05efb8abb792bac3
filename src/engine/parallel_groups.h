// DeepSpeed's process groups for the built-in GPT trained with pipeline
// stages (S = pipeline.stages), tensor parallelism (N =
// tensor_parallel.autotp_size) and expert parallelism (P = moe.ep_size) in
// any combination (docs/PIPELINE.md sections 5-7):
//   the world is pipe x data x model, DeepSpeed's
//   PipeModelDataParallelTopology (model fastest: rank = (stage * D +
//   replica) * N + tp_rank, D = W / (S * N) data-parallel replicas);
//   the D replicas of each (stage, tp rank) are cut into expert groups of P
//   consecutive replicas (groups.py _get_expert_parallel_ranks: expert
//   groups inside each stage's and tp rank's data-parallel group), so
//   replica = expert-data index * P + expert rank, and the expert-data group
//   is the D / P replicas with the same expert rank.
// Without pipeline and tensor parallelism this is groups.py's
// _create_expert_and_data_parallel (expert groups of P consecutive ranks).
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace ds {

struct ParallelGroups {
    int stages = 1, replicas = 1, ep = 1, tp = 1;          // S, D, P, N
    int stage = 0, replica = 0, ep_rank = 0, tp_rank = 0;  // this rank's coordinates
    // This rank's communicators (each a split of the world; null where noted):
    std::shared_ptr<comm::Communicator> pipe;         // the S stages of this replica and tp rank (null: S = 1)
    std::shared_ptr<comm::Communicator> data;         // the D replicas of this stage and tp rank
    std::shared_ptr<comm::Communicator> expert;       // the P replicas of this expert group (null: P = 1)
    std::shared_ptr<comm::Communicator> expert_data;  // the D / P replicas holding the same experts (= data: P = 1)
    std::shared_ptr<comm::Communicator> model;        // the N tp ranks of this stage and replica (null: N = 1)
    // The ranks among which one copy of the model is spread: this replica's
    // stages, tp ranks and expert ranks (the gradient norm's group; null when
    // that is this rank alone).
    std::shared_ptr<comm::Communicator> norm;
};

// Collective over `world` (every rank calls it with the same sizes). The
// caller has checked that S * N divides the world and P divides W / (S * N)
// (DS_ERR_INTERNAL otherwise).
ParallelGroups make_parallel_groups(const std::shared_ptr<comm::Communicator>& world, int stages, int tp, int ep);

}  // namespace ds
