/*
 * train_mlp.c — train a small MLP through deepspeed_c's C API.
 *
 * The program owns the model's forward and backward (plain loops); the
 * engine owns the weights' precision, the loss scale, gradient averaging
 * over the accumulation window, clipping, AdamW and the LR schedule.
 *
 * Task: regress the outputs of a fixed random "teacher" MLP from random
 * inputs (learnable by construction). The verdict compares the mean loss of
 * the first and the last tenth of the run (at least 5 steps each): the
 * program exits 1 if the loss did not fall by at least 10%. A run of fewer
 * than 40 micro-steps (20 optimizer steps: the embedded config's LR warmup)
 * is too short to judge: it prints both means, says so and exits 0.
 *
 * Data parallel: start it on several ranks (tools/ds-run -n 2 -- train_mlp
 * --zero 2). The teacher and the initial weights come from the same seed on
 * every rank; each rank draws its own micro-batches (a data seed mixed with
 * its rank), so every step averages 2 x 32 x world-size different samples
 * (train_batch_size = 64 x world size, derived by the engine).
 *
 *   train_mlp [--dtype fp32|fp16|bf16] [--zero 0|1|2|3] [--steps N] [--config FILE] [--quiet]
 *
 * --zero sets zero_optimization.stage of the embedded config; at stage 3 it
 * also sets stage3_param_persistence_threshold to 0, since every tensor here
 * is below DeepSpeed's default threshold (1e5 elements) and would otherwise
 * stay whole on every rank.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deepspeed_c.h"

enum { IN = 64, HID = 128, OUT = 16, MICRO = 32 };

/* The embedded default config: DeepSpeed JSON, as a user would write it. */
static const char* kConfigTemplate =
    "{\n"
    "  \"train_micro_batch_size_per_gpu\": 32,\n"
    "  \"gradient_accumulation_steps\": 2,\n"
    "  \"gradient_clipping\": 1.0,\n"
    "  \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003, \"weight_decay\": 0.01}},\n"
    "  \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 20, \"warmup_type\": \"linear\"}},\n"
    "  \"fp16\": {\"enabled\": %s, \"initial_scale_power\": 12},\n"
    "  \"bf16\": {\"enabled\": %s},\n"
    "  \"zero_optimization\": {\"stage\": %d%s}\n"
    "}\n";

#define DS_TRY(call)                                                                  \
    do {                                                                              \
        ds_status_t s_ = (call);                                                      \
        if (s_ != DS_OK) {                                                            \
            fprintf(stderr, "%s failed: %s\n  %s\n", #call, ds_status_string(s_), ds_last_error()); \
            exit(2);                                                                  \
        }                                                                             \
    } while (0)

/* xorshift64* uniform in [-1, 1) */
static float urand(uint64_t* state) {
    *state ^= *state >> 12; *state ^= *state << 25; *state ^= *state >> 27;
    return (float)((*state * 2685821657736338717ull) >> 40) / (float)(1 << 23) - 1.0f;
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, bits;
    float f;
    if (exp == 0) { f = ldexpf((float)man, -24); return sign ? -f : f; }
    if (exp == 31) bits = sign | 0x7F800000u | (man << 13);
    else bits = sign | ((exp + 112u) << 23) | (man << 13);
    memcpy(&f, &bits, 4);
    return f;
}

static float bf16_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Copy an engine weight view (fp32/fp16/bf16) into fp32 for our GEMMs. */
static void view_to_f32(const DLTensor* v, float* dst, int64_t n) {
    int64_t i;
    if (v->dtype.bits == 32) { memcpy(dst, v->data, (size_t)n * 4); return; }
    for (i = 0; i < n; ++i) {
        uint16_t h = ((const uint16_t*)v->data)[i];
        dst[i] = v->dtype.code == kDLBfloat ? bf16_to_float(h) : half_to_float(h);
    }
}

static DLTensor tensor2(float* data, int64_t* shape, int64_t rows, int64_t cols) {
    DLTensor t;
    memset(&t, 0, sizeof t);
    shape[0] = rows;
    shape[1] = cols;
    t.data = data;
    t.device.device_type = kDLCPU;
    t.ndim = cols > 0 ? 2 : 1;
    t.dtype.code = kDLFloat;
    t.dtype.bits = 32;
    t.dtype.lanes = 1;
    t.shape = shape;
    return t;
}

/* C[m x n] = op(A) op(B), row-major, op = transpose when ta/tb is set;
 * A is m x k (or k x m), B is k x n (or n x k). The model is tiny: plain
 * loops keep the example free of a BLAS dependency. */
static void gemm(int ta, int tb, int m, int n, int k, const float* A, const float* B, float* C) {
    int i, j, p;
    for (i = 0; i < m; ++i)
        for (j = 0; j < n; ++j) {
            float acc = 0.0f;
            for (p = 0; p < k; ++p)
                acc += (ta ? A[p * m + i] : A[i * k + p]) * (tb ? B[j * k + p] : B[p * n + j]);
            C[i * n + j] = acc;
        }
}

/* y = tanh(x W1^T + b1) W2^T + b2 for a batch of MICRO rows. */
static void forward(const float* x, const float* w1, const float* b1, const float* w2, const float* b2,
                    float* h, float* y) {
    int i, j;
    gemm(0, 1, MICRO, HID, IN, x, w1, h);
    for (i = 0; i < MICRO; ++i)
        for (j = 0; j < HID; ++j) h[i * HID + j] = tanhf(h[i * HID + j] + b1[j]);
    gemm(0, 1, MICRO, OUT, HID, h, w2, y);
    for (i = 0; i < MICRO; ++i)
        for (j = 0; j < OUT; ++j) y[i * OUT + j] += b2[j];
}

int main(int argc, char** argv) {
    const char* dtype = "fp32";
    const char* config_path = NULL;
    const char* names[4] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
    int steps = 300, quiet = 0, zero = -1, a, step, i, j;
    int32_t rank = 0, world = 1;
    uint64_t init_rng = 0x9E3779B97F4A7C15ull, data_rng; /* same init everywhere; data per rank */
    char config[2048];
    ds_engine_t* engine = NULL;
    ds_comm_t* comm = NULL;
    ds_engine_options_t opts;
    static float w1[HID * IN], b1[HID], w2[OUT * HID], b2[OUT];        /* student init / fp32 copies */
    static float tw1[HID * IN], tb1[HID], tw2[OUT * HID], tb2[OUT];    /* teacher */
    static float x[MICRO * IN], h[MICRO * HID], y[MICRO * OUT], t[MICRO * OUT], th[MICRO * HID];
    static float dy[MICRO * OUT], dh[MICRO * HID];
    static float gw1[HID * IN], gb1[HID], gw2[OUT * HID], gb2[OUT];
    int64_t s_w1[2], s_b1[2], s_w2[2], s_b2[2];
    DLTensor v;
    float loss = 0.0f, scale = 1.0f;
    double head_sum = 0.0, tail_sum = 0.0; /* mean loss of the first / last window */
    int window = 0, verdict = 0;
    int32_t boundary = 0;
    ds_step_info_t info;

    for (a = 1; a < argc; ++a) {
        if (!strcmp(argv[a], "--dtype") && a + 1 < argc) dtype = argv[++a];
        else if (!strcmp(argv[a], "--steps") && a + 1 < argc) steps = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--zero") && a + 1 < argc) zero = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--config") && a + 1 < argc) config_path = argv[++a];
        else if (!strcmp(argv[a], "--quiet")) quiet = 1;
        else {
            fprintf(stderr, "usage: %s [--dtype fp32|fp16|bf16] [--zero 0|1|2|3] [--steps N] [--config FILE] [--quiet]\n",
                    argv[0]);
            return 2;
        }
    }
    if (strcmp(dtype, "fp32") && strcmp(dtype, "fp16") && strcmp(dtype, "bf16")) {
        fprintf(stderr, "--dtype must be fp32, fp16 or bf16\n");
        return 2;
    }
    if (zero != -1 && (zero < 0 || zero > 3)) {
        fprintf(stderr, "--zero must be 0, 1, 2 or 3\n");
        return 2;
    }
    if (zero != -1 && config_path) {
        fprintf(stderr, "--zero sets the embedded config's ZeRO stage: set zero_optimization.stage in %s instead\n",
                config_path);
        return 2;
    }
    snprintf(config, sizeof config, kConfigTemplate, strcmp(dtype, "fp16") ? "false" : "true",
             strcmp(dtype, "bf16") ? "false" : "true", zero < 0 ? 0 : zero,
             zero == 3 ? ", \"stage3_param_persistence_threshold\": 0" : "");
    /* The world this process was started in (MPI_COMM_WORLD under mpirun or
     * tools/ds-run, else one rank), created here so that it can be finalized
     * collectively at the end. */
    DS_TRY(ds_comm_create_world(NULL, &comm));
    ds_engine_options_init(&opts, sizeof opts);
    opts.comm = comm;
    if (config_path) DS_TRY(ds_engine_create_from_file(config_path, &opts, &engine));
    else DS_TRY(ds_engine_create(config, &opts, &engine));
    DS_TRY(ds_engine_rank(engine, &rank));
    DS_TRY(ds_engine_world_size(engine, &world));
    if (rank == 0)
        printf("deepspeed_c %s, %s training, %d rank(s), build %s\n", ds_version_string(), dtype, (int)world,
               ds_build_info());

    for (i = 0; i < HID * IN; ++i) {
        w1[i] = urand(&init_rng) / sqrtf((float)IN);
        tw1[i] = 2.0f * urand(&init_rng) / sqrtf((float)IN);
    }
    for (i = 0; i < OUT * HID; ++i) {
        w2[i] = urand(&init_rng) / sqrtf((float)HID);
        tw2[i] = 2.0f * urand(&init_rng) / sqrtf((float)HID);
    }
    for (i = 0; i < HID; ++i) { b1[i] = 0.0f; tb1[i] = 0.1f * urand(&init_rng); }
    for (i = 0; i < OUT; ++i) { b2[i] = 0.0f; tb2[i] = 0.1f * urand(&init_rng); }
    /* this rank's data stream: the data seed mixed with the rank (never 0) */
    data_rng = 0xD1B54A32D192ED03ull ^ ((uint64_t)(rank + 1) * 0x9E3779B97F4A7C15ull);
    if (data_rng == 0) data_rng = 1;

    v = tensor2(w1, s_w1, HID, IN);  DS_TRY(ds_engine_add_param(engine, "fc1.weight", &v, DS_PARAM_TRAINABLE));
    v = tensor2(b1, s_b1, HID, 0);   DS_TRY(ds_engine_add_param(engine, "fc1.bias", &v, DS_PARAM_TRAINABLE));
    v = tensor2(w2, s_w2, OUT, HID); DS_TRY(ds_engine_add_param(engine, "fc2.weight", &v, DS_PARAM_TRAINABLE));
    v = tensor2(b2, s_b2, OUT, 0);   DS_TRY(ds_engine_add_param(engine, "fc2.bias", &v, DS_PARAM_TRAINABLE));
    DS_TRY(ds_engine_init(engine));

    info.struct_size = sizeof info;
    window = steps / 10 < 5 ? 5 : steps / 10;
    for (step = 0; step < steps; ++step) {
        float mse = 0.0f;
        /* weights in working precision, widened to fp32 for our GEMMs; at
         * ZeRO-3 gathered from the partitions for the copy (elsewhere the
         * gather only checks the names) */
        DS_TRY(ds_engine_gather(engine, names, 4));
        DS_TRY(ds_engine_param_view(engine, "fc1.weight", &v)); view_to_f32(&v, w1, HID * IN);
        DS_TRY(ds_engine_param_view(engine, "fc1.bias", &v));   view_to_f32(&v, b1, HID);
        DS_TRY(ds_engine_param_view(engine, "fc2.weight", &v)); view_to_f32(&v, w2, OUT * HID);
        DS_TRY(ds_engine_param_view(engine, "fc2.bias", &v));   view_to_f32(&v, b2, OUT);
        DS_TRY(ds_engine_release(engine, names, 4));

        for (i = 0; i < MICRO * IN; ++i) x[i] = urand(&data_rng);
        forward(x, tw1, tb1, tw2, tb2, th, t);
        forward(x, w1, b1, w2, b2, h, y);

        /* DeepSpeed's multiplier: loss scale / gradient_accumulation_steps */
        DS_TRY(ds_engine_loss_multiplier(engine, &scale));
        /* loss = mean((y - t)^2); d(scale * loss)/dy */
        for (i = 0; i < MICRO * OUT; ++i) {
            float d = y[i] - t[i];
            mse += d * d;
            dy[i] = scale * 2.0f * d / (float)(MICRO * OUT);
        }
        mse /= (float)(MICRO * OUT);
        /* backward */
        gemm(1, 0, OUT, HID, MICRO, dy, h, gw2);
        for (j = 0; j < OUT; ++j) { gb2[j] = 0; for (i = 0; i < MICRO; ++i) gb2[j] += dy[i * OUT + j]; }
        gemm(0, 0, MICRO, HID, OUT, dy, w2, dh);
        for (i = 0; i < MICRO * HID; ++i) dh[i] *= 1.0f - h[i] * h[i];
        gemm(1, 0, HID, IN, MICRO, dh, x, gw1);
        for (j = 0; j < HID; ++j) { gb1[j] = 0; for (i = 0; i < MICRO; ++i) gb1[j] += dh[i * HID + j]; }

        v = tensor2(gw1, s_w1, HID, IN);  DS_TRY(ds_engine_accumulate_grad_ex(engine, "fc1.weight", &v, DS_GRAD_PREDIVIDED));
        v = tensor2(gb1, s_b1, HID, 0);   DS_TRY(ds_engine_accumulate_grad_ex(engine, "fc1.bias", &v, DS_GRAD_PREDIVIDED));
        v = tensor2(gw2, s_w2, OUT, HID); DS_TRY(ds_engine_accumulate_grad_ex(engine, "fc2.weight", &v, DS_GRAD_PREDIVIDED));
        v = tensor2(gb2, s_b2, OUT, 0);   DS_TRY(ds_engine_accumulate_grad_ex(engine, "fc2.bias", &v, DS_GRAD_PREDIVIDED));
        DS_TRY(ds_backward(engine, NULL));
        DS_TRY(ds_engine_is_gradient_accumulation_boundary(engine, &boundary));
        DS_TRY(ds_step(engine, &info));

        loss = step == 0 ? mse : 0.9f * loss + 0.1f * mse;  /* smoothed, for the progress lines */
        if (step < window) head_sum += mse;
        if (step >= steps - window) tail_sum += mse;
        if (!quiet && rank == 0 && info.stepped && (info.global_step % 10 == 0 || info.skipped))
            printf("step %4lld  loss %.5f  lr %.2e  grad_norm %.4f  loss_scale %g%s\n",
                   (long long)info.global_step, loss, info.lr, info.grad_norm, info.loss_scale,
                   info.skipped ? "  (skipped: overflow)" : "");
    }
    if (world > 1) printf("rank %d: ", (int)rank);
    if (steps < 40) {
        printf("%d steps: too short to judge whether the loss fell (the LR warms up over the first 40; "
               "mean loss of the first %d steps %.5f, of the last %d %.5f)\n",
               steps, steps < window ? steps : window, head_sum / (steps < window ? (steps ? steps : 1) : window),
               steps < window ? steps : window, tail_sum / (steps < window ? (steps ? steps : 1) : window));
    } else {
        double head = head_sum / window, tail = tail_sum / window;
        verdict = tail < 0.9 * head ? 0 : 1;
        printf("mean loss of the first %d steps %.5f, of the last %d steps %.5f: %s (x%.2f)\n", window, head,
               window, tail, verdict == 0 ? "fell" : "DID NOT FALL", head / (tail > 0 ? tail : 1e-30));
    }
    ds_engine_destroy(engine);
    DS_TRY(ds_comm_finalize(comm));  /* collective: every rank gets here */
    ds_comm_destroy(comm);
    return verdict;
}
