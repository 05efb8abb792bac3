/*
 * bench_gpt — GPT training tokens/s through the public C ABI only:
 * ds_model_create + ds_engine_create_with_model, then per step
 * ds_forward (tokens, targets -> loss), ds_backward(e, NULL), ds_step.
 *
 *   OMP_NUM_THREADS=2 bench_gpt [--layers 6] [--heads 6] [--embd 384] [--vocab 8192]
 *       [--batch 8] [--seq 128] [--steps 5] [--warmup 1] [--precision fp32|bf16]
 *       [--zero 0] [--seed 1] [--bucket 0] [--phases 0]
 *       [--device cpu|cuda] [--offload 0|1] [--peak-tflops P] [--prefetch N] [--reuse N]
 *   --bucket N: zero_optimization.reduce_bucket_size = N elements
 *   (0: DeepSpeed's defaults, 5e8, larger than this model, so one bucket holds every gradient).
 *   --prefetch N: zero_optimization.stage3_prefetch_bucket_size = N elements (ZeRO-3; 0: no
 *   prefetch; not given: DeepSpeed's default, 5e7).
 *   --reuse N: zero_optimization.stage3_max_reuse_distance = N elements (ZeRO-3; 0: every
 *   release frees the gathered copy; not given: DeepSpeed's default, 1e9).
 *   --phases 1: after each forward, backward and step, print PHASE lines: the process's RSS
 *   and its high-water mark (/proc/self/status) beside the engine's allocator (now, peak), so
 *   the memory the engine does not count (MPI, oneDNN, libc) shows phase by phase.
 *   --device cuda: the engine on cuda:0 (options.device; the built-in layers run on the GPU's
 *   kernels); the batches stay in host memory and ds_forward copies them over, as a caller
 *   feeding a GPU from a host data loader would. Without a CUDA device (or in a build without
 *   CUDA) it prints "SKIPPED: no CUDA device (...)" and exits 0.
 *   --offload 1: ZeRO-Offload, zero_optimization.offload_optimizer {"device": "cpu"} (needs
 *   --zero >= 1): the weights and the layers on the GPU, master weights and AdamW on the host.
 *   Without it a cuda engine is device-resident (every buffer on the GPU; ZeRO 0-2, one rank).
 *   --peak-tflops P: the peak the MFU is taken against, in TFLOP/s. Default on cuda: 989 for
 *   bf16/fp16 (H100/H200 SXM dense bf16 tensor cores) and 67 for fp32 (their fp32 without
 *   tensor cores: the fp32 products run in fp32, CUBLAS_COMPUTE_32F, never TF32); on cpu no
 *   default (no MFU printed unless given). The line says which peak was used.
 *
 * Prints the machine, then
 *   RESULT ours-<precision> tokens_per_s=<median> step_ms=<median> fwd_ms= bwd_ms= opt_ms= ...
 *   MEMORY ... the engine's memory report, getrusage's max RSS (and the RSS before the engine
 *          existed), and the budget: params + grads + optimizer state (the engine's report) +
 *          the activations the model keeps for backward (its meter's peak, which the engine
 *          logs once at INFO; also printed: the minimal set a GPT needs, formula below).
 * Tokens are uniform random; the first loss is printed next to ln(vocab) as a sanity check.
 * Tokens/s = batch * seq / (forward + backward + step), the median over the timed steps.
 * MFU = tokens/s * (6 N + 12 L T C) / peak: the FLOPs per token of forward + backward that the
 * engine's own throughput monitor counts (monitor::gpt_flops_per_token; N = the model's
 * parameters, the tied embedding once; the attention's T x T products as 12 L T C).
 * On cuda every clock read is preceded by
 * cudaDeviceSynchronize, so a phase's time includes the GPU work it queued.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "deepspeed_c.h"

/* The CUDA runtime, only where CMake found it (bench/CMakeLists.txt): the CPU build has no cudart. */
#ifdef DS_BENCH_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

typedef struct {
    int layers, heads, embd, vocab, batch, seq, steps, warmup, zero, seed, bucket, phases, offload, prefetch, reuse;
    const char* precision;
    const char* device; /* "cpu" or "cuda" */
    double peak_tflops; /* 0: the default (above) */
} args_t;

static int on_cuda = 0; /* --device cuda */

/* Waits for the GPU work queued so far (--device cuda), so the clock read after it counts it. */
static void sync_device(void) {
#ifdef DS_BENCH_HAVE_CUDA
    if (on_cuda) cudaDeviceSynchronize();
#endif
}

/* --device cuda: 1 when cuda:0 is usable (and prints it), else prints SKIPPED and returns 0. */
static int cuda_ready(void) {
#ifdef DS_BENCH_HAVE_CUDA
    int count = 0;
    struct cudaDeviceProp p;
    const cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce != cudaSuccess || count == 0) {
        printf("SKIPPED: no CUDA device (cudaGetDeviceCount: %s)\n",
               ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
        return 0;
    }
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
        printf("SKIPPED: no CUDA device (cudaGetDeviceProperties(0) failed)\n");
        return 0;
    }
    printf("gpu: %s, compute capability %d.%d, %.1f GiB, %d SMs\n", p.name, p.major, p.minor,
           (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), p.multiProcessorCount);
    return 1;
#else
    printf("SKIPPED: no CUDA device (bench_gpt was built without the CUDA runtime)\n");
    return 0;
#endif
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

static double median(const double* v, int n) {
    double* s = malloc((size_t)n * sizeof *s);
    double m;
    if (!s) return NAN;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

static void check(ds_status_t s, const char* what) {
    if (s != DS_OK) {
        fprintf(stderr, "bench_gpt: %s failed (status %d): %s\n", what, (int)s, ds_last_error());
        exit(1);
    }
}

/* VmRSS / VmHWM of /proc/self/status in MiB (-1 where unreadable). */
static double proc_status_mib(const char* key) {
    FILE* f = fopen("/proc/self/status", "r");
    char line[256];
    double v = -1.0;
    const size_t n = strlen(key);
    if (!f) return v;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n)) v = atof(line + n) / 1024.0;
    fclose(f);
    return v;
}

/* --phases 2: every mapping holding more than 1 MiB resident (/proc/self/smaps). */
static void print_mappings(void) {
    FILE* f = fopen("/proc/self/smaps", "r");
    char line[512], name[512] = "";
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        double kb;
        if (strchr(line, '-') && strchr(line, '-') < strchr(line, ' ') && line[0] != ' ') {
            snprintf(name, sizeof name, "%s", line);
            name[strcspn(name, "\n")] = 0;
        } else if (sscanf(line, "Rss: %lf kB", &kb) == 1 && kb > 1024.0) {
            printf("PHASE   mapping rss %.1f MiB: %s\n", kb / 1024.0, name);
        }
    }
    fclose(f);
}

static void print_phase(ds_engine_t* engine, int step, const char* phase, int detail) {
    ds_memory_report_t r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    check(ds_engine_memory_report(engine, &r), "ds_engine_memory_report");
    const double mib = 1024.0 * 1024.0;
    printf("PHASE step %d after %-8s rss %.1f MiB, rss high-water %.1f MiB; engine now %.1f MiB, engine peak %.1f MiB\n",
           step, phase, proc_status_mib("VmRSS:"), proc_status_mib("VmHWM:"), r.total_bytes / mib,
           r.peak_total_bytes / mib);
    if (detail > 1) print_mappings();
}

static double max_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0; /* Linux: KiB */
}

static double current_rss_mib(void) {
    long pages = 0, resident = 0;
    FILE* f = fopen("/proc/self/statm", "r");
    if (!f) return NAN;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
    fclose(f);
    return resident < 0 ? NAN : resident * 4096.0 / (1024.0 * 1024.0);
}

static void print_cpu(void) {
    char line[8192], model[256] = "unknown";
    int avx512f = 0, avx512_bf16 = 0, amx = 0, avx2 = 0;
    FILE* f = fopen("/proc/cpuinfo", "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            if (!strncmp(line, "model name", 10) && !strcmp(model, "unknown")) {
                char* c = strchr(line, ':');
                if (c) {
                    snprintf(model, sizeof model, "%s", c + 2);
                    model[strcspn(model, "\n")] = 0;
                }
            }
            if (!strncmp(line, "flags", 5)) {
                avx2 |= strstr(line, " avx2") != NULL;
                avx512f |= strstr(line, " avx512f") != NULL;
                avx512_bf16 |= strstr(line, " avx512_bf16") != NULL;
                amx |= strstr(line, " amx_tile") != NULL;
            }
        }
        fclose(f);
    }
    printf("cpu: %s | isa: %s%s%s%s | OMP_NUM_THREADS=%s\n", model, avx2 ? "avx2 " : "",
           avx512f ? "avx512f " : "", avx512_bf16 ? "avx512_bf16 " : "", amx ? "amx" : "(no amx)",
           getenv("OMP_NUM_THREADS") ? getenv("OMP_NUM_THREADS") : "(unset)");
}

/* Bytes of activations a GPT-2 training step must keep from forward to backward
 * (fp32, batch B, sequence T, width C, NH heads, L layers, vocab V), the minimal set of a
 * straightforward implementation: per layer the LayerNorm-1 input (the residual stream)
 * and output, qkv (3C), the attention probabilities (NH x T x T), the attention output,
 * the residual after attention, the LayerNorm-2 output, the MLP pre-activation and the GELU
 * output (4C each), and the two LayerNorms' mean and rstd; after the layers the final
 * LayerNorm input and output with its statistics and the logits-sized softmax for the
 * cross-entropy backward. llm.c keeps a superset (pre-softmax scores, projections). */
static double activation_budget_bytes(const args_t* a) {
    const double B = a->batch, T = a->seq, C = a->embd, NH = a->heads, L = a->layers, V = a->vocab;
    const double per_layer = B * T * C * (1 + 1 + 3 + 1 + 1 + 1 + 4 + 4) + B * NH * T * T + 4 * B * T;
    const double head = 2 * B * T * C + 2 * B * T + B * T * V;
    return 4.0 * (L * per_layer + head);
}

static int parse_args(int argc, char** argv, args_t* a) {
    struct { const char* name; int* dst; int min; } ints[] = {
        {"--layers", &a->layers, 1}, {"--heads", &a->heads, 1}, {"--embd", &a->embd, 1},
        {"--vocab", &a->vocab, 2},   {"--batch", &a->batch, 1}, {"--seq", &a->seq, 1},
        {"--steps", &a->steps, 1},   {"--warmup", &a->warmup, 0}, {"--zero", &a->zero, 0},
        {"--seed", &a->seed, 0},   {"--bucket", &a->bucket, 0}, {"--phases", &a->phases, 0},
        {"--offload", &a->offload, 0}, {"--prefetch", &a->prefetch, 0},
        {"--reuse", &a->reuse, 0},
    };
    const int nints = (int)(sizeof ints / sizeof ints[0]);
    for (int i = 1; i < argc; i++) {
        int matched = 0;
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_gpt: argument %s needs a value\n", argv[i]);
            return 0;
        }
        if (!strcmp(argv[i], "--device")) {
            a->device = argv[++i];
            if (strcmp(a->device, "cpu") && strcmp(a->device, "cuda")) {
                fprintf(stderr, "bench_gpt: --device %s: expected cpu or cuda\n", a->device);
                return 0;
            }
            continue;
        }
        if (!strcmp(argv[i], "--peak-tflops")) {
            char* end = NULL;
            a->peak_tflops = strtod(argv[++i], &end);
            if (!*argv[i] || *end || !(a->peak_tflops > 0.0)) {
                fprintf(stderr, "bench_gpt: --peak-tflops %s: expected a number > 0\n", argv[i]);
                return 0;
            }
            continue;
        }
        if (!strcmp(argv[i], "--precision")) {
            a->precision = argv[++i];
            if (strcmp(a->precision, "fp32") && strcmp(a->precision, "bf16") && strcmp(a->precision, "fp16")) {
                fprintf(stderr, "bench_gpt: --precision %s: expected fp32, bf16 or fp16\n", a->precision);
                return 0;
            }
            continue;
        }
        for (int k = 0; k < nints; k++) {
            if (!strcmp(argv[i], ints[k].name)) {
                char* end = NULL;
                long v = strtol(argv[i + 1], &end, 10);
                if (!*argv[i + 1] || *end || v < ints[k].min || v > 1000000000L) {
                    fprintf(stderr, "bench_gpt: %s %s: expected an integer >= %d\n", argv[i], argv[i + 1],
                            ints[k].min);
                    return 0;
                }
                *ints[k].dst = (int)v;
                matched = 1;
                i++;
                break;
            }
        }
        if (!matched) {
            fprintf(stderr, "bench_gpt: unknown argument %s\n", argv[i]);
            return 0;
        }
    }
    if (a->offload > 1 || (a->offload && a->zero < 1)) {
        fprintf(stderr, "bench_gpt: --offload %d: expected 0 or 1, and 1 needs --zero >= 1 (ZeRO-Offload)\n",
                a->offload);
        return 0;
    }
    if (a->embd % a->heads) {
        fprintf(stderr, "bench_gpt: --heads %d does not divide --embd %d\n", a->heads, a->embd);
        return 0;
    }
    return 1;
}

/* The engine's log at INFO: its one-time line "model: activations kept for backward: peak N
 * bytes" is the model's activation meter (what it really keeps); warnings and errors are echoed. */
static long long meter_peak_bytes = -1;
static void on_log(int32_t level, const char* message, void* user_data) {
    const char* key = "activations kept for backward: peak ";
    const char* at = strstr(message, key);
    (void)user_data;
    if (at) meter_peak_bytes = strtoll(at + strlen(key), NULL, 10);
    if (level <= DS_LOG_WARN) fprintf(stderr, "[engine] %s\n", message);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static int32_t random_token(int vocab) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (int32_t)(((rng_state * 0x2545F4914F6CDD1Dull) >> 33) % (uint64_t)vocab);
}

int main(int argc, char** argv) {
    args_t a = {6, 6, 384, 8192, 8, 128, 5, 1, 0, 1, 0, 0, 0, -1, -1, "fp32", "cpu", 0.0};
    char spec[512], config[1024], precision_section[64] = "", buckets[256] = "";
    ds_model_t* model = NULL;
    ds_engine_t* engine = NULL;
    int64_t nparams = 0;
    if (!parse_args(argc, argv, &a)) return 2;
    rng_state += (uint64_t)a.seed;

    print_cpu();
    on_cuda = !strcmp(a.device, "cuda");
    if (on_cuda && !cuda_ready()) return 0; /* SKIPPED: a dry run on a machine without a GPU */
    printf("library: %s\n", ds_build_info());
    const double rss_before = current_rss_mib();

    snprintf(spec, sizeof spec,
             "{\"type\": \"gpt\", \"vocab_size\": %d, \"block_size\": %d, \"n_layer\": %d, \"n_head\": %d,"
             " \"n_embd\": %d, \"dropout\": 0.0, \"tied_embeddings\": true, \"seed\": %d}",
             a.vocab, a.seq, a.layers, a.heads, a.embd, a.seed);
    if (a.bucket > 0)
        snprintf(buckets, sizeof buckets, ", \"reduce_bucket_size\": %d", a.bucket);
    if (a.offload)
        snprintf(buckets + strlen(buckets), sizeof buckets - strlen(buckets),
                 ", \"offload_optimizer\": {\"device\": \"cpu\"}");
    if (a.prefetch >= 0)
        snprintf(buckets + strlen(buckets), sizeof buckets - strlen(buckets),
                 ", \"stage3_prefetch_bucket_size\": %d", a.prefetch);
    if (a.reuse >= 0)
        snprintf(buckets + strlen(buckets), sizeof buckets - strlen(buckets),
                 ", \"stage3_max_reuse_distance\": %d", a.reuse);
    if (strcmp(a.precision, "fp32"))
        snprintf(precision_section, sizeof precision_section, "\"%s\": {\"enabled\": true},", a.precision);
    snprintf(config, sizeof config,
             "{\"train_micro_batch_size_per_gpu\": %d, \"gradient_accumulation_steps\": 1, %s"
             " \"zero_optimization\": {\"stage\": %d%s},"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-4, \"betas\": [0.9, 0.999],"
             " \"eps\": 1e-8, \"weight_decay\": 0.0}}}",
             a.batch, precision_section, a.zero, buckets);
    check(ds_model_create(spec, &model), "ds_model_create");
    check(ds_model_num_params(model, &nparams), "ds_model_num_params");
    ds_engine_options_t opts;
    ds_engine_options_init(&opts, sizeof opts);
    opts.log_callback = on_log;
    opts.log_level = DS_LOG_INFO;
    if (on_cuda) {
        opts.device.device_type = kDLCUDA;
        opts.device.device_id = 0;
    }
    check(ds_engine_create_with_model(config, model, &opts, &engine), "ds_engine_create_with_model");
    ds_model_destroy(model); /* the engine keeps it */
    const double rss_after_create = max_rss_mib(); /* the high-water mark of creating the engine */
    printf("GPT L=%d C=%d NH=%d V=%d B=%d T=%d, %lld parameters, precision %s, ZeRO %d, device %s%s\n", a.layers,
           a.embd, a.heads, a.vocab, a.batch, a.seq, (long long)nparams, a.precision, a.zero,
           on_cuda ? "cuda:0" : "cpu",
           on_cuda ? (a.offload ? " (ZeRO-Offload: optimizer on the host)" : " (device-resident)")
                   : (a.offload ? " (offload_optimizer cpu)" : ""));

    const int64_t ntok = (int64_t)a.batch * a.seq;
    int32_t* ids = malloc((size_t)ntok * sizeof *ids);
    int32_t* tgt = malloc((size_t)ntok * sizeof *tgt);
    double *fwd = calloc((size_t)a.steps, sizeof(double)), *bwd = calloc((size_t)a.steps, sizeof(double));
    double *opt = calloc((size_t)a.steps, sizeof(double)), *tot = calloc((size_t)a.steps, sizeof(double));
    if (!ids || !tgt || !fwd || !bwd || !opt || !tot) {
        fprintf(stderr, "bench_gpt: out of memory for %lld tokens\n", (long long)ntok);
        return 1;
    }
    int64_t shape[2] = {a.batch, a.seq};
    DLTensor in[2];
    memset(in, 0, sizeof in);
    for (int k = 0; k < 2; k++) {
        in[k].data = k ? (void*)tgt : (void*)ids;
        in[k].device.device_type = kDLCPU;
        in[k].ndim = 2;
        in[k].dtype.code = kDLInt;
        in[k].dtype.bits = 32;
        in[k].dtype.lanes = 1;
        in[k].shape = shape;
    }
    float loss = 0.0f, first_loss = NAN;
    int64_t loss_shape[1] = {1};
    DLTensor out;
    memset(&out, 0, sizeof out);
    out.data = &loss;
    out.device.device_type = kDLCPU;
    out.ndim = 1;
    out.dtype.code = kDLFloat;
    out.dtype.bits = 32;
    out.dtype.lanes = 1;
    out.shape = loss_shape;

    ds_step_info_t info;
    for (int s = 0; s < a.warmup + a.steps; s++) {
        for (int64_t i = 0; i < ntok; i++) {
            ids[i] = random_token(a.vocab);
            tgt[i] = random_token(a.vocab);
        }
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        sync_device();
        const double t0 = now_ms();
        check(ds_forward(engine, in, 2, &out), "ds_forward");
        sync_device();
        const double t1 = now_ms();
        if (a.phases) print_phase(engine, s, "forward", a.phases);
        const double t1b = now_ms();
        check(ds_backward(engine, NULL), "ds_backward");
        sync_device();
        const double t2 = now_ms();
        if (a.phases) print_phase(engine, s, "backward", a.phases);
        const double t2b = now_ms();
        check(ds_step(engine, &info), "ds_step");
        sync_device();
        const double t3 = now_ms();
        if (a.phases) print_phase(engine, s, "step", a.phases);
        if (s == 0) first_loss = loss;
        if (s >= a.warmup) {
            const int k = s - a.warmup;
            fwd[k] = t1 - t0;
            bwd[k] = t2 - t1b;
            opt[k] = t3 - t2b;
            tot[k] = (t1 - t0) + (t2 - t1b) + (t3 - t2b);
        }
    }
    const double med = median(tot, a.steps);
    const double tokens_per_s = ntok / (med * 1e-3);
    /* The engine's monitor's formula (monitor::gpt_flops_per_token): forward + backward per token. */
    const double flops_per_token = 6.0 * (double)nparams + 12.0 * a.layers * (double)a.seq * a.embd;
    const double tflops = tokens_per_s * flops_per_token / 1e12;
    double peak = a.peak_tflops;
    const char* peak_source = "--peak-tflops";
    if (peak <= 0.0 && on_cuda) {
        peak = strcmp(a.precision, "fp32") ? 989.0 : 67.0;
        peak_source = strcmp(a.precision, "fp32") ? "default: H100/H200 SXM dense bf16/fp16"
                                                  : "default: H100/H200 SXM fp32 without tensor cores";
    }
    char mfu[160] = "";
    if (peak > 0.0) {
        snprintf(mfu, sizeof mfu, " mfu=%.4f peak_tflops=%.0f", tflops / peak, peak);
        printf("MFU %.2f%% = %.2f TFLOP/s achieved (%.3g FLOPs per token = 6 N + 12 L T C) / %.0f TFLOP/s peak (%s)\n",
               100.0 * tflops / peak, tflops, flops_per_token, peak, peak_source);
    }
    printf("first loss %.4f (ln V = %.4f), last loss %.4f\n", first_loss, log((double)a.vocab), loss);
    printf("RESULT ours-%s%s tokens_per_s=%.1f step_ms=%.1f fwd_ms=%.1f bwd_ms=%.1f opt_ms=%.1f steps=%d loss=%.4f"
           " maxrss_mb=%.0f%s%s\n",
           a.precision, a.offload ? "-offload" : "", tokens_per_s, med, median(fwd, a.steps), median(bwd, a.steps),
           median(opt, a.steps), a.steps, loss, max_rss_mib(), on_cuda ? " device=cuda:0" : "", mfu);

    ds_memory_report_t r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    check(ds_engine_memory_report(engine, &r), "ds_engine_memory_report");
    const double mib = 1024.0 * 1024.0;
    const double act_formula = activation_budget_bytes(&a);
    const double act = meter_peak_bytes >= 0 ? (double)meter_peak_bytes : act_formula;
    /* One gradient: nparams fp32 values. The engine's report may count more (the model's own
     * parameter gradients beside the engine's accumulation buffer): printed, not budgeted. */
    const double one_grad = 4.0 * (double)nparams;
    const double budget = (double)(r.params_bytes + r.optimizer_state_bytes) + one_grad + act;
    const double peak_rss = max_rss_mib();
    printf("MEMORY engine report: params %.1f MiB, grads %.1f MiB, optimizer %.1f MiB, buffers %.1f MiB,"
           " peak_total %.1f MiB\n",
           r.params_bytes / mib, r.grads_bytes / mib, r.optimizer_state_bytes / mib, r.buffers_bytes / mib,
           r.peak_total_bytes / mib);
    printf("MEMORY activations kept: %.1f MiB by the model's meter%s; %.1f MiB by the minimal-set formula\n",
           meter_peak_bytes >= 0 ? meter_peak_bytes / mib : NAN,
           meter_peak_bytes >= 0 ? "" : " (not reported: the budget uses the formula)", act_formula / mib);
    printf("MEMORY budget = params %.1f + one fp32 gradient %.1f + optimizer state %.1f + activations kept %.1f"
           " = %.1f MiB (the report's grads: %.2f gradient copies)\n",
           r.params_bytes / mib, one_grad / mib, r.optimizer_state_bytes / mib, act / mib, budget / mib,
           r.grads_bytes / one_grad);
    printf("MEMORY peak RSS %.1f MiB (%.1f MiB before the engine existed: %.1f MiB above it) -> "
           "peak/budget %.3f, (peak - baseline)/budget %.3f\n",
           peak_rss, rss_before, peak_rss - rss_before, peak_rss * mib / budget,
           (peak_rss - rss_before) * mib / budget);
    printf("MEMORY peak RSS by the end of ds_engine_create_with_model %.1f MiB (%.3f of the budget)\n",
           rss_after_create, rss_after_create * mib / budget);
#ifdef DS_BENCH_HAVE_CUDA
    if (on_cuda) {
        /* The RSS lines above are host memory; on cuda the engine's report counts device buffers too. */
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
            printf("MEMORY gpu: %.1f MiB in use of %.1f MiB (cudaMemGetInfo, with the CUDA context and the block cache)\n",
                   (double)(total_b - free_b) / mib, (double)total_b / mib);
    }
#endif
    printf("RESULT ours-%s-memory budget_mb=%.1f peak_rss_mb=%.1f baseline_rss_mb=%.1f\n", a.precision,
           budget / mib, peak_rss, rss_before);

    ds_engine_destroy(engine);
    free(ids);
    free(tgt);
    free(fwd);
    free(bwd);
    free(opt);
    free(tot);
    return 0;
}
