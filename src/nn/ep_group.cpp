#include "nn/ep_group.h"

#include "core/error.h"

namespace ds::nn {

EpGroup make_ep_group(comm::Communicator* c, int rank, int size) {
    DS_CHECK(size >= 1, DS_ERR_INVALID_ARGUMENT, "expert parallel: size = %d must be >= 1", size);
    DS_CHECK(rank >= 0 && rank < size, DS_ERR_INVALID_ARGUMENT, "expert parallel: rank = %d is not in [0, size = %d)",
             rank, size);
    DS_CHECK(c != nullptr || size == 1, DS_ERR_INVALID_ARGUMENT,
             "expert parallel: no communicator for a group of size = %d (only a group of one may omit it)", size);
    if (c != nullptr) {
        DS_CHECK(c->size() == size && c->rank() == rank, DS_ERR_INVALID_ARGUMENT,
                 "expert parallel: rank = %d, size = %d do not match the communicator (rank %d of %d)", rank, size,
                 c->rank(), c->size());
        DS_CHECK(!c->device_buffers(), DS_ERR_UNSUPPORTED,
                 "expert parallel: the %s communicator exchanges device buffers; the MoE layer runs on host tensors",
                 comm::backend_name(c->backend()));
    }
    return EpGroup{c, rank, size};
}

}  // namespace ds::nn
