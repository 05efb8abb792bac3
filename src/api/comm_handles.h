// The C handle of a communicator and its registry. A ds_comm_t is a key:
// the registry maps each live handle to a shared reference on its
// communicator, so a lookup copies that reference under the registry lock
// and can never race with ds_comm_destroy on another thread (ds_comm_abort
// is documented as callable from any thread).
#pragma once

#include <cstdint>
#include <memory>

#include "comm/communicator.h"

struct ds_comm {
    static constexpr uint32_t kMagic = 0x4d4d4f43u;  // "COMM"
    uint32_t magic = kMagic;
};

namespace ds::api {

// Registers a new handle owning one reference on `comm`.
ds_comm_t* comm_handle_create(std::shared_ptr<ds::comm::Communicator> comm);

// Unregisters and frees a handle; false when it was not live (NULL, destroyed, foreign).
bool comm_handle_destroy(ds_comm_t* h);

// Retain: a new reference on the communicator behind a live handle, or throw
// DS_ERR_INVALID_HANDLE naming `arg`. This is how an engine keeps its
// communicator alive past ds_comm_destroy; release is dropping the reference.
std::shared_ptr<ds::comm::Communicator> comm_retain(const ds_comm_t* h, const char* arg = "comm");

}  // namespace ds::api
