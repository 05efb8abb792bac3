// A rank that dies must not hang the others. Run by run_killed_rank.sh under
// mpirun (not a GoogleTest program): every rank joins the world through the
// library (which initialises MPI), reduces a few times, then the last rank
// SIGKILLs itself while the others keep reducing. Each survivor must leave
// with an error: torn down by mpirun, or, when mpirun lets them live
// (--enable-recovery), by the communicator's own timeout (DS_COMM_TIMEOUT_MS).
#include <csignal>
#include <cstdio>
#include <ctime>
#include <vector>

#include "comm/communicator.h"

namespace {
double now_s() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

int main() {
    using ds::DType;
    using ds::comm::Op;
    try {
        auto comm = ds::comm::make_world(ds::comm::options_from_env());
        const int rank = comm->rank(), size = comm->size();
        std::vector<float> x(100000);
        for (int it = 0; it < 3; ++it) {
            std::fill(x.begin(), x.end(), 1.0f);
            comm->allreduce(x.data(), x.data(), x.size(), DType::F32, Op::Sum);
            if (x[0] != static_cast<float>(size)) {
                std::printf("killed_rank: rank %d: wrong sum %g\n", rank, x[0]);
                return 2;
            }
        }
        comm->barrier();
        if (rank == size - 1) {
            std::printf("killed_rank: rank %d kills itself at %.3f\n", rank, now_s());
            std::fflush(stdout);
            std::raise(SIGKILL);
        }
        try {
            for (;;) comm->allreduce(x.data(), x.data(), x.size(), DType::F32, Op::Sum);
        } catch (const ds::Error& e) {
            std::printf("killed_rank: survivor rank %d failed with status %d at %.3f: %s\n", rank, e.status(), now_s(),
                        e.what());
            std::fflush(stdout);
            return 3;
        }
    } catch (const ds::Error& e) {
        std::printf("killed_rank: setup failed with status %d: %s\n", e.status(), e.what());
        return 2;
    }
}
