// The expert-parallel group an MoE layer's experts are split over (issue 15,
// item 3; DeepSpeed's expert group of ep_size ranks): the communicator the
// token all-to-alls run over, this rank's index in it and its size. Rank r
// holds experts [r*E/size, (r+1)*E/size). A group of one needs no
// communicator (every expert local).
#pragma once

#include "comm/communicator.h"

namespace ds::nn {

struct EpGroup {
    comm::Communicator* comm = nullptr;  // host-memory communicator; null only when size == 1
    int rank = 0;                        // this rank's index in the group, [0, size)
    int size = 1;                        // ranks the experts are split over, >= 1
    // The same ranks for the token blocks of a layer running on a GPU: a
    // communicator of device buffers (NCCL; the host communicator itself on
    // the host-backed test device). Null until an engine on a device sets
    // it (MoeLayer::use_device_exchange).
    comm::Communicator* device = nullptr;
};

// The group of (c, rank, size), checked: size >= 1, rank in [0, size), c
// given when size > 1, and when given c's own rank and size equal rank and
// size. DS_ERR_INVALID_ARGUMENT naming the value that is wrong; a device
// (NCCL) communicator is DS_ERR_UNSUPPORTED (the layer runs on host tensors).
EpGroup make_ep_group(comm::Communicator* c, int rank, int size);

}  // namespace ds::nn
