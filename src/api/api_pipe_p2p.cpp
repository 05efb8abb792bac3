// C ABI: tensors between pipeline stages (ds_pipe_send / ds_pipe_recv).
// Argument checks and handle validation; the protocol is in src/pipe/p2p.cpp.
#include "api/api_guard.h"
#include "api/comm_handles.h"
#include "core/dlpack_interop.h"
#include "pipe/p2p.h"

extern "C" {

DS_API ds_status_t ds_pipe_send(const ds_comm_t* comm, const DLTensor* tensor, int32_t peer, int32_t tag) {
    return DS_GUARDED({
        auto c = ds::api::comm_retain(comm);
        const ds::Tensor t = ds::from_dltensor(tensor, "tensor", true);
        ds::pipe::send_tensor(*c, t, peer, tag);
    });
}

DS_API ds_status_t ds_pipe_recv(const ds_comm_t* comm, DLTensor* tensor, int32_t peer, int32_t tag) {
    return DS_GUARDED({
        auto c = ds::api::comm_retain(comm);
        const ds::Tensor t = ds::from_dltensor(tensor, "tensor", true);
        ds::pipe::recv_tensor(*c, t, peer, tag);
    });
}

}  // extern "C"
