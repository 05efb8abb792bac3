// The tensor-parallel group a module's collectives run over (issue 15, item 4):
// the communicator of the topology's `model` axis, this rank's index in it and
// its size. The parallel linears (nn/tp_linear.h) all-reduce activations and
// input gradients over it with SUM; a group of one needs no communicator.
#pragma once

#include "comm/communicator.h"
#include "core/tensor.h"

namespace ds::nn {

struct TpGroup {
    comm::Communicator* comm = nullptr;  // host-memory communicator; null only when size == 1
    int rank = 0;                        // this rank's index in the group, [0, size)
    int size = 1;                        // ranks the layers are split over, >= 1
};

// The group of (c, rank, size), checked: size >= 1, rank in [0, size), c
// given when size > 1, and when given c's own rank and size equal rank and
// size. DS_ERR_INVALID_ARGUMENT naming the value that is wrong; a device
// (NCCL) communicator is DS_ERR_UNSUPPORTED (the layers run on host tensors).
TpGroup make_tp_group(comm::Communicator* c, int rank, int size);

// In place: every rank's t (contiguous fp32 on the host) becomes the sum of
// all ranks' t. Nothing to do in a group of one.
void tp_all_reduce_sum(const TpGroup& g, const Tensor& t);

}  // namespace ds::nn
