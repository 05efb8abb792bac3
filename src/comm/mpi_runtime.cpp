#ifdef DS_WITH_MPI
#include "comm/mpi_runtime.h"

#include "comm/mpi_include.h"

#include <cstdlib>
#include <mutex>
#if defined(__GLIBC__)
#include <dlfcn.h>
#endif

#include "core/error.h"

namespace ds::comm::mpi_runtime {

namespace {
std::mutex& mu() {
    static std::mutex m;
    return m;
}
bool g_initialized_by_library = false;
int g_users = 0;

// When the library initialised MPI (a host that never touched MPI, under
// mpirun), it also finalises it at process exit — unless a communicator is
// still alive (its watchdog thread may be inside MPI), then MPI is left as is.
// A process that exits with a non-zero status (a C host's exit(1), Python's
// uncaught exception) is failing: MPI_Finalize would wait for its peers, who
// may be blocked in a collective waiting for it, and the job would hang until
// the communicator timeout. Left unfinalised, its exit ends the job at once
// (mpirun tears the job down when a rank exits non-zero).
void finalize_at_exit_with_status(int status) {
    std::lock_guard<std::mutex> lock(mu());
    int fin = 0;
    MPI_Finalized(&fin);
    if (g_initialized_by_library && g_users == 0 && !fin && status == 0) MPI_Finalize();
}

#if defined(__GLIBC__)
void finalize_on_exit(int status, void*) { finalize_at_exit_with_status(status); }
void register_exit_handler() {
    // Unlike atexit, an on_exit handler is not dropped when its library is
    // dlclose'd: pin this library in memory so the handler stays callable.
    Dl_info self{};
    if (dladdr(reinterpret_cast<void*>(&finalize_on_exit), &self) && self.dli_fname)
        dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    on_exit(finalize_on_exit, nullptr);
}
#else
// No on_exit: the exit status is unknown, so the process finalises as before.
void finalize_at_exit() { finalize_at_exit_with_status(0); }
void register_exit_handler() { std::atexit(finalize_at_exit); }
#endif

const char* thread_level_name(int level) {
    if (level == MPI_THREAD_SINGLE) return "MPI_THREAD_SINGLE";
    if (level == MPI_THREAD_FUNNELED) return "MPI_THREAD_FUNNELED";
    if (level == MPI_THREAD_SERIALIZED) return "MPI_THREAD_SERIALIZED";
    if (level == MPI_THREAD_MULTIPLE) return "MPI_THREAD_MULTIPLE";
    return "an unknown thread level";
}
}  // namespace

bool finalized() {
    int fin = 0;
    MPI_Finalized(&fin);
    return fin != 0;
}

void require(bool may_init) {
    std::lock_guard<std::mutex> lock(mu());
    DS_CHECK(!finalized(), DS_ERR_INVALID_STATE,
             "MPI has been finalized in this process; it cannot be initialised again");
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        DS_CHECK(may_init, DS_ERR_INVALID_STATE,
                 "MPI is not initialised: call MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) before "
                 "ds_comm_create_mpi, or use ds_comm_create_world");
        int provided = 0;
        const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
        DS_CHECK(rc == MPI_SUCCESS, DS_ERR_COMM, "MPI_Init_thread failed with error %d", rc);
        g_initialized_by_library = true;
        register_exit_handler();
    }
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    DS_CHECK(level >= MPI_THREAD_MULTIPLE, DS_ERR_UNSUPPORTED,
             "MPI was initialised with %s; the MPI communicator needs MPI_THREAD_MULTIPLE (its "
             "watchdog thread calls MPI): initialise MPI with MPI_Init_thread(..., "
             "MPI_THREAD_MULTIPLE, ...)",
             thread_level_name(level));
}

void add_user() {
    std::lock_guard<std::mutex> lock(mu());
    ++g_users;
}

void remove_user(bool finalize) {
    std::lock_guard<std::mutex> lock(mu());
    if (g_users > 0) --g_users;
    if (finalize && g_users == 0 && g_initialized_by_library && !finalized()) MPI_Finalize();
}

}  // namespace ds::comm::mpi_runtime
#endif  // DS_WITH_MPI
