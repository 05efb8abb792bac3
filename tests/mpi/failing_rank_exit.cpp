// A rank that fails and exits (exit status 1, as a C host's exit(1) or an
// uncaught Python exception) must end the job at once. Run by CTest through
// `timeout` under mpirun (not a GoogleTest program): every rank joins the
// world through the library (which initialises MPI and finalises it at
// exit), the last rank releases its communicator and exits with status 1,
// the others block in an all-reduce (DS_COMM_TIMEOUT_MS is set far beyond the
// test's limit). Before the fix the failing rank's exit handler called
// MPI_Finalize, which waited for the blocked ranks, and the job hung.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "comm/communicator.h"

int main() {
    using ds::DType;
    using ds::comm::Op;
    try {
        auto comm = ds::comm::make_world(ds::comm::options_from_env());
        const int rank = comm->rank(), size = comm->size();
        std::vector<float> x(1000, 1.0f);
        comm->allreduce(x.data(), x.data(), x.size(), DType::F32, Op::Sum);
        comm->barrier();
        if (rank == size - 1) {
            std::printf("failing_rank_exit: rank %d exits with status 1\n", rank);
            std::fflush(stdout);
            comm.reset();  // no communicator left: the exit handler decides alone
            std::exit(1);
        }
        comm->allreduce(x.data(), x.data(), x.size(), DType::F32, Op::Sum);
        std::printf("failing_rank_exit: rank %d: the all-reduce completed without rank %d\n", rank, size - 1);
        return 2;
    } catch (const ds::Error& e) {
        std::printf("failing_rank_exit: failed with status %d: %s\n", e.status(), e.what());
        return 3;
    }
}
