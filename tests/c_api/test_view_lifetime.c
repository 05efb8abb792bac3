/* View lifetime (header: "Views"): at ZeRO stages 0-2 a parameter's view and
 * a trainable parameter's gradient view alias the same engine storage from
 * ds_engine_init to ds_engine_destroy; values change only inside ds_step,
 * ds_load_checkpoint and set_full_*. A view taken before 100 steps and a
 * load must still point at the engine's storage and show the new values. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tensor_util.h"

enum { N = 257 };

static float as_f32(const DLTensor* v, int64_t i) {
    if (v->dtype.bits == 32) return ((const float*)v->data)[i];
    {
        uint16_t h = ((const uint16_t*)v->data)[i];
        uint32_t b;
        float f;
        if (v->dtype.code == kDLBfloat) {
            b = (uint32_t)h << 16;
        } else { /* fp16 normal/zero values suffice here */
            uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
            b = e == 0 ? s : (s | ((e + 112u) << 23) | (m << 13));
        }
        memcpy(&f, &b, 4);
        return f;
    }
}

static void run(const char* config, const char* label) {
    ds_engine_t* e = NULL;
    static float w[N], g[N], saved[N], full[N];
    int64_t shape[1] = {N};
    DLTensor t = f32_tensor(w, 1, shape), gt = f32_tensor(g, 1, shape), ft = f32_tensor(full, 1, shape);
    DLTensor pv, gv, now;
    char dir[] = "/tmp/ds_views_XXXXXX";
    char cmd[64];
    int step, i, same_values = 1, grad_seen = 1;
    for (i = 0; i < N; ++i) w[i] = 0.01f * (float)(i % 17) - 0.05f;
    EXPECT_OK(ds_engine_create(config, NULL, &e));
    EXPECT_OK(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_init(e));
    EXPECT_OK(ds_engine_param_view(e, "w", &pv));
    EXPECT_OK(ds_engine_grad_view(e, "w", &gv));
    CHECK(mkdtemp(dir) != NULL);

    for (step = 1; step <= 100; ++step) {
        for (i = 0; i < N; ++i) g[i] = 0.001f * (float)((i + step) % 13) - 0.006f;
        EXPECT_OK(ds_engine_accumulate_grad(e, "w", &gt));
        /* The old gradient view shows what accumulate_grad wrote. */
        for (i = 0; i < N; ++i)
            if (as_f32(&gv, i) != as_f32(&gv, i) || (gv.dtype.bits == 32 && as_f32(&gv, i) != g[i])) grad_seen = 0;
        EXPECT_OK(ds_backward(e, NULL));
        EXPECT_OK(ds_step(e, NULL));
        if (step == 50) { /* before taking a new grad view (that opens a window) */
            EXPECT_OK(ds_save_checkpoint(e, dir, "mid", NULL));
            for (i = 0; i < N; ++i) saved[i] = as_f32(&pv, i);
        }
        EXPECT_OK(ds_engine_param_view(e, "w", &now));
        CHECK(now.data == pv.data);
        EXPECT_OK(ds_engine_grad_view(e, "w", &now));
        CHECK(now.data == gv.data);
    }
    CHECK(grad_seen);
    /* After 100 steps the old view shows the current weights (the fp32 master, rounded). */
    EXPECT_OK(ds_engine_get_full_fp32_param(e, "w", &ft));
    for (i = 0; i < N; ++i)
        if (pv.dtype.bits == 32 && as_f32(&pv, i) != full[i]) same_values = 0;
    CHECK(same_values);
    CHECK(memcmp(saved, full, sizeof saved) != 0); /* training moved the weights */

    /* A load restores step 50's weights into the same storage. */
    EXPECT_OK(ds_load_checkpoint(e, dir, "mid", 0, NULL));
    EXPECT_OK(ds_engine_param_view(e, "w", &now));
    CHECK(now.data == pv.data);
    EXPECT_OK(ds_engine_grad_view(e, "w", &now));
    CHECK(now.data == gv.data);
    same_values = 1;
    for (i = 0; i < N; ++i)
        if (as_f32(&pv, i) != saved[i]) same_values = 0;
    CHECK(same_values);

    /* set_full_fp32_param writes through the same storage too. */
    for (i = 0; i < N; ++i) full[i] = 0.25f;
    EXPECT_OK(ds_engine_set_full_fp32_param(e, "w", &ft));
    CHECK(as_f32(&pv, 0) == 0.25f && as_f32(&pv, N - 1) == 0.25f);
    if (ds_test_failed) fprintf(stderr, "  (config: %s)\n", label);
    ds_engine_destroy(e);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

int main(void) {
    run("{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}}}", "stage 0");
    run("{\"train_batch_size\": 1, \"zero_optimization\": {\"stage\": 1},"
        " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}}}", "stage 1");
    run("{\"train_batch_size\": 1, \"zero_optimization\": {\"stage\": 2},"
        " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}}}", "stage 2");
    run("{\"train_batch_size\": 1, \"bf16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 2},"
        " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}}}", "stage 2 bf16");
    run("{\"train_batch_size\": 1, \"fp16\": {\"enabled\": true, \"initial_scale_power\": 4},"
        " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}}}", "stage 0 fp16");
    /* Stage 3 in a world of one: nothing is partitioned, so the same promise holds. */
    run("{\"train_batch_size\": 1, \"zero_optimization\": {\"stage\": 3},"
        " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}}}", "stage 3, world of one");
    return ds_test_finish();
}
