// The NCCL communicator's entry points in a build without CUDA (built
// instead of src/comm/cuda/comm_nccl.cpp, see cmake/Modules.cmake): no
// devices, and make_nccl reports the build as unsupported.
#include "comm/factory.h"
#include "core/error.h"

namespace ds::comm {

int cuda_device_count() { return 0; }

bool nccl_built() { return false; }

std::shared_ptr<Communicator> make_nccl(std::shared_ptr<Communicator>, const Options&) {
    ::ds::fail(DS_ERR_UNSUPPORTED,
               "the NCCL communicator is not supported by this build (configured without CUDA; rebuild "
               "with -DDS_WITH_CUDA=ON)");
}

}  // namespace ds::comm
