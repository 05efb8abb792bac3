/* C API: a DeepSpeed config with offload_optimizer {device: nvme, nvme_path}
 * and an aio section runs unchanged. The first AdamW step matches the
 * float64 closed form (m_hat = g, v_hat = g^2: w -= lr * g / (|g| + eps))
 * within 1e-3 x lr,
 * and five steps are bit-identical to the same engine with the state in
 * memory; its checkpoint loads into the in-memory engine and trains on
 * bit-identically. Refusals name their key: a missing nvme_path directory,
 * aio.use_gds. The swap directory is empty after
 * ds_engine_destroy. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tensor_util.h"

#define N_A 5
#define N_B 3000

static char g_dir[64];
static char g_config[1024];

static const char* offload_config(const char* nvme_path, const char* aio_extra) {
    snprintf(g_config, sizeof g_config,
             "{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.0}},"
             " \"zero_optimization\": {\"stage\": 2, \"sub_group_size\": 1024,"
             "   \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\", \"buffer_count\": 2,"
             "     \"pipeline_read\": true, \"pipeline_write\": true, \"pin_memory\": true}},"
             " \"aio\": {\"block_size\": 65536, \"queue_depth\": 4, \"thread_count\": 1,"
             "   \"single_submit\": false, \"overlap_events\": true%s}}",
             nvme_path, aio_extra);
    return g_config;
}

static const char* kInMemory =
    "{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.0}},"
    " \"zero_optimization\": {\"stage\": 2}}";

static float g_init_a[N_A], g_init_b[N_B];

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

static void one_step(ds_engine_t* e, int step) {
    static float ga[N_A], gb[N_B];
    int64_t sa[1] = {N_A}, sb[1] = {N_B};
    DLTensor ta = f32_tensor(ga, 1, sa), tb = f32_tensor(gb, 1, sb);
    ds_step_info_t info;
    int j;
    for (j = 0; j < N_A; ++j) ga[j] = grad_of(step, 0, j);
    for (j = 0; j < N_B; ++j) gb[j] = grad_of(step, 1, j);
    EXPECT_OK(ds_engine_accumulate_grad(e, "a", &ta));
    EXPECT_OK(ds_engine_accumulate_grad(e, "b", &tb));
    EXPECT_OK(ds_backward(e, NULL));
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    EXPECT_OK(ds_step(e, &info));
    CHECK(info.stepped == 1);
}

static const float* weights(ds_engine_t* e, const char* name) {
    DLTensor v;
    if (ds_engine_param_view(e, name, &v) != DS_OK) return NULL;
    return (const float*)v.data;
}

static int swap_entries(void) {
    char root[128];
    DIR* d;
    struct dirent* ent;
    int n = 0;
    snprintf(root, sizeof root, "%s/ds_swap", g_dir);
    d = opendir(root);
    if (!d) return 0;
    while ((ent = readdir(d)) != NULL)
        if (strcmp(ent->d_name, ".") && strcmp(ent->d_name, "..")) ++n;
    closedir(d);
    return n;
}

static void test_trains_like_in_memory(void) {
    ds_engine_t* off = make_engine(offload_config(g_dir, ""));
    ds_engine_t* mem = make_engine(kInMemory);
    const float* w;
    int j, s, same = 1;
    double worst = 0.0;
    if (!off || !mem) {
        CHECK(0);
        return;
    }
    CHECK(swap_entries() == 1);
    one_step(off, 0);
    one_step(mem, 0);
    /* step 1 against the float64 closed form */
    w = weights(off, "b");
    for (j = 0; j < N_B && w; ++j) {
        const double g = (double)grad_of(0, 1, j);
        const double want = (double)g_init_b[j] - 0.01 * g / (fabs(g) + 1e-8);
        const double d = fabs((double)w[j] - want);
        if (d > worst) {
            worst = d;
            if (getenv("DS_TEST_DEBUG")) fprintf(stderr, "j %d g %g w %.9g want %.9g init %.9g\n", j, g, w[j], want, g_init_b[j]);
        }
    }
    /* within 1e-3 x lr: the fused kernel's vectorised square root is not
       correctly rounded (a few 1e-4 relative in the denominator) */
    if (worst >= 1e-5) fprintf(stderr, "first step: worst difference %g\n", worst);
    CHECK(w != NULL && worst < 1e-5);
    for (s = 1; s < 5; ++s) {
        one_step(off, s);
        one_step(mem, s);
    }
    if (memcmp(weights(off, "a"), weights(mem, "a"), sizeof(float) * N_A) != 0) same = 0;
    if (memcmp(weights(off, "b"), weights(mem, "b"), sizeof(float) * N_B) != 0) same = 0;
    CHECK(same);
    /* a checkpoint of the offloaded engine loads into the in-memory one */
    {
        char ck[128];
        ds_engine_t* back = make_engine(kInMemory);
        snprintf(ck, sizeof ck, "%s/ckpt", g_dir);
        EXPECT_OK(ds_save_checkpoint(off, ck, "t", NULL));
        if (back) {
            EXPECT_OK(ds_load_checkpoint(back, ck, "t", 0, NULL));
            CHECK(memcmp(weights(back, "b"), weights(mem, "b"), sizeof(float) * N_B) == 0);
            one_step(back, 5);
            one_step(mem, 5);
            CHECK(memcmp(weights(back, "b"), weights(mem, "b"), sizeof(float) * N_B) == 0);
            ds_engine_destroy(back);
        }
    }
    ds_engine_destroy(off);
    ds_engine_destroy(mem);
    CHECK(swap_entries() == 0);
}

static void test_refusals(void) {
    char missing[128];
    ds_engine_t* e = NULL;
    float x[4] = {1, 2, 3, 4};
    int64_t sx[1] = {4};
    DLTensor tx = f32_tensor(x, 1, sx);
    snprintf(missing, sizeof missing, "%s/no_such_dir", g_dir);
    EXPECT_OK(ds_engine_create(offload_config(missing, ""), NULL, &e));
    EXPECT_OK(ds_engine_add_param(e, "x", &tx, DS_PARAM_TRAINABLE));
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG, ds_engine_init(e), "zero_optimization.offload_optimizer.nvme_path",
                  "no_such_dir");
    ds_engine_destroy(e);
    e = NULL;
    EXPECT_STATUS(DS_ERR_UNSUPPORTED, ds_engine_create(offload_config(g_dir, ", \"use_gds\": true"), NULL, &e),
                  "aio.use_gds");
    CHECK(e == NULL);
}

int main(void) {
    int j;
    strcpy(g_dir, "/tmp/ds_nvme_c_XXXXXX");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    for (j = 0; j < N_A; ++j) g_init_a[j] = (float)j * 0.25f - 0.5f;
    for (j = 0; j < N_B; ++j) g_init_b[j] = (float)cos(0.01 * (double)j);
    test_trains_like_in_memory();
    test_refusals();
    {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    }
    return ds_test_finish();
}
