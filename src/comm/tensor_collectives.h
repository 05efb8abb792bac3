// Collectives on whole tensors (ds_comm_all_reduce and friends, the
// deepspeed.comm / torch.distributed forms): shape and dtype rules checked
// here, each naming the argument, then one blocking Communicator operation
// (timed, logged by the comms logger, fingerprinted in debug mode like the
// engine's own). The tensors live where the communicator's buffers do: host
// memory (kDLCPU) for the local and MPI backends, the communicator's own
// device (kDLCUDA, its ordinal) for NCCL. On NCCL the collective runs on the
// communicator's stream, which is created blocking and so orders after the
// caller's work on the legacy default stream; work the caller queued on a
// non-blocking stream must be synchronized first. The call returns when the
// collective is complete.
#pragma once

#include "comm/communicator.h"
#include "core/tensor.h"

namespace ds::comm {

// The checks every tensor argument of a host collective or point-to-point
// call gets: defined, host memory, contiguous; `c` not a device communicator.
// `what` names the operation and the argument ("all_reduce: tensor").
void check_host_tensor(const Communicator& c, const Tensor& t, const char* what);
// The checks of a collective's tensor argument: defined, contiguous, and in
// the communicator's memory (host for local/MPI, cuda:<device_index()> for
// NCCL); a mismatch names both places and the communicator that fits.
void check_comm_tensor(const Communicator& c, const Tensor& t, const char* what);

// In place: every rank's `t` becomes the reduction (op) of all ranks' `t`.
void all_reduce_tensor(Communicator& c, const Tensor& t, Op op);
// output (numel = size() x input's numel, input's dtype) gets every rank's
// input in rank order. input may be output's block of this rank (in place).
void all_gather_tensor(Communicator& c, const Tensor& output, const Tensor& input);
// input (numel = size() x output's numel): block r, reduced over ranks, lands
// in rank r's output.
void reduce_scatter_tensor(Communicator& c, const Tensor& output, const Tensor& input, Op op);
// Equal splits: input and output have the same numel and dtype, a multiple of
// size(); block j of input goes to rank j, block i of output comes from rank
// i. They must not overlap.
void all_to_all_tensor(Communicator& c, const Tensor& output, const Tensor& input);
// `t` on every rank becomes root's `t` (same dtype and numel on every rank).
void broadcast_tensor(Communicator& c, const Tensor& t, int root);

}  // namespace ds::comm
