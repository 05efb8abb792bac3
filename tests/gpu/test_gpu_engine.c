/* Engines on cuda:0 through the C ABI, on a real GPU, against a CPU engine
 * given the same gradients. Without a GPU it prints SKIPPED and exits 77.
 * Compiled as C.
 * - ZeRO-Offload: gradients written into device memory on a non-blocking
 *   stream are handed to ds_engine_accumulate_grad right after the copy is
 *   queued (the engine must wait for the stream set with
 *   ds_engine_set_stream); after every step the device weights
 *   (ds_engine_param_view, read back with cudaMemcpy) and the fp32 master
 *   weights equal the CPU engine's bit for bit: both run the CPU optimizer.
 * - Device-resident (no offload): the CUDA kernels accumulate, take the
 *   norm and run AdamW; the fp32 weights stay within 1e-5 (1 + |w|) of the
 *   CPU engine's over the steps (the norm's summation order differs), and a
 *   checkpoint saved on the device loads into the CPU engine exactly. It
 *   runs with a non-blocking stream too: the gradient is still being copied
 *   on that stream when ds_engine_accumulate_grad is called, and the view is
 *   read back on that stream right after ds_step (the engine orders its
 *   legacy-stream work between the two). Once more at ZeRO-3 with
 *   offload_param "nvme" (the chunks swapped in host memory, gathered onto
 *   the device). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "check.h"

#define NW 4099 /* not a multiple of any vector width */
#define STEPS 6

static const char* kOffloadConfig =
    "{\"train_batch_size\": 2, \"gradient_accumulation_steps\": 1, \"gradient_clipping\": 1.0,"
    " \"bf16\": {\"enabled\": true},"
    " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.1}},"
    " \"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": \"cpu\"}}}";
static const char* kResidentConfig =
    "{\"train_batch_size\": 2, \"gradient_accumulation_steps\": 1, \"gradient_clipping\": 1.0,"
    " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.1}},"
    " \"zero_optimization\": {\"stage\": 0}}";

static DLTensor tensor(void* data, int64_t* shape, DLDevice device) {
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.device = device;
    t.ndim = 1;
    t.dtype.code = kDLFloat;
    t.dtype.bits = 32;
    t.dtype.lanes = 1;
    t.shape = shape;
    return t;
}

static ds_engine_t* create(const char* config, DLDevice device) {
    ds_engine_options_t o;
    ds_engine_t* e = NULL;
    ds_engine_options_init(&o, sizeof o);
    o.device = device;
    EXPECT_OK(ds_engine_create(config, &o, &e));
    return e;
}

/* A CPU engine and one on cuda:0 with `config`, each with parameter "w" = w0. */
static int engine_pair(const char* config, const float* w0, int64_t* shape, ds_engine_t** ec, ds_engine_t** ed) {
    const DLDevice cpu = {kDLCPU, 0}, gpu = {kDLCUDA, 0};
    *ec = create(config, cpu);
    *ed = create(config, gpu);
    if (!*ec || !*ed) return 0;
    DLTensor init = tensor((void*)w0, shape, cpu);
    EXPECT_OK(ds_engine_add_param(*ec, "w", &init, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_add_param(*ed, "w", &init, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_init(*ec));
    EXPECT_OK(ds_engine_init(*ed));
    return 1;
}

/* Micro-step `k` on both engines with the same gradient: the CPU engine's
 * from host memory, the device engine's from `dgrad`, filled on `stream`
 * and handed over while that copy may still be queued (NULL: the legacy
 * stream, a finished copy). Then the device engine's working weights, read
 * back from its view (`view_bits` wide) on `stream`, into `view`, and both
 * engines' fp32 weights into wc and wd. */
static void step_both(ds_engine_t* ec, ds_engine_t* ed, int k, float* dgrad, cudaStream_t stream, int view_bits,
                      void* view, float* wc, float* wd) {
    const DLDevice cpu = {kDLCPU, 0}, gpu = {kDLCUDA, 0};
    static float g[NW];
    int64_t shape = NW;
    int i;
    for (i = 0; i < NW; ++i) g[i] = cosf(0.11f * (float)i + 1.7f * (float)k);
    DLTensor hg = tensor(g, &shape, cpu);
    EXPECT_OK(ds_engine_accumulate_grad(ec, "w", &hg));
    EXPECT_OK(ds_backward(ec, NULL));
    EXPECT_OK(ds_step(ec, NULL));
    if (stream) CHECK(cudaMemcpyAsync(dgrad, g, sizeof g, cudaMemcpyHostToDevice, stream) == cudaSuccess);
    else CHECK(cudaMemcpy(dgrad, g, sizeof g, cudaMemcpyHostToDevice) == cudaSuccess);
    DLTensor dg = tensor(dgrad, &shape, gpu);
    EXPECT_OK(ds_engine_accumulate_grad(ed, "w", &dg));
    EXPECT_OK(ds_backward(ed, NULL));
    EXPECT_OK(ds_step(ed, NULL));

    DLTensor v;
    EXPECT_OK(ds_engine_param_view(ed, "w", &v));
    CHECK(v.device.device_type == kDLCUDA && v.dtype.bits == view_bits);
    CHECK(cudaMemcpyAsync(view, (char*)v.data + v.byte_offset, (size_t)NW * (size_t)view_bits / 8,
                          cudaMemcpyDeviceToHost, stream) == cudaSuccess);
    CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
    DLTensor fc = tensor(wc, &shape, cpu), fd = tensor(wd, &shape, cpu);
    EXPECT_OK(ds_engine_get_full_fp32_param(ec, "w", &fc));
    EXPECT_OK(ds_engine_get_full_fp32_param(ed, "w", &fd));
}

static void zero_offload(void) {
    const DLDevice cpu = {kDLCPU, 0};
    static float w0[NW], wc[NW], wd[NW];
    static uint16_t vc[NW], vd[NW];
    int64_t shape = NW;
    int i, k, caller = -1, after = -1;
    for (i = 0; i < NW; ++i) w0[i] = 0.5f * sinf(0.37f * (float)i);

    ds_engine_t *ec = NULL, *ed = NULL;
    if (!engine_pair(kOffloadConfig, w0, &shape, &ec, &ed)) return;

    cudaStream_t stream;
    float* dgrad = NULL;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    CHECK(cudaMalloc((void**)&dgrad, NW * sizeof(float)) == cudaSuccess);
    EXPECT_OK(ds_engine_set_stream(ed, stream));
    cudaGetDevice(&caller);

    for (k = 0; k < STEPS; ++k) {
        step_both(ec, ed, k, dgrad, stream, 16, vd, wc, wd);  /* bf16 device weights */
        DLTensor v;
        EXPECT_OK(ds_engine_param_view(ec, "w", &v));
        memcpy(vc, (char*)v.data + v.byte_offset, sizeof vc);
        CHECK(memcmp(vc, vd, sizeof vc) == 0);
        CHECK(memcmp(wc, wd, sizeof wc) == 0);
    }
    CHECK(memcmp(wd, w0, sizeof wd) != 0); /* the weights moved */
    cudaGetDevice(&after);
    CHECK(after == caller); /* the engine left the caller's device current */

    /* A gradient in host memory is refused on a cuda:0 engine, naming the device. */
    DLTensor hg = tensor(wc, &shape, cpu);
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_accumulate_grad(ed, "w", &hg), "cuda:0");

    ds_engine_destroy(ec);
    ds_engine_destroy(ed);
    cudaFree(dgrad);
    cudaStreamDestroy(stream);
}

static int close_to(const float* a, const float* b, int n, double tol) {
    int i;
    for (i = 0; i < n; ++i)
        if (!(fabs((double)a[i] - (double)b[i]) <= tol * (1.0 + fabs((double)a[i])))) {
            fprintf(stderr, "element %d: %.9g vs %.9g\n", i, (double)a[i], (double)b[i]);
            return 0;
        }
    return 1;
}

static void device_resident(int on_stream, const char* config) {
    const DLDevice cpu = {kDLCPU, 0};
    static float w0[NW], wc[NW], wd[NW], vd[NW];
    int64_t shape = NW;
    int i, k;
    char dir[] = "/tmp/ds_gpu_engine_XXXXXX";
    for (i = 0; i < NW; ++i) w0[i] = 0.5f * sinf(0.37f * (float)i);
    ds_engine_t *ec = NULL, *ed = NULL;
    if (!engine_pair(config, w0, &shape, &ec, &ed)) return;
    float* dgrad = NULL;
    cudaStream_t stream = NULL;
    CHECK(cudaMalloc((void**)&dgrad, NW * sizeof(float)) == cudaSuccess);
    if (on_stream) {
        CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
        EXPECT_OK(ds_engine_set_stream(ed, stream));
    }
    for (k = 0; k < STEPS; ++k) {
        step_both(ec, ed, k, dgrad, stream, 32, vd, wc, wd);
        CHECK(close_to(wc, wd, NW, 1e-5));
        CHECK(memcmp(vd, wd, sizeof wd) == 0); /* fp32: the view is the master */
    }
    CHECK(memcmp(wd, w0, sizeof wd) != 0);
    /* A checkpoint written from the device loads into the CPU engine exactly. */
    CHECK(mkdtemp(dir) != NULL);
    EXPECT_OK(ds_save_checkpoint(ed, dir, "t", NULL));
    EXPECT_OK(ds_load_checkpoint(ec, dir, "t", 0, NULL));
    DLTensor fc = tensor(wc, &shape, cpu);
    EXPECT_OK(ds_engine_get_full_fp32_param(ec, "w", &fc));
    CHECK(memcmp(wc, wd, sizeof wc) == 0);
    char rm[64];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    CHECK(system(rm) == 0);
    ds_engine_destroy(ec);
    ds_engine_destroy(ed);
    cudaFree(dgrad);
    if (stream) cudaStreamDestroy(stream);
}

int main(void) {
    int count = 0;
    cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce != cudaSuccess || count == 0) {
        printf("SKIPPED: no CUDA device (cudaGetDeviceCount: %s)\n",
               ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
        return 77;
    }
    zero_offload();
    device_resident(0, kResidentConfig);
    device_resident(1, kResidentConfig);
    {   /* ZeRO-3 with its 16-bit (here fp32) chunks swapped to NVMe, every page out between uses */
        static char config[1024];
        char swap[] = "/tmp/ds_gpu_engine_swap_XXXXXX", rm[80];
        CHECK(mkdtemp(swap) != NULL);
        snprintf(config, sizeof config,
                 "{\"train_batch_size\": 2, \"gradient_accumulation_steps\": 1, \"gradient_clipping\": 1.0,"
                 " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.1}},"
                 " \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\","
                 " \"nvme_path\": \"%s\", \"max_in_cpu\": 0}}}",
                 swap);
        device_resident(0, config);
        snprintf(rm, sizeof rm, "rm -rf '%s'", swap);
        CHECK(system(rm) == 0);
    }
    return ds_test_finish();
}
