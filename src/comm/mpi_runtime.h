// MPI's process-wide life cycle as the library sees it: who initialised MPI,
// how many of our communicators use it, and whether the library may call
// MPI_Finalize. No MPI types here; only the MPI backend includes this, and
// only in a build with MPI.
#pragma once

namespace ds::comm::mpi_runtime {

// Makes sure MPI is usable: when nobody has initialised it and `may_init`,
// initialises it with MPI_THREAD_MULTIPLE and remembers that the library did.
// Throws DS_ERR_INVALID_STATE (not initialised and !may_init; already
// finalised), DS_ERR_UNSUPPORTED (thread level below MPI_THREAD_MULTIPLE),
// DS_ERR_COMM (MPI_Init_thread failed).
void require(bool may_init);

// A communicator starts / stops using MPI. When the last user stops with
// `finalize` and the library initialised MPI, MPI_Finalize is called.
void add_user();
void remove_user(bool finalize);

// True once MPI_Finalize has been called (by anyone).
bool finalized();

}  // namespace ds::comm::mpi_runtime
