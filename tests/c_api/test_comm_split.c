/* C API test for ds_comm_split in a world of one (no mpirun): every status
 * it documents that one process can produce, and a split communicator used
 * by the other ds_comm_* functions and by an engine. Several ranks:
 * tests/mpi/test_comm_split.cpp. */
#include "check.h"

static const char* kConfig = "{\"train_batch_size\": 8, \"gradient_accumulation_steps\": 2}";

static void test_split_world_of_one(void) {
    ds_comm_t* world = NULL;
    ds_comm_t* part = NULL;
    ds_comm_t* again = NULL;
    int32_t v = -1;
    EXPECT_OK(ds_comm_create_world(NULL, &world));

    /* any color >= 0: a new world of one, independent of the parent */
    EXPECT_OK(ds_comm_split(world, 7, 3, &part));
    CHECK(part != NULL && part != world);
    EXPECT_OK(ds_comm_rank(part, &v));
    CHECK(v == 0);
    EXPECT_OK(ds_comm_size(part, &v));
    CHECK(v == 1);
    EXPECT_OK(ds_comm_backend(part, &v));
    CHECK(v == DS_COMM_BACKEND_LOCAL);

    /* a split of a split */
    EXPECT_OK(ds_comm_split(part, 0, 0, &again));
    CHECK(again != NULL);
    EXPECT_OK(ds_comm_size(again, &v));
    CHECK(v == 1);

    /* undefined colors join nothing: DS_OK and NULL */
    part = (ds_comm_t*)(void*)&v; /* overwritten with NULL */
    ds_comm_destroy(again);
    again = (ds_comm_t*)(void*)&v;
    EXPECT_OK(ds_comm_split(world, DS_COMM_SPLIT_UNDEFINED, 0, &again));
    CHECK(again == NULL);
    again = (ds_comm_t*)(void*)&v;
    EXPECT_OK(ds_comm_split(world, -5, 0, &again));
    CHECK(again == NULL);
    part = NULL;

    /* bad arguments */
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_split(world, 0, 0, NULL), "'out'");
    again = (ds_comm_t*)(void*)&v;
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_comm_split(NULL, 0, 0, &again), "'comm'", "NULL");
    CHECK(again == NULL);
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_comm_split((const ds_comm_t*)(void*)&v, 0, 0, &again), "not a live");

    /* an aborted communicator cannot be split; its earlier split part is unaffected */
    EXPECT_OK(ds_comm_split(world, 0, 0, &part));
    EXPECT_OK(ds_comm_abort(world, "test abort"));
    EXPECT_STATUS(DS_ERR_COMM, ds_comm_split(world, 0, 0, &again), "split", "test abort");
    CHECK(again == NULL);
    EXPECT_OK(ds_comm_finalize(part));
    ds_comm_destroy(part);
    ds_comm_destroy(world);

    /* a finalized one neither */
    EXPECT_OK(ds_comm_create_world(NULL, &world));
    EXPECT_OK(ds_comm_finalize(world));
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_comm_split(world, 0, 0, &again), "split", "finalized");
    CHECK(again == NULL);
    ds_comm_destroy(world);
}

static void test_engine_on_split(void) {
    ds_comm_t* world = NULL;
    ds_comm_t* part = NULL;
    ds_engine_t* e = NULL;
    ds_engine_options_t o;
    int32_t n = 0;
    EXPECT_OK(ds_comm_create_world(NULL, &world));
    EXPECT_OK(ds_comm_split(world, 1, 0, &part));
    ds_engine_options_init(&o, sizeof o);
    o.comm = part;
    EXPECT_OK(ds_engine_create(kConfig, &o, &e));
    EXPECT_OK(ds_engine_world_size(e, &n));
    CHECK(n == 1);
    ds_comm_destroy(part); /* the engine keeps its reference */
    ds_engine_destroy(e);
    EXPECT_OK(ds_comm_finalize(world));
    ds_comm_destroy(world);
}

int main(void) {
    test_split_world_of_one();
    test_engine_on_split();
    return ds_test_finish();
}
