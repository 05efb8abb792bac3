/* A small deterministic training run shared by the checkpoint tests (C99,
 * public API only): the model, the three precision setups, gradients that
 * depend on the window index and the current working weights, forced fp16
 * overflows, and a byte dump of everything a resume must restore. */
#ifndef DS_TEST_CKPT_TRAIN_COMMON_H
#define DS_TEST_CKPT_TRAIN_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deepspeed_c.h"

typedef enum { MODE_FP32 = 0, MODE_BF16 = 1, MODE_FP16 = 2 } train_mode_t;

static const char* const kModeNames[] = {"fp32", "bf16", "fp16"};

/* gradient_accumulation_steps 2. fp32: AdamW + OneCycle (betas cycle);
 * bf16: AdamW + WarmupLR, and an ds_engine_set_lr override after window 19;
 * fp16: Adam + WarmupLR, dynamic loss scale (window 4, hysteresis 2) and
 * forced overflows in windows 3, 4, 11, 19 (the last before a save at 20), 27. */
static const char* train_config(train_mode_t mode) {
    switch (mode) {
        case MODE_FP32:
            return "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2,"
                   " \"gradient_clipping\": 1.0,"
                   " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.01}},"
                   " \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 0.0001,"
                   "   \"cycle_max_lr\": 0.01, \"cycle_first_step_size\": 15, \"cycle_momentum\": true,"
                   "   \"cycle_min_mom\": 0.8, \"cycle_max_mom\": 0.9}}}";
        case MODE_BF16:
            return "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2,"
                   " \"bf16\": {\"enabled\": true},"
                   " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}},"
                   " \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_min_lr\": 0.0,"
                   "   \"warmup_max_lr\": 0.01, \"warmup_num_steps\": 30}}}";
        default:
            return "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2,"
                   " \"fp16\": {\"enabled\": true, \"loss_scale\": 0, \"initial_scale_power\": 8,"
                   "   \"loss_scale_window\": 4, \"hysteresis\": 2, \"min_loss_scale\": 1},"
                   " \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0.005}},"
                   " \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_max_lr\": 0.005,"
                   "   \"warmup_num_steps\": 25, \"warmup_type\": \"linear\"}}}";
    }
}

#define TRAIN_NPARAMS 4
static const char* const kParamNames[TRAIN_NPARAMS] = {"embed.weight", "dense.weight", "dense.bias", "ln.frozen"};
static const int kParamTrainable[TRAIN_NPARAMS] = {1, 1, 1, 0};

/* Shapes; `scale` multiplies the embedding's rows (bigger saves). */
static void param_shape(int i, int64_t scale, int64_t shape[2], int32_t* ndim) {
    switch (i) {
        case 0: shape[0] = 32 * scale; shape[1] = 16; *ndim = 2; break;
        case 1: shape[0] = 16; shape[1] = 16; *ndim = 2; break;
        default: shape[0] = 16; shape[1] = 1; *ndim = 1; break;
    }
}

static int64_t shape_numel(const int64_t* shape, int32_t ndim) {
    int64_t n = 1;
    int32_t d;
    for (d = 0; d < ndim; ++d) n *= shape[d];
    return n;
}

static DLTensor f32_view(float* data, int64_t* shape, int32_t ndim) {
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.device.device_type = kDLCPU;
    t.ndim = ndim;
    t.dtype.code = kDLFloat;
    t.dtype.bits = 32;
    t.dtype.lanes = 1;
    t.shape = shape;
    return t;
}

/* A uniform number in [-1, 1) from integers (splitmix64). */
static double hash_unit(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    uint64_t z = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull ^
                 (c + 1) * 0x94D049BB133111EBull ^ (d + 7) * 0xD6E8FEB86659FD93ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 4503599627370496.0 - 1.0;
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, bits;
    float f;
    if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (man << 13);
    } else if (exp == 0) {
        f = ldexpf((float)man, -24);
        return sign ? -f : f;
    } else {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    }
    memcpy(&f, &bits, 4);
    return f;
}

/* Element j of a working-precision view, as float. */
static float view_elem(const DLTensor* v, int64_t j) {
    const unsigned char* base = (const unsigned char*)v->data + v->byte_offset;
    if (v->dtype.bits == 32) {
        float f;
        memcpy(&f, base + 4 * j, 4);
        return f;
    } else {
        uint16_t h;
        memcpy(&h, base + 2 * j, 2);
        if (v->dtype.code == kDLBfloat) {
            uint32_t u = (uint32_t)h << 16;
            float f;
            memcpy(&f, &u, 4);
            return f;
        }
        return half_to_float(h);
    }
}

static int forced_overflow(train_mode_t mode, int64_t window) {
    return mode == MODE_FP16 && (window == 3 || window == 4 || window == 11 || window == 19 || window == 27);
}

#define TRAIN_CHECK(call)                                                                         \
    do {                                                                                          \
        ds_status_t s_ = (call);                                                                  \
        if (s_ != DS_OK) {                                                                        \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, ds_last_error()); \
            exit(3);                                                                              \
        }                                                                                         \
    } while (0)

/* Create and initialise the engine (initial weights from a fixed hash). */
static ds_engine_t* train_engine(train_mode_t mode, int64_t scale) {
    ds_engine_t* e = NULL;
    int i;
    TRAIN_CHECK(ds_engine_create(train_config(mode), NULL, &e));
    for (i = 0; i < TRAIN_NPARAMS; ++i) {
        int64_t shape[2], n, j;
        int32_t ndim;
        float* init;
        DLTensor t;
        param_shape(i, scale, shape, &ndim);
        n = shape_numel(shape, ndim);
        init = (float*)malloc((size_t)n * sizeof(float));
        for (j = 0; j < n; ++j) init[j] = (float)(0.2 * hash_unit(99, (uint64_t)i, (uint64_t)j, 0));
        t = f32_view(init, shape, ndim);
        TRAIN_CHECK(ds_engine_add_param(e, kParamNames[i], &t, kParamTrainable[i] ? DS_PARAM_TRAINABLE : 0));
        free(init);
    }
    TRAIN_CHECK(ds_engine_init(e));
    return e;
}

/* One accumulation window (2 micro-steps); `window` = global_steps before it. */
static void train_window(ds_engine_t* e, train_mode_t mode, int64_t scale) {
    int64_t window;
    int micro, i;
    TRAIN_CHECK(ds_engine_global_steps(e, &window));
    for (micro = 0; micro < 2; ++micro) {
        float loss_scale;
        TRAIN_CHECK(ds_engine_loss_scale(e, &loss_scale));
        for (i = 0; i < TRAIN_NPARAMS; ++i) {
            int64_t shape[2], n, j;
            int32_t ndim;
            float* g;
            DLTensor view, t;
            if (!kParamTrainable[i]) continue;
            param_shape(i, scale, shape, &ndim);
            n = shape_numel(shape, ndim);
            TRAIN_CHECK(ds_engine_param_view(e, kParamNames[i], &view));
            g = (float*)malloc((size_t)n * sizeof(float));
            for (j = 0; j < n; ++j) {
                double w = view_elem(&view, j);
                double noise = hash_unit((uint64_t)window, (uint64_t)micro, (uint64_t)i, (uint64_t)j);
                g[j] = (float)((0.5 * w + 0.05 * noise) * loss_scale);
            }
            if (micro == 1 && i == 0 && forced_overflow(mode, window)) g[0] = INFINITY;
            t = f32_view(g, shape, ndim);
            TRAIN_CHECK(ds_engine_accumulate_grad(e, kParamNames[i], &t));
            free(g);
        }
        TRAIN_CHECK(ds_backward(e, NULL));
        TRAIN_CHECK(ds_step(e, NULL));
    }
    if (mode == MODE_BF16 && window == 19) TRAIN_CHECK(ds_engine_set_lr(e, 0.00123));
}

/* ---- a growable byte buffer and the state dump ---------------------------- */

typedef struct {
    unsigned char* p;
    size_t n, cap;
} bytes_t;

static void bytes_append(bytes_t* b, const void* data, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = (unsigned char*)realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void bytes_free(bytes_t* b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

/* A whole file's bytes (empty when it cannot be opened). */
static bytes_t slurp(const char* path) {
    bytes_t b = {NULL, 0, 0};
    unsigned char buf[65536];
    size_t n;
    FILE* f = fopen(path, "rb");
    if (!f) return b;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) bytes_append(&b, buf, n);
    fclose(f);
    return b;
}

/* The end of a state dump: lr, loss scale, global_steps, global_samples,
 * micro_steps, skipped_steps (dump_counters reads the last four back). */
static void dump_engine_scalars(ds_engine_t* e, bytes_t* b) {
    double lr;
    float ls;
    int64_t c[4];
    TRAIN_CHECK(ds_engine_get_lr(e, &lr));
    TRAIN_CHECK(ds_engine_loss_scale(e, &ls));
    TRAIN_CHECK(ds_engine_global_steps(e, &c[0]));
    TRAIN_CHECK(ds_engine_global_samples(e, &c[1]));
    TRAIN_CHECK(ds_engine_micro_steps(e, &c[2]));
    TRAIN_CHECK(ds_engine_skipped_steps(e, &c[3]));
    bytes_append(b, &lr, sizeof lr);
    bytes_append(b, &ls, sizeof ls);
    bytes_append(b, c, sizeof c);
}

/* Everything a bitwise resume must restore, as bytes: per parameter the
 * working weights, the fp32 master and (trainable) both Adam moments; then
 * lr, loss scale, global_steps, global_samples, micro_steps, skipped_steps. */
static bytes_t train_dump(ds_engine_t* e, int64_t scale) {
    bytes_t b = {NULL, 0, 0};
    int i;
    for (i = 0; i < TRAIN_NPARAMS; ++i) {
        int64_t shape[2], n;
        int32_t ndim;
        float* buf;
        DLTensor view, t;
        param_shape(i, scale, shape, &ndim);
        n = shape_numel(shape, ndim);
        TRAIN_CHECK(ds_engine_param_view(e, kParamNames[i], &view));
        bytes_append(&b, (const unsigned char*)view.data + view.byte_offset, (size_t)n * (view.dtype.bits / 8));
        buf = (float*)malloc((size_t)n * sizeof(float));
        t = f32_view(buf, shape, ndim);
        TRAIN_CHECK(ds_engine_get_full_fp32_param(e, kParamNames[i], &t));
        bytes_append(&b, buf, (size_t)n * 4);
        if (kParamTrainable[i]) {
            TRAIN_CHECK(ds_engine_get_full_optimizer_state(e, kParamNames[i], "exp_avg", &t));
            bytes_append(&b, buf, (size_t)n * 4);
            TRAIN_CHECK(ds_engine_get_full_optimizer_state(e, kParamNames[i], "exp_avg_sq", &t));
            bytes_append(&b, buf, (size_t)n * 4);
        }
        free(buf);
    }
    dump_engine_scalars(e, &b);
    return b;
}

/* The counters at the end of a dump: global_steps, global_samples, micro_steps, skipped_steps. */
static void dump_counters(const bytes_t* b, int64_t out[4]) { memcpy(out, b->p + b->n - 4 * sizeof(int64_t), 4 * sizeof(int64_t)); }

static int mode_from_name(const char* s) {
    int m;
    for (m = 0; m < 3; ++m)
        if (strcmp(s, kModeNames[m]) == 0) return m;
    return -1;
}

#endif
