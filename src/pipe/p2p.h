// Point-to-point tensors between pipeline stages (ds_pipe_send/recv): a
// fixed-size header (dtype, shape, byte count) then the bytes, on the
// communicator's timed send/recv (comm/communicator.h), so a peer that never
// answers is DS_ERR_TIMEOUT, not a hang. The receiver checks the header
// against its own tensor; on a mismatch it still takes the bytes (into
// scratch), so the stream stays aligned and the communicator usable, and
// reports what differs. Host memory only (local and MPI communicators).
#pragma once

#include "comm/communicator.h"
#include "core/tensor.h"

namespace ds::pipe {

// Blocking. `t`: a contiguous host tensor. peer: a rank of `c` other than
// this one; tag in [0, 32767] (a header and its bytes share it).
void send_tensor(comm::Communicator& c, const Tensor& t, int peer, int tag);
// Blocking. `t` must have the dtype and shape that were sent; its bytes are
// overwritten. A mismatch is DS_ERR_INVALID_ARGUMENT naming both.
void recv_tensor(comm::Communicator& c, const Tensor& t, int peer, int tag);

}  // namespace ds::pipe
