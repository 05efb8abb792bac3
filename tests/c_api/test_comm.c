/* C API test for ds_comm_*: every status each function documents that a
 * world of one (no mpirun) can produce. Statuses that need several ranks
 * (DS_ERR_COMM from a failed set-up, DS_ERR_TIMEOUT) are covered by the MPI
 * tests in tests/mpi. Build-dependent paths read ds_build_info(). */
#define _POSIX_C_SOURCE 200112L

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int build_has(const char* key) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":true", key);
    return strstr(ds_build_info(), pattern) != NULL;
}

static ds_comm_options_t defaults(void) {
    ds_comm_options_t o;
    ds_comm_options_init(&o, sizeof o);
    return o;
}

static void test_options_init(void) {
    ds_comm_options_t o;
    memset(&o, 0x5A, sizeof o);
    ds_comm_options_init(&o, sizeof o);
    CHECK(o.struct_size == sizeof o);
    CHECK(o.timeout_ms == DS_UNSET_I32);
    CHECK(o.debug == DS_UNSET_I32);
    CHECK(o.backend == DS_COMM_BACKEND_AUTO);
    CHECK(o.device == DS_UNSET_I32);
    ds_comm_options_init(NULL, sizeof o); /* harmless */
    memset(&o, 0x5A, sizeof o);
    ds_comm_options_init(&o, 2); /* too small to hold struct_size: untouched */
    CHECK(o.timeout_ms == (int32_t)0x5A5A5A5A);
    ds_comm_options_init(&o, sizeof(size_t) + sizeof(int32_t)); /* a shorter, older layout */
    CHECK(o.struct_size == sizeof(size_t) + sizeof(int32_t));
    CHECK(o.timeout_ms == DS_UNSET_I32);
    CHECK(o.debug == (int32_t)0x5A5A5A5A);
}

static void test_world_of_one(void) {
    ds_comm_t* c = NULL;
    int32_t v = -1;
    ds_comm_options_t o = defaults();
    EXPECT_OK(ds_comm_create_world(NULL, &c));
    CHECK(c != NULL);
    EXPECT_OK(ds_comm_rank(c, &v));
    CHECK(v == 0);
    EXPECT_OK(ds_comm_size(c, &v));
    CHECK(v == 1);
    EXPECT_OK(ds_comm_backend(c, &v));
    CHECK(v == DS_COMM_BACKEND_LOCAL);
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_rank(c, NULL), "'out'");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_size(c, NULL), "'out'");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_backend(c, NULL), "'out'");
    EXPECT_OK(ds_comm_finalize(c));
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_comm_finalize(c), "already finalized");
    EXPECT_OK(ds_comm_size(c, &v)); /* still answers after finalize */
    CHECK(v == 1);
    ds_comm_destroy(c);

    o.backend = DS_COMM_BACKEND_LOCAL;
    o.timeout_ms = 1000;
    o.debug = 1;
    EXPECT_OK(ds_comm_create_world(&o, &c));
    EXPECT_OK(ds_comm_backend(c, &v));
    CHECK(v == DS_COMM_BACKEND_LOCAL);
    ds_comm_destroy(c); /* without finalize: fine for local */
}

static void test_bad_options(void) {
    ds_comm_t* c = (ds_comm_t*)(void*)&c;
    ds_comm_options_t o = defaults();
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_create_world(&o, NULL), "'out'");
    o.timeout_ms = 0;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_create_world(&o, &c), "options.timeout_ms = 0");
    CHECK(c == NULL);
    o = defaults();
    o.timeout_ms = -5;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_create_world(&o, &c), "options.timeout_ms = -5");
    o = defaults();
    o.debug = 2;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_create_world(&o, &c), "options.debug = 2");
    o = defaults();
    o.backend = 7;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_create_world(&o, &c), "options.backend = 7");
    o = defaults();
    o.device = -3;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_create_world(&o, &c), "options.device = -3");
    o = defaults();
    o.struct_size = 4;
    EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_comm_create_world(&o, &c), "struct_size = 4");
    EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_comm_create_mpi(0, &o, &c), "struct_size = 4");
    CHECK(c == NULL);

    setenv("DS_COMM_TIMEOUT_MS", "soon", 1);
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_create_world(NULL, &c), "DS_COMM_TIMEOUT_MS='soon'");
    setenv("DS_COMM_TIMEOUT_MS", "0", 1);
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_create_world(NULL, &c), "DS_COMM_TIMEOUT_MS='0'");
    setenv("DS_COMM_TIMEOUT_MS", "2500", 1);
    EXPECT_OK(ds_comm_create_world(NULL, &c));
    ds_comm_destroy(c);
    unsetenv("DS_COMM_TIMEOUT_MS");
    setenv("DS_COMM_DEBUG", "yes", 1);
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_create_world(NULL, &c), "DS_COMM_DEBUG='yes'");
    unsetenv("DS_COMM_DEBUG");

    /* A world of one cannot stand in for a launch of several ranks. */
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    o = defaults();
    o.backend = DS_COMM_BACKEND_LOCAL;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_create_world(&o, &c), "one of 4 ranks");
    if (!build_has("mpi"))
        EXPECT_STATUS(DS_ERR_UNSUPPORTED, ds_comm_create_world(NULL, &c), "has no MPI");
    unsetenv("OMPI_COMM_WORLD_SIZE");

    o = defaults();
    o.backend = DS_COMM_BACKEND_LOCAL;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_create_mpi(0, &o, &c), "backend 'local'");
    CHECK(c == NULL);
}

static void test_handles(void) {
    ds_comm_t* c = NULL;
    int32_t v;
    ds_comm_t* foreign = (ds_comm_t*)(void*)&v;
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_comm_rank(NULL, &v), "'comm' is NULL");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_comm_size(foreign, &v), "not a live communicator");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_comm_backend(NULL, &v), "'comm' is NULL");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_comm_finalize(NULL), "'comm' is NULL");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_comm_abort(foreign, "x"), "not a live communicator");
    ds_comm_destroy(NULL);
    ds_comm_destroy(foreign); /* not ours: ignored */
    EXPECT_OK(ds_comm_create_world(NULL, &c));
    ds_comm_destroy(c);
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_comm_rank(c, &v), "not a live communicator");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_comm_finalize(c), "not a live communicator");
    ds_comm_destroy(c); /* twice: harmless */
}

static ds_comm_t* g_comm = NULL;

static void* abort_from_thread(void* arg) {
    ds_status_t* st = (ds_status_t*)arg;
    *st = ds_comm_abort(g_comm, "stopped by another thread");
    return NULL;
}

static void test_abort(void) {
    pthread_t t;
    ds_status_t st = -1;
    EXPECT_OK(ds_comm_create_world(NULL, &g_comm));
    CHECK(pthread_create(&t, NULL, abort_from_thread, &st) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(st == DS_OK);
    EXPECT_OK(ds_comm_abort(g_comm, NULL)); /* idempotent, NULL reason is fine */
    EXPECT_STATUS(DS_ERR_COMM, ds_comm_finalize(g_comm), "stopped by another thread");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_comm_finalize(g_comm), "already finalized");
    EXPECT_OK(ds_comm_abort(g_comm, "after finalize"));
    ds_comm_destroy(g_comm);
}

static void test_nccl_request(void) {
    ds_comm_t* c = NULL;
    ds_comm_options_t o = defaults();
    ds_status_t st;
    o.backend = DS_COMM_BACKEND_NCCL;
    st = ds_comm_create_world(&o, &c);
    if (!build_has("cuda")) {
        EXPECT_STATUS(DS_ERR_UNSUPPORTED, st, "NCCL communicator is not supported by this build");
    } else if (st == DS_OK) { /* a GPU is present: a one-rank NCCL world */
        int32_t v = -1;
        EXPECT_OK(ds_comm_backend(c, &v));
        CHECK(v == DS_COMM_BACKEND_NCCL);
        EXPECT_OK(ds_comm_finalize(c));
        ds_comm_destroy(c);
        o.device = 4096;
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_create_world(&o, &c), "options.device = 4096");
    } else {
        EXPECT_STATUS(DS_ERR_DEVICE, st, "needs a CUDA device");
    }
    CHECK(st == DS_OK || c == NULL);
}

/* Last: MPI_Finalize cannot be undone in this process. */
static void test_mpi_life_cycle(void) {
    ds_comm_t* c = NULL;
    ds_comm_options_t o = defaults();
    int32_t v = -1;
    o.backend = DS_COMM_BACKEND_MPI;
    if (!build_has("mpi")) {
        EXPECT_STATUS(DS_ERR_UNSUPPORTED, ds_comm_create_world(&o, &c), "not supported by this build");
        EXPECT_STATUS(DS_ERR_UNSUPPORTED, ds_comm_create_mpi(0, NULL, &c), "not supported by this build");
        CHECK(c == NULL);
        return;
    }
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_comm_create_mpi(0, NULL, &c), "MPI is not initialised");
    CHECK(c == NULL);
    /* Asked for MPI outside mpirun: a one-rank MPI world the library initialises. */
    EXPECT_OK(ds_comm_create_world(&o, &c));
    EXPECT_OK(ds_comm_backend(c, &v));
    CHECK(v == DS_COMM_BACKEND_MPI);
    EXPECT_OK(ds_comm_size(c, &v));
    CHECK(v == 1);
    {
        ds_comm_t* bad = NULL;
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_create_mpi(77, NULL, &bad), "mpi_comm_f 77");
        CHECK(bad == NULL);
    }
    EXPECT_OK(ds_comm_finalize(c)); /* the library's last MPI communicator: MPI_Finalize */
    ds_comm_destroy(c);
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_comm_create_world(&o, &c), "MPI has been finalized");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_comm_create_mpi(0, NULL, &c), "MPI has been finalized");
    CHECK(c == NULL);
    /* A world of one without MPI still works. */
    EXPECT_OK(ds_comm_create_world(NULL, &c));
    ds_comm_destroy(c);
}

int main(void) {
    test_options_init();
    test_world_of_one();
    test_bad_options();
    test_handles();
    test_abort();
    test_nccl_request();
    test_mpi_life_cycle();
    return ds_test_finish();
}
