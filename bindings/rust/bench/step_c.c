/* step_c.c: the C side of bindings/rust/bench.sh: ds_version (a no-op C call)
 * and ds_backward + ds_step on the same tiny engine as
 * deepspeed-c/examples/bench_step.rs, called directly from C.
 *   step_c [ITERATIONS]   prints ns per iteration, best of 5 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "deepspeed_c.h"

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void die(const char* what) {
    fprintf(stderr, "%s failed: %s\n", what, ds_last_error());
    exit(1);
}

int main(int argc, char** argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000, i;
    int rep;
    volatile uint32_t sink = 0;
    double best_noop = 1e30, best_step = 1e30;
    ds_engine_t* e = NULL;
    float w = 1.0f;
    int64_t shape[1] = {1};
    DLTensor t;
    ds_step_info_t info;
    if (n <= 0) n = 200000;
    memset(&t, 0, sizeof t);
    t.data = &w;
    t.device.device_type = kDLCPU;
    t.ndim = 1;
    t.dtype.code = kDLFloat;
    t.dtype.bits = 32;
    t.dtype.lanes = 1;
    t.shape = shape;
    if (ds_engine_create("{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.0}}}",
                         NULL, &e) != DS_OK) die("ds_engine_create");
    if (ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE) != DS_OK) die("ds_engine_add_param");
    if (ds_engine_init(e) != DS_OK) die("ds_engine_init");
    info.struct_size = sizeof info;
    for (rep = 0; rep < 5; ++rep) {
        double t0 = now_ns(), t1;
        for (i = 0; i < n; ++i) sink = ds_version();
        t1 = now_ns();
        if ((t1 - t0) / (double)n < best_noop) best_noop = (t1 - t0) / (double)n;
        t0 = now_ns();
        for (i = 0; i < n; ++i) {
            if (ds_backward(e, NULL) != DS_OK) die("ds_backward");
            if (ds_step(e, &info) != DS_OK) die("ds_step");
        }
        t1 = now_ns();
        if ((t1 - t0) / (double)n < best_step) best_step = (t1 - t0) / (double)n;
    }
    (void)sink;
    printf("C     ds_version                        %8.1f ns\n", best_noop);
    printf("C     ds_backward + ds_step             %8.1f ns\n", best_step);
    ds_engine_destroy(e);
    return 0;
}
