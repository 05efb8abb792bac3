/* ZeRO-3 prefetch and reuse through the C ABI under mpirun (a C99
 * program): a built-in GPT with every weight partitioned trains 4 steps
 * with the default stage3_prefetch_bucket_size (5e7: each layer's gathers
 * start while the layer before it runs) and stage3_max_reuse_distance
 * (1e9: each layer stays gathered from its forward to its backward), then
 * again with both 0 and with stage3_allgather_sequential; every loss and
 * every fp32 master weight is the same bit for bit, and the resolved config
 * lists none of these keys as ignored. The gathers themselves are counted in
 * tests/mpi/test_zero3_prefetch.cpp. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tensor_util.h"

#define B 2
#define T 8
#define V 24
#define STEPS 4

static const char* kSpec =
    "{\"type\": \"gpt\", \"vocab_size\": 24, \"block_size\": 8, \"n_layer\": 3, \"n_head\": 2, \"n_embd\": 16, "
    "\"seed\": 11}";

static char* config(const char* zero_extra) {
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"train_micro_batch_size_per_gpu\": %d, \"gradient_accumulation_steps\": 1, "
             "\"zero_optimization\": {\"stage\": 3, \"stage3_param_persistence_threshold\": 0%s}, "
             "\"bf16\": {\"enabled\": true}, "
             "\"optimizer\": {\"type\": \"adamw\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.01}}}",
             B, zero_extra);
    return buf;
}

typedef struct {
    float losses[STEPS];
    float* masters; /* every parameter's fp32 master weights, concatenated */
    int64_t total;
} run_t;

static void train(const char* zero_extra, run_t* r) {
    ds_model_t* m = NULL;
    ds_engine_t* e = NULL;
    int32_t ids[B * T], targets[B * T];
    int64_t shape[2] = {B, T}, n = 0, at = 0, i;
    int s, j;
    int32_t rank = 0;
    const char* json = NULL;
    memset(r, 0, sizeof *r);
    EXPECT_OK(ds_model_create(kSpec, &m));
    EXPECT_OK(ds_engine_create_with_model(config(zero_extra), m, NULL, &e));
    ds_model_destroy(m);
    if (!e) return;
    EXPECT_OK(ds_engine_rank(e, &rank));
    EXPECT_OK(ds_engine_config_json(e, &json));
    CHECK(json && !strstr(json, "\"ignored\""));
    for (s = 0; s < STEPS; ++s) {
        DLTensor in[2], out;
        float loss = NAN;
        for (j = 0; j < B * T; ++j) { /* each rank its own micro-batch */
            ids[j] = (int32_t)((j * 5 + s * 3 + rank * 7) % V);
            targets[j] = (int32_t)((j * 5 + s * 3 + rank * 7 + 1) % V);
        }
        in[0] = make_tensor(ids, 2, shape, kDLInt, 32);
        in[1] = make_tensor(targets, 2, shape, kDLInt, 32);
        out = f32_tensor(&loss, 0, NULL);
        EXPECT_OK(ds_forward(e, in, 2, &out));
        EXPECT_OK(ds_backward(e, NULL));
        EXPECT_OK(ds_step(e, NULL));
        r->losses[s] = loss;
    }
    EXPECT_OK(ds_engine_num_params(e, &n));
    for (i = 0; i < n; ++i) {
        ds_param_info_t info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        EXPECT_OK(ds_engine_param_info(e, i, &info));
        r->total += info.numel;
    }
    r->masters = (float*)calloc((size_t)r->total, sizeof(float));
    for (i = 0; i < n && r->masters; ++i) { /* collective */
        ds_param_info_t info;
        DLTensor t;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        EXPECT_OK(ds_engine_param_info(e, i, &info));
        t = make_tensor(r->masters + at, info.ndim, (int64_t*)info.shape, kDLFloat, 32);
        EXPECT_OK(ds_engine_get_full_fp32_param(e, info.name, &t));
        at += info.numel;
    }
    ds_engine_destroy(e);
}

static void expect_same(const run_t* a, const run_t* b, const char* what) {
    int s;
    for (s = 0; s < STEPS; ++s) {
        const int same = memcmp(&a->losses[s], &b->losses[s], sizeof(float)) == 0;
        if (!same) fprintf(stderr, "%s: step %d loss %.9g vs %.9g\n", what, s, a->losses[s], b->losses[s]);
        CHECK(same);
    }
    CHECK(a->total == b->total && a->total > 0);
    CHECK(a->masters && b->masters && memcmp(a->masters, b->masters, (size_t)a->total * sizeof(float)) == 0);
}

int main(void) {
    run_t with, without, sequential;
    train("", &with);
    train(", \"stage3_prefetch_bucket_size\": 0, \"stage3_max_reuse_distance\": 0", &without);
    train(", \"stage3_allgather_sequential\": true", &sequential);
    expect_same(&with, &without, "defaults vs no prefetch and no reuse");
    expect_same(&sequential, &without, "allgather_sequential vs no prefetch and no reuse");
    CHECK(without.losses[STEPS - 1] < without.losses[0]); /* it learns */
    free(with.masters);
    free(without.masters);
    free(sequential.masters);
    return ds_test_finish();
}
