// Making communicators. Each backend's file defines its factory; a build
// without MPI or CUDA compiles those factories to DS_ERR_UNSUPPORTED, so
// callers choose at run time and never test DS_WITH_MPI/DS_WITH_CUDA.
#pragma once

#include <cstdint>
#include <memory>

#include "comm/communicator.h"

namespace ds::comm {

// A world of one: every collective is a copy (comm_local.cpp).
std::shared_ptr<Communicator> make_local(const Options& options);

// MPI over a duplicate of the host's communicator, given as its Fortran
// handle (MPI_Comm_c2f). Collective over that communicator. MPI must be
// initialised with MPI_THREAD_MULTIPLE (the watchdog thread calls MPI).
// Throws DS_ERR_UNSUPPORTED (no MPI in this build; thread level below
// MULTIPLE), DS_ERR_INVALID_STATE (MPI not initialised, or finalised),
// DS_ERR_INVALID_ARGUMENT (not a live intra-communicator), DS_ERR_COMM.
std::shared_ptr<Communicator> make_mpi(int32_t mpi_comm_f, const Options& options);

// MPI over MPI_COMM_WORLD, initialising MPI (MPI_THREAD_MULTIPLE) when the
// host has not; the last such communicator's finalize() calls MPI_Finalize.
std::shared_ptr<Communicator> make_mpi_world(const Options& options);

// NCCL over the ranks of `bootstrap` (an MPI or local communicator, which
// carries the ncclUniqueId and the debug fingerprints), one rank per GPU:
// options.device, or the local rank modulo the device count. Throws
// DS_ERR_UNSUPPORTED (no CUDA/NCCL in this build), DS_ERR_DEVICE (no CUDA
// device, CUDA error), DS_ERR_COMM (NCCL error).
std::shared_ptr<Communicator> make_nccl(std::shared_ptr<Communicator> bootstrap, const Options& options);

bool mpi_built();
bool nccl_built();
// CUDA devices visible to this process; 0 without CUDA or without a driver.
int cuda_device_count();

// The world this process was started in, as options.backend asks
// (world.cpp): under mpirun/srun MPI_COMM_WORLD (MPI, or NCCL bootstrapped
// over it), else a world of one (local, or a one-rank NCCL communicator).
std::shared_ptr<Communicator> make_world(const Options& options);

// From a host MPI communicator, as options.backend asks (auto and mpi: MPI;
// nccl: NCCL bootstrapped over it; local: DS_ERR_INVALID_ARGUMENT).
std::shared_ptr<Communicator> make_from_mpi(int32_t mpi_comm_f, const Options& options);

}  // namespace ds::comm
