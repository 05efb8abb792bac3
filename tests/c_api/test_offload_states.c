/* ds_engine_offload_states / ds_engine_reload_states /
 * ds_engine_empty_partition_cache through the C ABI, with a built-in GPT:
 * 20 training steps with the optimizer states, fp32 master weights and
 * gradients moved to NVMe around an evaluation every 5 steps give the same
 * losses, evaluations and weights, bit for bit, as 20 steps without (AdamW,
 * fp32 and bf16); ds_forward is refused while the working weights are out;
 * the reports show the bytes moved; bad arguments are named. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tensor_util.h"

#define B 2
#define T 8
#define V 16

static const char* kSpec =
    "{\"type\": \"gpt\", \"vocab_size\": 16, \"block_size\": 8, \"n_layer\": 2, \"n_head\": 2, "
    "\"n_embd\": 16, \"dropout\": 0.1, \"seed\": 5}";

static int32_t ids[B * T], targets[B * T];
static int64_t ids_shape[2] = {B, T};
static DLTensor inputs[2];

static ds_engine_t* engine_for(const char* precision) {
    char cfg[1024];
    ds_model_t* m = NULL;
    ds_engine_t* e = NULL;
    snprintf(cfg, sizeof cfg,
             "{\"train_micro_batch_size_per_gpu\": %d, \"gradient_accumulation_steps\": 1, "
             "\"optimizer\": {\"type\": \"adamw\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.01}}%s}",
             B, precision);
    EXPECT_OK(ds_model_create(kSpec, &m));
    EXPECT_OK(ds_engine_create_with_model(cfg, m, NULL, &e));
    ds_model_destroy(m);
    return e;
}

static float forward(ds_engine_t* e) {
    float loss = NAN;
    DLTensor out = f32_tensor(&loss, 0, NULL);
    EXPECT_OK(ds_forward(e, inputs, 2, &out));
    return loss;
}

/* 20 steps; every 5th an evaluation, with `which` offloaded around it
 * (0xffffffff: none). Losses and evaluations into `trace` (24 floats). */
static ds_engine_t* run(const char* precision, uint32_t which, const char* nvme, float* trace) {
    ds_engine_t* e = engine_for(precision);
    int s, n = 0;
    for (s = 1; s <= 20; ++s) {
        trace[n++] = forward(e);
        EXPECT_OK(ds_backward(e, NULL));
        EXPECT_OK(ds_step(e, NULL));
        if (s % 5) continue;
        if (which != 0xffffffffu) EXPECT_OK(ds_engine_offload_states(e, which, DS_OFFLOAD_DEVICE_NVME, nvme));
        EXPECT_OK(ds_engine_eval(e, 1));
        trace[n++] = forward(e);
        EXPECT_OK(ds_engine_eval(e, 0));
        if (which != 0xffffffffu) EXPECT_OK(ds_engine_reload_states(e));
    }
    return e;
}

/* Every parameter's fp32 master, bit for bit. */
static int same_masters(ds_engine_t* a, ds_engine_t* b) {
    int64_t n = 0, i;
    int same = 1;
    EXPECT_OK(ds_engine_num_params(a, &n));
    for (i = 0; i < n; ++i) {
        ds_param_info_t info;
        float *x, *y;
        DLTensor tx, ty;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        EXPECT_OK(ds_engine_param_info(a, i, &info));
        x = (float*)calloc((size_t)info.numel, 4);
        y = (float*)calloc((size_t)info.numel, 4);
        tx = f32_tensor(x, info.ndim, (int64_t*)info.shape);
        ty = f32_tensor(y, info.ndim, (int64_t*)info.shape);
        EXPECT_OK(ds_engine_get_full_fp32_param(a, info.name, &tx));
        EXPECT_OK(ds_engine_get_full_fp32_param(b, info.name, &ty));
        if (memcmp(x, y, (size_t)info.numel * 4) != 0) {
            fprintf(stderr, "parameter %s differs\n", info.name);
            same = 0;
        }
        free(x);
        free(y);
    }
    return same;
}

static void test_around_eval(const char* precision, const char* nvme) {
    float ref[24], off[24];
    const uint32_t which = DS_OFFLOAD_OPTIM_STATES | DS_OFFLOAD_HP_PARAMS | DS_OFFLOAD_LP_GRADS;
    ds_engine_t* a = run(precision, 0xffffffffu, nvme, ref);
    ds_engine_t* b = run(precision, which, nvme, off);
    CHECK(memcmp(ref, off, sizeof ref) == 0);
    CHECK(same_masters(a, b));
    ds_engine_destroy(a);
    ds_engine_destroy(b);
}

static void test_refusals_and_reports(const char* nvme) {
    ds_engine_t* e = engine_for("");
    ds_memory_report_t mem0, mem1, disk;
    DLTensor out;
    float loss;
    memset(&mem0, 0, sizeof mem0);
    mem0.struct_size = sizeof mem0;
    mem1 = disk = mem0;
    forward(e);
    EXPECT_OK(ds_backward(e, NULL));
    EXPECT_OK(ds_step(e, NULL));
    EXPECT_OK(ds_engine_memory_report(e, &mem0));
    EXPECT_OK(ds_engine_offload_states(e, 0, DS_OFFLOAD_DEVICE_NVME, nvme));
    EXPECT_OK(ds_engine_memory_report(e, &mem1));
    EXPECT_OK(ds_engine_disk_report(e, &disk));
    CHECK(disk.params_bytes > 0 && disk.grads_bytes > 0 && disk.optimizer_state_bytes > 0);
    CHECK(mem1.total_bytes <= mem0.total_bytes);
    CHECK(mem0.total_bytes - mem1.total_bytes <= disk.total_bytes);
    out = f32_tensor(&loss, 0, NULL);
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_forward(e, inputs, 2, &out), "ds_forward", "working weights",
                  "ds_engine_reload_states");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_step(e, NULL), "ds_step", "ds_engine_reload_states");
    EXPECT_OK(ds_engine_empty_partition_cache(e)); /* below ZeRO-3: nothing to free */
    EXPECT_OK(ds_engine_reload_states(e));
    EXPECT_OK(ds_engine_memory_report(e, &mem1));
    CHECK(mem1.total_bytes == mem0.total_bytes);
    forward(e);
    EXPECT_OK(ds_backward(e, NULL));
    EXPECT_OK(ds_step(e, NULL));
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_offload_states(e, 0x100, DS_OFFLOAD_DEVICE_NVME, nvme), "which");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_offload_states(e, 0, 0, nvme), "device");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_offload_states(e, 0, DS_OFFLOAD_DEVICE_NVME, NULL), "nvme_path");
    EXPECT_OK(ds_engine_offload_states(e, 0, DS_OFFLOAD_DEVICE_CPU, NULL));
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_reload_states(NULL), "engine");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_empty_partition_cache(NULL), "engine");
    ds_engine_destroy(e);
}

int main(void) {
    char dir[] = "/tmp/ds_c_offload_states_XXXXXX";
    char cmd[128];
    int i;
    if (!mkdtemp(dir)) return 1;
    for (i = 0; i < B * T; ++i) {
        ids[i] = (int32_t)((i * 7 + 3) % V);
        targets[i] = (int32_t)((i * 5 + 1) % V);
    }
    inputs[0] = make_tensor(ids, 2, ids_shape, kDLInt, 32);
    inputs[1] = make_tensor(targets, 2, ids_shape, kDLInt, 32);
    test_around_eval("", dir);
    test_around_eval(", \"bf16\": {\"enabled\": true}", dir);
    test_refusals_and_reports(dir);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return ds_test_finish();
}
