#include "comm/tensor_collectives.h"

#include <string>

#include "core/error.h"

namespace ds::comm {

void check_host_tensor(const Communicator& c, const Tensor& t, const char* what) {
    DS_CHECK(t.defined(), DS_ERR_INVALID_ARGUMENT, "%s: no tensor", what);
    DS_CHECK(!c.device_buffers(), DS_ERR_UNSUPPORTED,
             "%s: host tensors over the %s communicator (device buffers) are not supported yet; use an MPI "
             "communicator", what, backend_name(c.backend()));
    DS_CHECK(t.device().is_cpu(), DS_ERR_INVALID_ARGUMENT, "%s: must be in host memory (kDLCPU)", what);
    DS_CHECK(t.is_contiguous(), DS_ERR_INVALID_ARGUMENT, "%s: must be contiguous (row-major)", what);
}

void check_comm_tensor(const Communicator& c, const Tensor& t, const char* what) {
    DS_CHECK(t.defined(), DS_ERR_INVALID_ARGUMENT, "%s: no tensor", what);
    if (c.device_buffers()) {
        const Device want = Device::cuda(c.device_index());
        DS_CHECK(t.device() == want, DS_ERR_INVALID_ARGUMENT,
                 "%s: is in %s memory, but the %s communicator's buffers are on %s (kDLCUDA, device_id %d)", what,
                 t.device().str().c_str(), backend_name(c.backend()), want.str().c_str(), c.device_index());
    } else {
        DS_CHECK(t.device().is_cpu(), DS_ERR_INVALID_ARGUMENT,
                 "%s: is on %s, but the %s communicator moves host memory (kDLCPU); device tensors need an NCCL "
                 "communicator on their device", what, t.device().str().c_str(), backend_name(c.backend()));
    }
    DS_CHECK(t.is_contiguous(), DS_ERR_INVALID_ARGUMENT, "%s: must be contiguous (row-major)", what);
}

namespace {

void same_dtype(const char* op, const Tensor& output, const Tensor& input) {
    DS_CHECK(output.dtype() == input.dtype(), DS_ERR_INVALID_ARGUMENT, "%s: output is %s but input is %s", op,
             dtype_name(output.dtype()), dtype_name(input.dtype()));
}

// `whole` must hold size() blocks of `block`'s numel.
void whole_of_blocks(const char* op, const char* whole_name, const Tensor& whole, const char* block_name,
                     const Tensor& block, int size) {
    DS_CHECK(whole.numel() == block.numel() * size, DS_ERR_INVALID_ARGUMENT,
             "%s: %s has %lld elements; it must have %s's %lld x %d ranks = %lld", op, whole_name,
             static_cast<long long>(whole.numel()), block_name, static_cast<long long>(block.numel()), size,
             static_cast<long long>(block.numel() * size));
}

}  // namespace

void all_reduce_tensor(Communicator& c, const Tensor& t, Op op) {
    check_comm_tensor(c, t, "all_reduce: tensor");
    c.allreduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), t.dtype(), op);
}

void all_gather_tensor(Communicator& c, const Tensor& output, const Tensor& input) {
    check_comm_tensor(c, output, "all_gather_into_tensor: output");
    check_comm_tensor(c, input, "all_gather_into_tensor: input");
    same_dtype("all_gather_into_tensor", output, input);
    whole_of_blocks("all_gather_into_tensor", "output", output, "input", input, c.size());
    c.allgather(input.data_ptr(), output.data_ptr(), static_cast<size_t>(input.numel()), input.dtype());
}

void reduce_scatter_tensor(Communicator& c, const Tensor& output, const Tensor& input, Op op) {
    check_comm_tensor(c, output, "reduce_scatter_tensor: output");
    check_comm_tensor(c, input, "reduce_scatter_tensor: input");
    same_dtype("reduce_scatter_tensor", output, input);
    whole_of_blocks("reduce_scatter_tensor", "input", input, "output", output, c.size());
    c.reduce_scatter(input.data_ptr(), output.data_ptr(), static_cast<size_t>(output.numel()), output.dtype(), op);
}

void all_to_all_tensor(Communicator& c, const Tensor& output, const Tensor& input) {
    check_comm_tensor(c, output, "all_to_all_single: output");
    check_comm_tensor(c, input, "all_to_all_single: input");
    same_dtype("all_to_all_single", output, input);
    DS_CHECK(output.numel() == input.numel(), DS_ERR_INVALID_ARGUMENT,
             "all_to_all_single: output has %lld elements but input %lld (equal splits: the same count)",
             static_cast<long long>(output.numel()), static_cast<long long>(input.numel()));
    DS_CHECK(input.numel() % c.size() == 0, DS_ERR_INVALID_ARGUMENT,
             "all_to_all_single: %lld elements do not split evenly over %d ranks",
             static_cast<long long>(input.numel()), c.size());
    c.alltoall(input.data_ptr(), output.data_ptr(), static_cast<size_t>(input.numel() / c.size()), input.dtype());
}

void broadcast_tensor(Communicator& c, const Tensor& t, int root) {
    check_comm_tensor(c, t, "broadcast: tensor");
    DS_CHECK(root >= 0 && root < c.size(), DS_ERR_INVALID_ARGUMENT, "broadcast: src = %d is not a rank of 0..%d",
             root, c.size() - 1);
    c.broadcast(t.data_ptr(), static_cast<size_t>(t.numel()), t.dtype(), root);
}

}  // namespace ds::comm
