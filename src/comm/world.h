// How this process was started, read from the launcher's environment: under
// mpirun/srun the world is MPI_COMM_WORLD, otherwise a world of one.
#pragma once

#include <string>

namespace ds::comm {

struct LaunchInfo {
    bool launched = false;  // started by an MPI launcher (mpirun, mpiexec, srun)
    std::string variable;   // the variable that says so, e.g. "OMPI_COMM_WORLD_SIZE=2"
    int world_size = -1;    // ranks the launcher started, -1 when it does not say
};

// Looks at OMPI_COMM_WORLD_SIZE (Open MPI), PMIX_RANK (PMIx launchers),
// PMI_SIZE / PMI_RANK (MPICH Hydra, Slurm PMI), SLURM_PROCID (srun) and
// MV2_COMM_WORLD_SIZE (MVAPICH), in that order.
LaunchInfo detect_launch();

// This process's rank on its node (OMPI_COMM_WORLD_LOCAL_RANK,
// MPI_LOCALRANKID, SLURM_LOCALID, PMI_LOCAL_RANK, LOCAL_RANK), or -1.
int local_rank_from_env();

}  // namespace ds::comm
