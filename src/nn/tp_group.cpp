#include "nn/tp_group.h"

#include "comm/tensor_collectives.h"
#include "core/error.h"

namespace ds::nn {

TpGroup make_tp_group(comm::Communicator* c, int rank, int size) {
    DS_CHECK(size >= 1, DS_ERR_INVALID_ARGUMENT, "tensor parallel: size = %d must be >= 1", size);
    DS_CHECK(rank >= 0 && rank < size, DS_ERR_INVALID_ARGUMENT, "tensor parallel: rank = %d is not in [0, size = %d)",
             rank, size);
    DS_CHECK(c != nullptr || size == 1, DS_ERR_INVALID_ARGUMENT,
             "tensor parallel: no communicator for a group of size = %d (only a group of one may omit it)", size);
    if (c != nullptr) {
        DS_CHECK(c->size() == size && c->rank() == rank, DS_ERR_INVALID_ARGUMENT,
                 "tensor parallel: rank = %d, size = %d do not match the communicator (rank %d of %d)", rank, size,
                 c->rank(), c->size());
        DS_CHECK(!c->device_buffers(), DS_ERR_UNSUPPORTED,
                 "tensor parallel: the %s communicator reduces device buffers; the layers run on host tensors",
                 comm::backend_name(c->backend()));
    }
    return TpGroup{c, rank, size};
}

void tp_all_reduce_sum(const TpGroup& g, const Tensor& t) {
    DS_CHECK(t.defined() && t.dtype() == DType::F32, DS_ERR_INTERNAL, "tensor parallel all-reduce: not an fp32 tensor");
    if (g.size == 1) return;
    comm::all_reduce_tensor(*g.comm, t, comm::Op::Sum);
}

}  // namespace ds::nn
