// C ABI: collectives on whole tensors (ds_comm_all_reduce, ...). Handle and
// DLTensor validation; the rules are in src/comm/tensor_collectives.cpp.
#include "api/api_guard.h"
#include "api/comm_handles.h"
#include "comm/tensor_collectives.h"
#include "core/dlpack_interop.h"

static_assert(DS_REDUCE_SUM == static_cast<int32_t>(ds::comm::Op::Sum) &&
                  DS_REDUCE_AVG == static_cast<int32_t>(ds::comm::Op::Avg) &&
                  DS_REDUCE_MAX == static_cast<int32_t>(ds::comm::Op::Max),
              "DS_REDUCE_* must equal ds::comm::Op");

namespace {

ds::comm::Op op_of(int32_t op, const char* fn) {
    DS_CHECK(op >= DS_REDUCE_SUM && op <= DS_REDUCE_MAX, DS_ERR_INVALID_ARGUMENT,
             "%s: op = %d is not DS_REDUCE_SUM (0), DS_REDUCE_AVG (1) or DS_REDUCE_MAX (2)", fn, op);
    return static_cast<ds::comm::Op>(op);
}

ds::Tensor tensor_arg(const DLTensor* t, const char* name) { return ds::from_dltensor(t, name, true); }

}  // namespace

extern "C" {

DS_API ds_status_t ds_comm_all_reduce(const ds_comm_t* comm, DLTensor* tensor, int32_t op) {
    return DS_GUARDED({
        auto c = ds::api::comm_retain(comm);
        const ds::comm::Op o = op_of(op, "all_reduce");
        ds::comm::all_reduce_tensor(*c, tensor_arg(tensor, "tensor"), o);
    });
}

DS_API ds_status_t ds_comm_all_gather_into_tensor(const ds_comm_t* comm, DLTensor* output, const DLTensor* input) {
    return DS_GUARDED({
        auto c = ds::api::comm_retain(comm);
        ds::comm::all_gather_tensor(*c, tensor_arg(output, "output"), tensor_arg(input, "input"));
    });
}

DS_API ds_status_t ds_comm_reduce_scatter_tensor(const ds_comm_t* comm, DLTensor* output, const DLTensor* input,
                                                 int32_t op) {
    return DS_GUARDED({
        auto c = ds::api::comm_retain(comm);
        const ds::comm::Op o = op_of(op, "reduce_scatter_tensor");
        ds::comm::reduce_scatter_tensor(*c, tensor_arg(output, "output"), tensor_arg(input, "input"), o);
    });
}

DS_API ds_status_t ds_comm_all_to_all_single(const ds_comm_t* comm, DLTensor* output, const DLTensor* input) {
    return DS_GUARDED({
        auto c = ds::api::comm_retain(comm);
        ds::comm::all_to_all_tensor(*c, tensor_arg(output, "output"), tensor_arg(input, "input"));
    });
}

DS_API ds_status_t ds_comm_broadcast(const ds_comm_t* comm, DLTensor* tensor, int32_t src) {
    return DS_GUARDED({
        auto c = ds::api::comm_retain(comm);
        ds::comm::broadcast_tensor(*c, tensor_arg(tensor, "tensor"), src);
    });
}

DS_API ds_status_t ds_comm_barrier(const ds_comm_t* comm) {
    return DS_GUARDED({
        auto c = ds::api::comm_retain(comm);
        c->barrier();
    });
}

}  // extern "C"
