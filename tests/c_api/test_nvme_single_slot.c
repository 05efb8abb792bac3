/* C API: the single-slot NVMe swap file (offload_optimizer.dsc_atomic_step
 * false, deepspeed_c's extension). The first AdamW step matches the float64
 * closed form (w -= lr * g / (|g| + eps)); five steps are bit-identical to
 * the two-slot file, which is twice the size. A write that fails through
 * DS_AIO_FAIL_WRITE in the middle of a step gives DS_ERR_IO naming the file
 * and the sub-groups updated in place; ds_step and ds_backward are then
 * DS_ERR_INVALID_STATE naming ds_load_checkpoint; after ds_load_checkpoint
 * the engine trains on bit-identically to one that never failed. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "tensor_util.h"

#define N_A 5
#define N_B 3000

static char g_dir[64];
static char g_config[1024];
static float g_init_a[N_A], g_init_b[N_B];

/* sub_group_size 1024 over 3005 elements: 3 sub-groups, each one 12 KiB
 * record, one 64 KiB-block request per record. */
static const char* make_config(const char* sub, const char* atomic) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", g_dir, sub);
    mkdir(path, 0700);
    snprintf(g_config, sizeof g_config,
             "{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.0}},"
             " \"zero_optimization\": {\"stage\": 2, \"sub_group_size\": 1024,"
             "   \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\", \"dsc_atomic_step\": %s}},"
             " \"aio\": {\"block_size\": 65536, \"queue_depth\": 4, \"single_submit\": false}}",
             path, atomic);
    return g_config;
}

static const char* kInMemory =
    "{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.0}},"
    " \"zero_optimization\": {\"stage\": 2}}";

static ds_engine_t* make_engine(const char* config) {
    ds_engine_t* e = NULL;
    int64_t sa[1] = {N_A}, sb[1] = {N_B};
    DLTensor ta = f32_tensor(g_init_a, 1, sa), tb = f32_tensor(g_init_b, 1, sb);
    EXPECT_OK(ds_engine_create(config, NULL, &e));
    if (!e) return NULL;
    EXPECT_OK(ds_engine_add_param(e, "a", &ta, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_add_param(e, "b", &tb, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_init(e));
    return e;
}

static float grad_of(int step, int param, int j) {
    return (float)sin(0.37 * (double)j + 1.3 * (double)step + (double)param) * 0.1f;
}

static void give_grads(ds_engine_t* e, int step) {
    static float ga[N_A], gb[N_B];
    int64_t sa[1] = {N_A}, sb[1] = {N_B};
    DLTensor ta = f32_tensor(ga, 1, sa), tb = f32_tensor(gb, 1, sb);
    int j;
    for (j = 0; j < N_A; ++j) ga[j] = grad_of(step, 0, j);
    for (j = 0; j < N_B; ++j) gb[j] = grad_of(step, 1, j);
    EXPECT_OK(ds_engine_accumulate_grad(e, "a", &ta));
    EXPECT_OK(ds_engine_accumulate_grad(e, "b", &tb));
    EXPECT_OK(ds_backward(e, NULL));
}

static ds_status_t do_step(ds_engine_t* e) {
    ds_step_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    return ds_step(e, &info);
}

static void one_step(ds_engine_t* e, int step) {
    give_grads(e, step);
    EXPECT_OK(do_step(e));
}

static const float* weights(ds_engine_t* e, const char* name) {
    DLTensor v;
    if (ds_engine_param_view(e, name, &v) != DS_OK) return NULL;
    return (const float*)v.data;
}

static int same_weights(ds_engine_t* x, ds_engine_t* y) {
    const float *xa = weights(x, "a"), *ya = weights(y, "a"), *xb = weights(x, "b"), *yb = weights(y, "b");
    return xa && ya && xb && yb && memcmp(xa, ya, sizeof(float) * N_A) == 0 &&
           memcmp(xb, yb, sizeof(float) * N_B) == 0;
}

/* The size of the one swap file under <g_dir>/<sub>/ds_swap, or -1. */
static long long swap_size(const char* sub) {
    char root[160], file[512];
    DIR* d;
    struct dirent* ent;
    struct stat st;
    long long size = -1;
    snprintf(root, sizeof root, "%s/%s/ds_swap", g_dir, sub);
    d = opendir(root);
    if (!d) return -1;
    while ((ent = readdir(d)) != NULL) {
        if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, "..")) continue;
        snprintf(file, sizeof file, "%s/%s/optimizer_state.swp", root, ent->d_name);
        if (stat(file, &st) == 0) size = (long long)st.st_size;
    }
    closedir(d);
    return size;
}

static void test_matches_two_slots(void) {
    ds_engine_t* one = make_engine(make_config("one", "false"));
    ds_engine_t* two = make_engine(make_config("two", "true"));
    const float* w;
    double worst = 0.0;
    int j, s;
    if (!one || !two) {
        CHECK(0);
        return;
    }
    CHECK(swap_size("one") > 0 && swap_size("one") * 2 == swap_size("two"));
    one_step(one, 0);
    one_step(two, 0);
    w = weights(one, "b");
    for (j = 0; j < N_B && w; ++j) {
        const double g = (double)grad_of(0, 1, j);
        const double d = fabs((double)w[j] - ((double)g_init_b[j] - 0.01 * g / (fabs(g) + 1e-8)));
        if (d > worst) worst = d;
    }
    CHECK(w != NULL && worst < 1e-5);
    for (s = 1; s < 5; ++s) {
        one_step(one, s);
        one_step(two, s);
    }
    CHECK(same_weights(one, two));
    ds_engine_destroy(one);
    ds_engine_destroy(two);
}

static void test_fault_then_checkpoint(void) {
    char ck[128];
    ds_engine_t* mem = make_engine(kInMemory);
    ds_engine_t* off;
    int s;
    /* init writes requests 1-3, steps 1 and 2 write 4-9: request 11 is the
       second sub-group of step 3. Read when the engine's backend is made. */
    setenv("DS_AIO_FAIL_WRITE", "11", 1);
    off = make_engine(make_config("fault", "false"));
    unsetenv("DS_AIO_FAIL_WRITE");
    if (!mem || !off) {
        CHECK(0);
        return;
    }
    snprintf(ck, sizeof ck, "%s/ckpt", g_dir);
    for (s = 0; s < 2; ++s) {
        one_step(mem, s);
        one_step(off, s);
    }
    EXPECT_OK(ds_save_checkpoint(off, ck, "t2", NULL));
    give_grads(off, 2);
    EXPECT_STATUS(DS_ERR_IO, do_step(off), "optimizer_state.swp", "sub-groups 0..1 of 3 had already been updated in place");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, do_step(off), "ds_load_checkpoint");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_backward(off, NULL), "ds_load_checkpoint");
    EXPECT_OK(ds_load_checkpoint(off, ck, "t2", 0, NULL));
    CHECK(same_weights(off, mem));
    for (s = 2; s < 4; ++s) {
        one_step(mem, s);
        one_step(off, s);
    }
    CHECK(same_weights(off, mem));
    ds_engine_destroy(off);
    ds_engine_destroy(mem);
}

int main(void) {
    int j;
    char cmd[128];
    strcpy(g_dir, "/tmp/ds_nvme1_c_XXXXXX");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    for (j = 0; j < N_A; ++j) g_init_a[j] = (float)j * 0.25f - 0.5f;
    for (j = 0; j < N_B; ++j) g_init_b[j] = (float)cos(0.01 * (double)j);
    test_matches_two_slots();
    test_fault_then_checkpoint();
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return ds_test_finish();
}
