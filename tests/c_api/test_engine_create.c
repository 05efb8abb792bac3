#define _POSIX_C_SOURCE 200809L
/* C API: engine creation, options, introspection, errors. Every documented
 * status of ds_engine_create / _create_from_file / _destroy / _config_json /
 * _rank / _world_size / _set_stream / ds_status_string / ds_last_error. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "check.h"

static const char* kValid = "{\"train_batch_size\": 8, \"gradient_accumulation_steps\": 2}";

static void test_create_arguments(void) {
    ds_engine_t* e = (ds_engine_t*)0x1;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_create(NULL, NULL, &e), "config_json");
    CHECK(e == NULL);
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_create(kValid, NULL, NULL), "out");
    e = (ds_engine_t*)0x1;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_create_from_file(NULL, NULL, &e), "path");
    CHECK(e == NULL);
    EXPECT_STATUS(DS_ERR_IO, ds_engine_create_from_file("/nonexistent/ds.json", NULL, &e),
                  "/nonexistent/ds.json");
    CHECK(e == NULL);
}

static void test_options(void) {
    ds_engine_options_t o;
    ds_engine_t* e = NULL;
    unsigned char raw[sizeof(ds_engine_options_t) + 8];

    ds_engine_options_init(&o, sizeof o);
    CHECK(o.struct_size == sizeof o);
    CHECK(o.comm == NULL && o.device.device_type == kDLCPU && o.device.device_id == 0);
    CHECK(o.log_level == DS_UNSET_I32 && o.log_callback == NULL && o.cuda_stream == NULL);

    /* options_init writes only struct_size bytes */
    memset(raw, 0xAB, sizeof raw);
    ds_engine_options_init((ds_engine_options_t*)(void*)raw, sizeof(size_t) + sizeof(void*));
    CHECK(raw[sizeof(size_t) + sizeof(void*)] == 0xAB);
    ds_engine_options_init(NULL, sizeof o); /* harmless */

    o.struct_size = sizeof(size_t);
    EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_engine_create(kValid, &o, &e), "struct_size");
    CHECK(e == NULL);

    ds_engine_options_init(&o, sizeof o);
    o.comm = (ds_comm_t*)(void*)&o;
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_create(kValid, &o, &e), "options.comm");

    ds_engine_options_init(&o, sizeof o);
    o.log_level = 9;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_create(kValid, &o, &e), "log_level");

    ds_engine_options_init(&o, sizeof o);
    o.device.device_type = (DLDeviceType)77;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_create(kValid, &o, &e), "options.device");
    o.device.device_type = kDLCPU;
    o.device.device_id = 3;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_create(kValid, &o, &e), "options.device");
    o.device.device_type = kDLCUDA;
    o.device.device_id = 0;
    if (strstr(ds_build_info(), "\"cuda\":false") != NULL) {
        EXPECT_STATUS(DS_ERR_UNSUPPORTED, ds_engine_create(kValid, &o, &e), "cuda:0", "no CUDA");
        CHECK(e == NULL);
    } else { /* a CUDA build: a device-resident engine where GPU 0 exists, else DS_ERR_DEVICE */
        const ds_status_t st = ds_engine_create(kValid, &o, &e);
        CHECK(st == DS_OK || (st == DS_ERR_DEVICE && strstr(ds_last_error(), "cuda:0") != NULL));
        ds_engine_destroy(e);
        e = NULL;
    }
    o.device.device_id = -1;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_create(kValid, &o, &e), "negative");
    CHECK(e == NULL);

    /* a stream belongs to an engine on a GPU */
    ds_engine_options_init(&o, sizeof o);
    o.cuda_stream = (void*)0x1;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_create(kValid, &o, &e), "options.cuda_stream");
    CHECK(e == NULL);

    /* a live communicator: the engine keeps it alive past ds_comm_destroy */
    {
        ds_comm_t* comm = NULL;
        int32_t world = 0;
        EXPECT_OK(ds_comm_create_world(NULL, &comm));
        ds_engine_options_init(&o, sizeof o);
        o.comm = comm;
        EXPECT_OK(ds_engine_create(kValid, &o, &e));
        ds_comm_destroy(comm); /* destruction order is free */
        EXPECT_OK(ds_engine_world_size(e, &world));
        CHECK(world == 1);
        ds_engine_destroy(e);
        e = NULL;
        o.comm = comm; /* now destroyed */
        EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_create(kValid, &o, &e), "options.comm");
    }

    /* a larger struct from a newer caller is accepted while its unknown fields are 0
       (test_abi_structs.c covers the rest of the struct-evolution rules) */
    {
        struct { ds_engine_options_t base; int64_t future_field; } big;
        ds_engine_options_init(&big.base, sizeof big);
        CHECK(big.future_field == 0);
        EXPECT_OK(ds_engine_create(kValid, &big.base, &e));
        ds_engine_destroy(e);
        e = NULL;
        big.future_field = 42; /* a field this library does not have: refused, not ignored */
        EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_engine_create(kValid, &big.base, &e), "offset 56");
        CHECK(e == NULL);
    }
}

/* ds_engine_set_stream: an engine on the CPU has no stream to set */
static void test_set_stream(void) {
    ds_engine_t* e = NULL;
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_set_stream(NULL, NULL), "engine");
    EXPECT_OK(ds_engine_create(kValid, NULL, &e));
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_engine_set_stream(e, NULL), "CPU");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_engine_set_stream(e, (void*)0x1), "CPU");
    ds_engine_destroy(e);
}

static int g_log_calls = 0;
static void log_cb(int32_t level, const char* msg, void* user) {
    (void)level;
    if (user == (void*)&g_log_calls && msg && strstr(msg, "engine created")) ++g_log_calls;
}

static void test_log_callback(void) {
    ds_engine_options_t o;
    ds_engine_t* e = NULL;
    ds_engine_options_init(&o, sizeof o);
    o.log_callback = log_cb;
    o.log_user_data = &g_log_calls;
    o.log_level = DS_LOG_INFO;
    EXPECT_OK(ds_engine_create(kValid, &o, &e));
    CHECK(g_log_calls == 1);
    ds_engine_destroy(e);
    o.log_level = DS_LOG_OFF;
    EXPECT_OK(ds_engine_create(kValid, &o, &e));
    CHECK(g_log_calls == 1);
    ds_engine_destroy(e);
}

static void test_config_errors(void) {
    ds_engine_t* e = (ds_engine_t*)0x1;
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG,
                  ds_engine_create("{\"train_batch_size\": 8, \"train_micro_batch_size_per_gpu\": 3}", NULL, &e),
                  "train_batch_size", "train_micro_batch_size_per_gpu");
    CHECK(e == NULL);
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG,
                  ds_engine_create("{\"train_batch_size\": 4, \"zero_optimisation\": {\"stage\": 1}}", NULL, &e),
                  "zero_optimisation", "did you mean zero_optimization");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG,
                  ds_engine_create("{\"train_batch_size\": 4, \"train_batch_size\": 4}", NULL, &e),
                  "train_batch_size", "duplicate");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG,
                  ds_engine_create("{\"train_batch_size\": 4,\n  \"fp16\": {\"enabled\": tru}}", NULL, &e),
                  "line 2");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG,
                  ds_engine_create("{\"train_batch_size\": 4, \"zero_optimization\": {\"reduce_bucket_sise\": 5}}", NULL, &e),
                  "zero_optimization.reduce_bucket_sise", "zero_optimization.reduce_bucket_size");
    EXPECT_STATUS(DS_ERR_UNSUPPORTED,
                  ds_engine_create("{\"train_batch_size\": 4, \"hybrid_engine\": {\"enabled\": true}}", NULL, &e),
                  "hybrid_engine");
    CHECK(e == NULL);
}

static void test_from_file(void) {
    char path[] = "/tmp/ds_c_api_cfgXXXXXX";
    int fd = mkstemp(path);
    ds_engine_t* e = NULL;
    const char* bad = "{\"train_batch_size\": 4, \"gradient_clipping\": \"x\"}";
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(write(fd, kValid, strlen(kValid)) == (ssize_t)strlen(kValid));
    close(fd);
    EXPECT_OK(ds_engine_create_from_file(path, NULL, &e));
    CHECK(e != NULL);
    ds_engine_destroy(e);
    fd = open(path, O_WRONLY | O_TRUNC);
    CHECK(write(fd, bad, strlen(bad)) == (ssize_t)strlen(bad));
    close(fd);
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG, ds_engine_create_from_file(path, NULL, &e), path, "gradient_clipping");
    unlink(path);
}

static void test_introspection(void) {
    ds_engine_t* e = NULL;
    const char* json = NULL;
    int32_t v = -1;
    EXPECT_OK(ds_engine_create(kValid, NULL, &e));
    EXPECT_OK(ds_engine_config_json(e, &json));
    CHECK(json && strstr(json, "\"train_micro_batch_size_per_gpu\": 4"));
    CHECK(json && strstr(json, "\"gradient_clipping\": 1"));
    CHECK(json && strstr(json, "\"reduce_bucket_size\": 500000000"));
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_config_json(e, NULL), "out");
    EXPECT_OK(ds_engine_rank(e, &v));
    CHECK(v == 0);
    EXPECT_OK(ds_engine_world_size(e, &v));
    CHECK(v == 1);
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_rank(e, NULL), "out");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_world_size(e, NULL), "out");

    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_config_json(NULL, &json), "engine");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_rank(NULL, &v), "engine");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_world_size(NULL, &v), "engine");
    ds_engine_destroy(e);
    /* destroyed handle */
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_config_json(e, &json), "not a live engine");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_rank(e, &v), "not a live engine");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_world_size(e, &v), "not a live engine");
    ds_engine_destroy(e);    /* second destroy is harmless */
    ds_engine_destroy(NULL); /* NULL is harmless */
    /* a foreign pointer */
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_rank((const ds_engine_t*)(const void*)&v, &v), "engine");
}

static void test_status_strings(void) {
    ds_status_t s;
    for (s = DS_OK; s <= DS_ERR_INTERNAL; ++s) {
        const char* t = ds_status_string(s);
        CHECK(t != NULL && strlen(t) > 4 && strncmp(t, "DS_", 3) == 0);
    }
    CHECK(strcmp(ds_status_string(9999), "unknown status") == 0);
    CHECK(strcmp(ds_status_string(-1), "unknown status") == 0);
    CHECK(DS_OK == 0 && DS_ERR_INVALID_ARGUMENT == 1 && DS_ERR_INVALID_HANDLE == 2 &&
          DS_ERR_INVALID_STATE == 3 && DS_ERR_INVALID_CONFIG == 4 && DS_ERR_UNSUPPORTED == 5 &&
          DS_ERR_NOT_FOUND == 6 && DS_ERR_OUT_OF_MEMORY == 7 && DS_ERR_DEVICE_OUT_OF_MEMORY == 8 &&
          DS_ERR_DEVICE == 9 && DS_ERR_COMM == 10 && DS_ERR_TIMEOUT == 11 && DS_ERR_IO == 12 &&
          DS_ERR_FORMAT == 13 && DS_ERR_ABI_MISMATCH == 14 && DS_ERR_INTERNAL == 15);
    CHECK(ds_version() == DS_VERSION_NUMBER);
    CHECK(ds_abi_version() == DS_ABI_VERSION);
    CHECK(strstr(ds_build_info(), "\"simd\"") != NULL && ds_build_info()[0] == '{');
    CHECK(strstr(ds_build_info(), "\"gemm_engine\":\"") != NULL);
    CHECK(strstr(ds_build_info(), "\"cuda_architectures\":\"") != NULL);
    CHECK(strstr(ds_build_info(), "\"cuda_kernels\":[") != NULL);
}

/* ds_last_error is per thread: a failure on another thread does not change ours. */
static void* other_thread(void* arg) {
    ds_engine_t* e = NULL;
    (void)arg;
    ds_engine_create("{\"train_batch_size\": 4, \"bogus_key_from_thread\": 1}", NULL, &e);
    return strstr(ds_last_error(), "bogus_key_from_thread") ? (void*)1 : NULL;
}

static void test_last_error_thread_local(void) {
    pthread_t t;
    void* res = NULL;
    ds_engine_t* e = NULL;
    ds_engine_create("{\"train_batch_size\": 4, \"main_thread_key\": 1}", NULL, &e);
    CHECK(strstr(ds_last_error(), "main_thread_key") != NULL);
    CHECK(pthread_create(&t, NULL, other_thread, NULL) == 0);
    pthread_join(t, &res);
    CHECK(res == (void*)1);
    CHECK(strstr(ds_last_error(), "main_thread_key") != NULL);
    /* success does not clear it */
    EXPECT_OK(ds_engine_create(kValid, NULL, &e));
    CHECK(strstr(ds_last_error(), "main_thread_key") != NULL);
    ds_engine_destroy(e);
}

int main(void) {
    CHECK(ds_last_error() != NULL && ds_last_error()[0] == '\0');
    test_create_arguments();
    test_options();
    test_set_stream();
    test_log_callback();
    test_config_errors();
    test_from_file();
    test_introspection();
    test_status_strings();
    test_last_error_thread_local();
    return ds_test_finish();
}
