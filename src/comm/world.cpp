// World detection and the backend choice behind ds_comm_create_world and
// ds_comm_create_mpi.
#include "comm/world.h"

#include <cstdlib>

#include "comm/factory.h"

namespace ds::comm {

namespace {
// A non-negative integer environment variable, or -1.
int env_int(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) return -1;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    return (*end == '\0' && n >= 0 && n <= 1 << 30) ? static_cast<int>(n) : -1;
}
}  // namespace

LaunchInfo detect_launch() {
    static const char* const kMarkers[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK",
                                           "SLURM_PROCID", "MV2_COMM_WORLD_SIZE"};
    static const char* const kSizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS",
                                         "SLURM_NTASKS", "MV2_COMM_WORLD_SIZE"};
    LaunchInfo info;
    for (const char* name : kMarkers) {
        const char* v = std::getenv(name);
        if (v && *v) {
            info.launched = true;
            info.variable = std::string(name) + "=" + v;
            break;
        }
    }
    if (!info.launched) return info;
    for (const char* name : kSizes) {
        const int n = env_int(name);
        if (n > 0) {
            info.world_size = n;
            break;
        }
    }
    return info;
}

int local_rank_from_env() {
    for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "PMI_LOCAL_RANK",
                             "LOCAL_RANK"}) {
        const int r = env_int(name);
        if (r >= 0) return r;
    }
    return -1;
}

namespace {
Options bootstrap_options(const Options& o) {
    Options b = o;
    b.debug = false;  // the NCCL communicator fingerprints its own collectives
    b.backend = Backend::Mpi;
    return b;
}
}  // namespace

std::shared_ptr<Communicator> make_world(const Options& options) {
    const LaunchInfo launch = detect_launch();
    switch (options.backend) {
        case Backend::Local:
            DS_CHECK(!launch.launched || launch.world_size <= 1, DS_ERR_INVALID_ARGUMENT,
                     "backend 'local' is a world of one, but this process is one of %d ranks (%s)",
                     launch.world_size, launch.variable.c_str());
            return make_local(options);
        case Backend::Mpi:
            return make_mpi_world(options);
        case Backend::Nccl: {
            const Options b = bootstrap_options(options);
            return make_nccl(launch.launched ? make_mpi_world(b) : make_local(b), options);
        }
        case Backend::Auto:
            break;
    }
    if (!launch.launched) return make_local(options);
    if (mpi_built()) return make_mpi_world(options);
    DS_CHECK(launch.world_size <= 1, DS_ERR_UNSUPPORTED,
             "this process was started by an MPI launcher (%s) as one of %d ranks, but this build "
             "has no MPI (rebuild with -DDS_WITH_MPI=ON)",
             launch.variable.c_str(), launch.world_size);
    return make_local(options);
}

std::shared_ptr<Communicator> make_from_mpi(int32_t mpi_comm_f, const Options& options) {
    switch (options.backend) {
        case Backend::Local:
            ::ds::fail(DS_ERR_INVALID_ARGUMENT,
                       "backend 'local' cannot be made from an MPI communicator (use "
                       "ds_comm_create_world for a world of one)");
        case Backend::Nccl:
            return make_nccl(make_mpi(mpi_comm_f, bootstrap_options(options)), options);
        case Backend::Auto:
        case Backend::Mpi:
            break;
    }
    return make_mpi(mpi_comm_f, options);
}

}  // namespace ds::comm
