/* A built-in GPT (ds_model_create + ds_engine_create_with_model) trained on
 * cuda:0 through the C ABI, on a real GPU, against a CPU engine given the
 * same config, spec and batches. Without a GPU it prints SKIPPED and exits
 * 77. Compiled as C99.
 *
 * Modes: device-resident fp32 (ZeRO 0, also with MoE layers, with and without
 * the Jitter gate), device-resident bf16 (ZeRO 2 and 3:
 * stage 3 in a world of one trains as stage 0, through the model's stage-3
 * path; with offload_param cpu it runs ZeRO-3 proper on one rank: 16-bit
 * chunks in host memory, gradients reduce-scattered in device buckets and
 * weights gathered over a one-rank NCCL communicator) and ZeRO-Offload bf16
 * (ZeRO 2, offload_optimizer cpu), each with dropout 0.0
 * and 0.1 (the device draws the CPU's masks: the same counter-based RNG, so
 * the dropout runs must match as closely as the others). Per step the
 * losses are compared, after the last step every fp32 master weight
 * (ds_engine_get_full_fp32_param); then an eval forward writing the logits
 * to device memory and one writing them to host memory must be equal bit
 * for bit (the same kernels on the same inputs), and close to the CPU's.
 * Step 1 hands its ids and targets over in device memory.
 *
 * The host-backed tests (tests/unit/test_model_on_device.cpp) prove the
 * engine's plumbing bit for bit with the CPU's kernels standing in for the
 * device's; here the CUDA kernels differ from the CPU's in summation order
 * only, so the comparison has tolerances (see `modes` below for why each). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "check.h"

#define VOCAB 512
#define BLOCK 64
#define BATCH 4
#define STEPS 8
#define LR 1e-3 /* the config's AdamW lr (also in kConfigFormat) */

typedef struct {
    const char* name;
    const char* dtype;   /* "fp32" or "bf16" */
    int stage;
    int offload;         /* 1: offload_optimizer cpu (ZeRO-Offload); 2: offload_param cpu (device-resident) */
    double loss_rtol;    /* per-step |loss_gpu - loss_cpu| <= loss_rtol * |loss_cpu| */
    double master_tol;   /* |w_gpu - w_cpu| <= master_tol * (1 + |w_cpu|) ... */
    double outlier_frac; /* ... for all but this fraction of the elements */
    double logit_tol;    /* mean |y_gpu - y_cpu| of the eval logits */
    const char* moe;     /* NULL, or the spec's "moe" member (", \"moe\": {...}") */
} gpu_mode;

/* Tolerances.
 * fp32: cuBLAS runs fp32 GEMMs in fp32 (CUBLAS_COMPUTE_32F, no TF32:
 * kernels/cuda/cublas_handle.cpp), so the GPU and the CPU (oneDNN / the
 * blocked GEMM) differ only in the order of their sums, as do the
 * LayerNorm, softmax and cross-entropy reductions: a relative error of a few
 * fp32 ulps times sqrt(K) per product (K <= 512 here: ~1e-6), which eight
 * small AdamW steps do not amplify much. 1e-4 relative on the loss leaves a
 * factor ~100 of headroom; a wrong kernel, or another dropout mask (a tenth
 * of the embedding outputs zeroed elsewhere moves logits of std ~0.2 by
 * several percent), should move it by more. The printed maxima show how
 * much headroom there was.
 * Masters: AdamW's update is lr * m / (sqrt(v) + eps), about lr * sign(g) in
 * the first steps, whatever |g| is: an element whose gradient is within the
 * rounding noise of zero may step the other way on the GPU and end up to
 * ~2 lr per step apart. Such elements are rare (the noise is ~1e-6 of a
 * typical gradient), so all but a fraction 1e-3 of the elements must be
 * within 1e-4 (1 + |w|), and every element within 3 lr STEPS + that: over
 * 8 steps with beta1 0.9, beta2 0.999, Cauchy-Schwarz on the bias-corrected
 * sums bounds |m_hat / sqrt(v_hat)| by ~1.2, so two runs of one element can
 * drift apart by at most ~2.4 lr per step.
 * bf16: the GEMMs read bf16 operands (activations rounded to bf16 before a
 * product), and an fp32 value a few ulps apart on the two machines can round
 * to neighbouring bf16 values (2^-8 relative apart): single elements differ
 * by ~4e-3 relative and that spreads through the layers; the loss averages
 * B*T*V terms. 5e-3 relative on the loss, masters within 1e-3 (1 + |w|) for
 * all but a fraction 1e-2 of the elements (the noisier gradients flip many
 * more near-zero signs), every element within the same AdamW drift bound.
 * Eval logits (after training): their mean absolute difference, 1e-4 (fp32)
 * and 5e-3 (bf16); the mean, because a master that stepped the other way
 * (above) moves a whole vocabulary column of the tied lm_head.
 * ZeRO-Offload bf16 runs the CPU optimizer on GPU gradients: as bf16.
 * Measured on the CPU (this test's CPU runs with DS_GEMM_ENGINE=onednn
 * against =reference and =openblas, another summation order in every
 * product, the rest unchanged): fp32 loss 7.6e-8 relative, masters at most
 * 8.2e-5 apart (none outside 1e-4 (1 + |w|)), logits 4.6e-6 apart on
 * average; bf16 loss 2.8e-5, 348-396 of 470528 masters outside 1e-3
 * (1 + |w|) (0.08%), at most 1.0e-2 apart (~1.25 lr per step: the sign
 * flips above), logits 1.5e-3 apart on average. The GPU also differs in
 * its reductions and transcendental functions, hence the headroom. */
static const gpu_mode modes[] = {
    {"resident fp32 zero0", "fp32", 0, 0, 1e-4, 1e-4, 1e-3, 1e-4, NULL},
    {"resident bf16 zero2", "bf16", 2, 0, 5e-3, 1e-3, 1e-2, 5e-3, NULL},
    {"resident bf16 zero3", "bf16", 3, 0, 5e-3, 1e-3, 1e-2, 5e-3, NULL},
    {"resident bf16 zero3 params on host", "bf16", 3, 2, 5e-3, 1e-3, 1e-2, 5e-3, NULL},
    {"offload  bf16 zero2", "bf16", 2, 1, 5e-3, 1e-3, 1e-2, 5e-3, NULL},
    /* MoE layers on the GPU (src/nn/moe_device.cpp): top-1 over 4 experts in
     * every layer, capacity large enough that no token is dropped, so only a
     * near-tie in a gate's argmax could route a token differently from the
     * CPU (fp32 logits apart by summation order only): fp32 tolerances. */
    {"resident fp32 zero0 moe", "fp32", 0, 0, 1e-4, 1e-4, 1e-3, 1e-4,
     ", \"moe\": {\"num_experts\": 4, \"every\": 1, \"capacity_factor\": 4.0}"},
    /* The same with the Jitter gate: its factors drawn on the device are the
     * CPU's bit for bit (kernels/cuda/moe_jitter.cu), so the same tolerances. */
    {"resident fp32 zero0 moe jitter", "fp32", 0, 0, 1e-4, 1e-4, 1e-3, 1e-4,
     ", \"moe\": {\"num_experts\": 4, \"every\": 1, \"capacity_factor\": 4.0, \"noisy_gate_policy\": \"Jitter\"}"},
};

static const char* kConfigFormat =
    "{\"train_micro_batch_size_per_gpu\": %d, \"gradient_accumulation_steps\": 1, \"gradient_clipping\": 1.0,"
    " %s \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3, \"weight_decay\": 0.1}},"
    " \"zero_optimization\": {\"stage\": %d%s}}";
static const char* kSpecFormat =
    "{\"type\": \"gpt\", \"vocab_size\": %d, \"block_size\": %d, \"n_layer\": 2, \"n_head\": 4,"
    " \"n_embd\": 128, \"dropout\": %s, \"tied_embeddings\": true, \"seed\": 5%s}";

static int failures = 0; /* modes that failed a comparison (the CHECKs count too) */

static ds_engine_t* create(const gpu_mode* m, const char* dropout, DLDevice device) {
    char config[1024], spec[512], prec[64] = "";
    ds_model_t* model = NULL;
    ds_engine_t* e = NULL;
    ds_engine_options_t o;
    if (strcmp(m->dtype, "fp32")) snprintf(prec, sizeof prec, "\"%s\": {\"enabled\": true},", m->dtype);
    snprintf(config, sizeof config, kConfigFormat, BATCH, prec, m->stage,
             m->offload == 1   ? ", \"offload_optimizer\": {\"device\": \"cpu\"}"
             : m->offload == 2 ? ", \"offload_param\": {\"device\": \"cpu\", \"pin_memory\": true}"
                               : "");
    snprintf(spec, sizeof spec, kSpecFormat, VOCAB, BLOCK, dropout, m->moe ? m->moe : "");
    EXPECT_OK(ds_model_create(spec, &model));
    if (!model) return NULL;
    ds_engine_options_init(&o, sizeof o);
    o.device = device;
    EXPECT_OK(ds_engine_create_with_model(config, model, &o, &e));
    ds_model_destroy(model); /* the engine keeps it */
    return e;
}

static DLTensor tensor(void* data, int ndim, int64_t* shape, DLDevice device, uint8_t code) {
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.device = device;
    t.ndim = ndim;
    t.dtype.code = code;
    t.dtype.bits = 32;
    t.dtype.lanes = 1;
    t.shape = shape;
    return t;
}

/* Batch k's ids and targets: deterministic, different per step. */
static void batch(int k, int32_t* ids, int32_t* tgt) {
    int i;
    for (i = 0; i < BATCH * BLOCK; ++i) {
        ids[i] = (int32_t)(((uint32_t)i * 2654435761u + (uint32_t)k * 40503u) % VOCAB);
        tgt[i] = (int32_t)(((uint32_t)i * 2246822519u + (uint32_t)k * 9973u + 7u) % VOCAB);
    }
}

/* One training step; the inputs are in `dev_in` memory when non-NULL (two
 * device buffers of BATCH*BLOCK int32), else on the host. */
static float train_step(ds_engine_t* e, const int32_t* ids, const int32_t* tgt, int32_t* dev_in) {
    const DLDevice cpu = {kDLCPU, 0}, gpu = {kDLCUDA, 0};
    int64_t shape[2] = {BATCH, BLOCK}, one = 1;
    float loss = NAN;
    DLTensor in[2], out = tensor(&loss, 1, &one, cpu, kDLFloat);
    if (dev_in) {
        const size_t bytes = (size_t)BATCH * BLOCK * sizeof(int32_t);
        CHECK(cudaMemcpy(dev_in, ids, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
        CHECK(cudaMemcpy(dev_in + BATCH * BLOCK, tgt, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
        in[0] = tensor(dev_in, 2, shape, gpu, kDLInt);
        in[1] = tensor(dev_in + BATCH * BLOCK, 2, shape, gpu, kDLInt);
    } else {
        in[0] = tensor((void*)ids, 2, shape, cpu, kDLInt);
        in[1] = tensor((void*)tgt, 2, shape, cpu, kDLInt);
    }
    EXPECT_OK(ds_forward(e, in, 2, &out));
    EXPECT_OK(ds_backward(e, NULL));
    EXPECT_OK(ds_step(e, NULL));
    return loss;
}

/* Every parameter's fp32 master weights end to end, in registration order
 * (malloc'ed; *n their count). */
static float* masters(ds_engine_t* e, int64_t* n) {
    const DLDevice cpu = {kDLCPU, 0};
    int64_t np = 0, p, total = 0, at = 0;
    float* w;
    EXPECT_OK(ds_engine_num_params(e, &np));
    for (p = 0; p < np; ++p) {
        ds_param_info_t info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        EXPECT_OK(ds_engine_param_info(e, p, &info));
        total += info.numel;
    }
    w = malloc((size_t)total * sizeof *w);
    CHECK(w != NULL);
    if (!w) exit(1);
    for (p = 0; p < np; ++p) {
        ds_param_info_t info;
        int64_t shape[8];
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        EXPECT_OK(ds_engine_param_info(e, p, &info));
        CHECK(info.ndim <= 8);
        memcpy(shape, info.shape, (size_t)info.ndim * sizeof *shape);
        DLTensor t = tensor(w + at, info.ndim, shape, cpu, kDLFloat);
        EXPECT_OK(ds_engine_get_full_fp32_param(e, info.name, &t));
        at += info.numel;
    }
    *n = total;
    return w;
}

/* The logits [BATCH, BLOCK, VOCAB] of an eval forward on batch 99 into `y`
 * (host memory), written by the engine into device memory when `on_device`. */
static void eval_logits(ds_engine_t* e, int on_device, float* y) {
    const DLDevice cpu = {kDLCPU, 0}, gpu = {kDLCUDA, 0};
    static int32_t ids[BATCH * BLOCK], tgt[BATCH * BLOCK];
    int64_t ishape[2] = {BATCH, BLOCK}, yshape[3] = {BATCH, BLOCK, VOCAB};
    const size_t bytes = (size_t)BATCH * BLOCK * VOCAB * sizeof(float);
    float* dy = NULL;
    batch(99, ids, tgt);
    DLTensor in = tensor(ids, 2, ishape, cpu, kDLInt);
    if (on_device) CHECK(cudaMalloc((void**)&dy, bytes) == cudaSuccess);
    DLTensor out = tensor(on_device ? (void*)dy : (void*)y, 3, yshape, on_device ? gpu : cpu, kDLFloat);
    EXPECT_OK(ds_engine_eval(e, 1));
    EXPECT_OK(ds_forward(e, &in, 1, &out));
    EXPECT_OK(ds_engine_eval(e, 0));
    if (on_device) {
        CHECK(cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
        cudaFree(dy);
    }
}

static double rel(double a, double b) { return fabs(a - b) / (fabs(b) > 0 ? fabs(b) : 1.0); }

/* Mode m with this dropout: GPU vs CPU; prints the max differences. */
static void compare(const gpu_mode* m, const char* dropout, int32_t* dev_in) {
    const DLDevice cpu = {kDLCPU, 0}, gpu = {kDLCUDA, 0};
    static int32_t ids[BATCH * BLOCK], tgt[BATCH * BLOCK];
    static float yd[BATCH * BLOCK * VOCAB], yh[BATCH * BLOCK * VOCAB], yc[BATCH * BLOCK * VOCAB];
    const int64_t ny = (int64_t)BATCH * BLOCK * VOCAB;
    const double drift = 3.0 * LR * STEPS; /* see the tolerances above */
    double max_loss_rel = 0.0, max_w = 0.0, max_y = 0.0;
    int64_t nd = 0, nc = 0, i, outliers = 0;
    int k, ok = 1, over_drift = 0;
    ds_engine_t *ed = create(m, dropout, gpu), *ec = create(m, dropout, cpu);
    if (!ed || !ec) {
        ds_engine_destroy(ed);
        ds_engine_destroy(ec);
        ++failures;
        return;
    }
    for (k = 0; k < STEPS; ++k) {
        float ld, lc;
        batch(k, ids, tgt);
        ld = train_step(ed, ids, tgt, k == 1 ? dev_in : NULL); /* step 1: inputs in device memory */
        lc = train_step(ec, ids, tgt, NULL);
        if (!(rel(ld, lc) <= m->loss_rtol)) {
            fprintf(stderr, "%s dropout %s step %d: loss %.7f (gpu) vs %.7f (cpu)\n", m->name, dropout, k,
                    (double)ld, (double)lc);
            ok = 0;
        }
        if (rel(ld, lc) > max_loss_rel || ld != ld) max_loss_rel = ld != ld ? INFINITY : rel(ld, lc);
    }
    float *wd = masters(ed, &nd), *wc = masters(ec, &nc);
    CHECK(nd == nc);
    for (i = 0; i < nd && i < nc; ++i) {
        const double d = fabs((double)wd[i] - (double)wc[i]);
        const double tol = m->master_tol * (1.0 + fabs((double)wc[i]));
        if (d > max_w || d != d) max_w = d != d ? INFINITY : d;
        if (!(d <= tol)) ++outliers;
        if (!(d <= tol + drift)) ++over_drift;
    }
    if ((double)outliers > m->outlier_frac * (double)nc || over_drift) {
        fprintf(stderr, "%s dropout %s: %lld of %lld masters outside %.0e (1 + |w|), %d beyond the AdamW drift bound\n",
                m->name, dropout, (long long)outliers, (long long)nc, m->master_tol, over_drift);
        ok = 0;
    }
    /* Eval: device memory and host memory out, the same bits; close to the CPU's. */
    eval_logits(ed, 1, yd);
    eval_logits(ed, 0, yh);
    eval_logits(ec, 0, yc);
    if (memcmp(yd, yh, sizeof yd) != 0) {
        fprintf(stderr, "%s dropout %s: eval logits written to device memory differ from host memory\n", m->name,
                dropout);
        ok = 0;
    }
    for (i = 0; i < ny; ++i) {
        const double d = fabs((double)yh[i] - (double)yc[i]);
        if (d > max_y || d != d) max_y = d != d ? INFINITY : d;
    }
    double sum_y = 0.0;
    for (i = 0; i < ny; ++i) sum_y += fabs((double)yh[i] - (double)yc[i]);
    if (!(sum_y / (double)ny <= m->logit_tol)) {
        fprintf(stderr, "%s dropout %s: eval logits: mean abs diff %.3g (gpu vs cpu) > %.0e\n", m->name, dropout,
                sum_y / (double)ny, m->logit_tol);
        ok = 0;
    }
    printf("%s dropout %s: max loss rel diff %.3g (tol %.0e), max master abs diff %.3g, %lld/%lld masters outside"
           " %.0e (1+|w|) (allowed %.0f), eval logits max abs diff %.3g mean %.3g, device/host out %s: %s\n",
           m->name, dropout, max_loss_rel, m->loss_rtol, max_w, (long long)outliers, (long long)nc, m->master_tol,
           floor(m->outlier_frac * (double)nc), max_y, sum_y / (double)ny, memcmp(yd, yh, sizeof yd) ? "DIFFER" : "equal",
           ok ? "ok" : "FAILED");
    if (!ok) ++failures;
    free(wd);
    free(wc);
    ds_engine_destroy(ed);
    ds_engine_destroy(ec);
}

int main(void) {
    int count = 0;
    size_t j;
    int32_t* dev_in = NULL;
    cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce != cudaSuccess || count == 0) {
        printf("SKIPPED: no CUDA device (cudaGetDeviceCount: %s)\n",
               ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
        return 77;
    }
    CHECK(cudaMalloc((void**)&dev_in, 2 * (size_t)BATCH * BLOCK * sizeof(int32_t)) == cudaSuccess);
    for (j = 0; j < sizeof modes / sizeof modes[0]; ++j) {
        compare(&modes[j], "0.0", dev_in);
        compare(&modes[j], "0.1", dev_in);
    }
    cudaFree(dev_in);
    CHECK(failures == 0);
    return ds_test_finish();
}
