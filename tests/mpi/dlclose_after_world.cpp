// A host that loads libdeepspeed_c with dlopen, joins the world (the library
// initialises MPI and registers its exit handler), releases the communicator
// and dlclose's the library, must still exit cleanly: the exit handler
// (glibc on_exit, which survives dlclose) must find the library's code
// mapped. Run under mpirun with the library's path as the argument.
#include <dlfcn.h>

#include <cstdio>

extern "C" {
typedef int (*create_world_fn)(const void* opts, void** out);
typedef void (*destroy_fn)(void* comm);
}

int main(int argc, char** argv) {
    if (argc != 2) {
        std::printf("usage: dlclose_after_world LIBDEEPSPEED_C\n");
        return 2;
    }
    void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        std::printf("dlclose_after_world: dlopen failed: %s\n", dlerror());
        return 2;
    }
    auto create = reinterpret_cast<create_world_fn>(dlsym(lib, "ds_comm_create_world"));
    auto destroy = reinterpret_cast<destroy_fn>(dlsym(lib, "ds_comm_destroy"));
    if (!create || !destroy) {
        std::printf("dlclose_after_world: missing symbols\n");
        return 2;
    }
    void* comm = nullptr;
    const int rc = create(nullptr, &comm);
    if (rc != 0) {
        std::printf("dlclose_after_world: ds_comm_create_world failed with %d\n", rc);
        return 2;
    }
    destroy(comm);
    dlclose(lib);
    std::printf("dlclose_after_world: library closed, exiting\n");
    return 0;
}
