/*
 * bench_nvme — ZeRO-Infinity optimizer state on NVMe at >= 3B parameters,
 * through the public C ABI only (issue 13 item 8).
 *
 *   bench_nvme [--params 3e9] [--tensor 5e7] [--sub-group 2.5e7] [--buffers 4]
 *              [--steps 3] [--dir ./nvme_bench] [--atomic 0|1] [--pipeline 0|1]
 *              [--overhead-mib M] [--no-limit]
 *
 * The model: --params parameters in tensors of --tensor elements, bf16 mixed
 * precision (bf16 working weights and gradients in memory, 2 + 2 bytes per
 * parameter), AdamW with the fp32 master and both moments in the NVMe swap
 * file (offload_optimizer "nvme", 12 bytes per parameter; one slot per
 * sub-group unless --atomic 1, which needs twice the disk). Gradients are a
 * deterministic fill fed through ds_engine_accumulate_grad.
 *
 * Before the engine exists the benchmark limits its data segment
 * (setrlimit RLIMIT_DATA: private writable memory) to what the run needs in
 * memory — registration copies (4 B/param) + working weights (2 B/param) +
 * swap buffers + its own buffers + 3 GiB — and prints it beside the
 * optimizer state's size (at 3e9: 23 GiB against 36 GB).
 *
 * It prints the CPU and ISA, the disk and file system, then per step: the
 * step time (ds_step), the bytes the process read and wrote (/proc/self/io),
 * the same number of bytes read and written sequentially with O_DIRECT in
 * the same directory with the same block size (aio.block_size, one request
 * at a time, as dd does) measured by the benchmark before the first and after
 * the last step, the ratio (target <= 1.25), and the peak RSS (VmHWM, reset
 * after init) against the budget: in-memory params + grads + swap buffers +
 * the benchmark's buffers (+ --overhead-mib, the model-independent overhead
 * measured at a small size: pass the OVERHEAD figure a small run prints).
 * Progress (sub-groups written) is printed every 5 s during a step.
 * The swap directory and the calibration file are removed at the end; a run
 * that would leave less than 5 GB free on the disk is refused before it starts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "bench_machine.h"
#include "deepspeed_c.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)
#define BLOCK_SIZE 1048576 /* DeepSpeed's aio.block_size default */
#define CALIB_FILE_MAX (4LL << 30)

typedef struct {
    double params, tensor, sub_group, overhead_mib;
    int buffers, steps, atomic, pipeline, limit;
    const char* dir;
} args_t;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char* what) {
    fprintf(stderr, "bench_nvme: %s: %s\n", what, ds_last_error());
    exit(1);
}

static void check(ds_status_t s, const char* what) {
    if (s != DS_OK) die(what);
}

/* A /proc/self/<file> field ("name:" or "name: value"), -1 if absent. */
static long long proc_field(const char* file, const char* name) {
    char path[64], line[256];
    long long v = -1;
    size_t n = strlen(name);
    FILE* f;
    snprintf(path, sizeof path, "/proc/self/%s", file);
    f = fopen(path, "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, name, n) == 0) {
            v = strtoll(line + n, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}
static long long rss_bytes(void) { return proc_field("status", "VmRSS:") * 1024; }
static long long hwm_bytes(void) { return proc_field("status", "VmHWM:") * 1024; }
static long long io_read(void) { return proc_field("io", "read_bytes:"); }
static long long io_written(void) { return proc_field("io", "write_bytes:"); }
static int reset_hwm(void) {
    FILE* f = fopen("/proc/self/clear_refs", "w");
    int ok;
    if (!f) return 0;
    ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static void print_machine(const char* dir) {
    bench_print_cpu();
    /* The mount holding `dir`: the longest mount point that prefixes its real path. */
    {
        char real[PATH_MAX], best_dev[256] = "?", best_fs[64] = "?", best_mnt[PATH_MAX] = "";
        FILE* m = fopen("/proc/mounts", "r");
        if (realpath(dir, real) && m) {
            char dev[256], mnt[PATH_MAX], fs[64];
            while (fscanf(m, "%255s %4095s %63s %*[^\n]", dev, mnt, fs) == 3) {
                size_t n = strlen(mnt);
                if (!strncmp(real, mnt, n) && (real[n] == '/' || real[n] == 0 || n == 1) && n >= strlen(best_mnt)) {
                    snprintf(best_dev, sizeof best_dev, "%s", dev);
                    snprintf(best_fs, sizeof best_fs, "%s", fs);
                    snprintf(best_mnt, sizeof best_mnt, "%s", mnt);
                }
            }
        }
        if (m) fclose(m);
        printf("disk: %s (%s, mounted on %s) for %s\n", best_dev, best_fs, best_mnt, dir);
    }
}

/* Sequential O_DIRECT write then read of `bytes` in BLOCK_SIZE requests,
 * cycling through one file of at most CALIB_FILE_MAX in `dir`, with
 * `depth` requests in flight: depth 1 is what dd with the engine's
 * aio.block_size does; depth 8 (8 threads taking consecutive blocks) is the
 * engine's aio.queue_depth. */
typedef struct {
    int fd, write, k, depth;
    long long bytes, file;
    int failed;
} calib_job_t;

static void* calib_worker(void* arg) {
    calib_job_t* j = arg;
    void* buf = NULL;
    long long done;
    if (posix_memalign(&buf, 4096, BLOCK_SIZE) != 0) {
        j->failed = ENOMEM;
        return NULL;
    }
    memset(buf, 0x5a, BLOCK_SIZE);
    for (done = (long long)j->k * BLOCK_SIZE; done < j->bytes && !j->failed; done += (long long)j->depth * BLOCK_SIZE) {
        const ssize_t n = j->write ? pwrite(j->fd, buf, BLOCK_SIZE, done % j->file)
                                   : pread(j->fd, buf, BLOCK_SIZE, done % j->file);
        if (n != BLOCK_SIZE) j->failed = n < 0 ? errno : EIO;
    }
    free(buf);
    return NULL;
}

static void calibrate(const char* dir, long long bytes, int depth, double* write_s, double* read_s) {
    char path[PATH_MAX];
    long long file = bytes < CALIB_FILE_MAX ? bytes : CALIB_FILE_MAX;
    calib_job_t jobs[8];
    pthread_t th[8];
    int fd, pass, k;
    file = (file + BLOCK_SIZE - 1) / BLOCK_SIZE * BLOCK_SIZE;
    snprintf(path, sizeof path, "%s/calibration.bin", dir);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
    if (fd < 0) {
        fprintf(stderr, "bench_nvme: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    for (pass = 0; pass < 2; ++pass) {
        const double t = now_s();
        for (k = 0; k < depth; ++k) {
            jobs[k].fd = fd;
            jobs[k].write = pass == 0;
            jobs[k].k = k;
            jobs[k].depth = depth;
            jobs[k].bytes = bytes;
            jobs[k].file = file;
            jobs[k].failed = 0;
            pthread_create(&th[k], NULL, calib_worker, &jobs[k]);
        }
        for (k = 0; k < depth; ++k) pthread_join(th[k], NULL);
        if (pass == 0 && fdatasync(fd) != 0) fprintf(stderr, "bench_nvme: fdatasync: %s\n", strerror(errno));
        for (k = 0; k < depth; ++k)
            if (jobs[k].failed) {
                fprintf(stderr, "bench_nvme: %s %s: %s\n", pass == 0 ? "write" : "read", path, strerror(jobs[k].failed));
                unlink(path);
                exit(1);
            }
        *(pass == 0 ? write_s : read_s) = now_s() - t;
    }
    close(fd);
    unlink(path);
}

/* Progress during ds_step: sub-groups written so far, every 5 s. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    long long written0, record;
    int groups;
    double t0;
} progress_t;

static void* progress_main(void* arg) {
    progress_t* p = arg;
    struct timespec until;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        pthread_cond_timedwait(&p->cv, &p->mu, &until);
        if (p->stop) break;
        printf("  ... %.0f s: %lld of %d sub-groups written\n", now_s() - p->t0,
               (io_written() - p->written0) / (p->record > 0 ? p->record : 1), p->groups);
        fflush(stdout);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static double parse_num(const char* s, const char* flag) {
    char* end;
    double v = strtod(s, &end);
    if (end == s || *end) {
        fprintf(stderr, "bench_nvme: %s: not a number: %s\n", flag, s);
        exit(2);
    }
    return v;
}

static args_t parse(int argc, char** argv) {
    args_t a = {3e9, 5e7, 2.5e7, -1.0, 4, 3, 0, 1, 1, "./nvme_bench"};
    int i;
    for (i = 1; i < argc; ++i) {
        const char* f = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--no-limit")) {
            a.limit = 0;
            continue;
        }
        if (!v) {
            fprintf(stderr, "bench_nvme: %s needs a value (see the comment at the top of bench/bench_nvme.c)\n", f);
            exit(2);
        }
        ++i;
        if (!strcmp(f, "--params")) a.params = parse_num(v, f);
        else if (!strcmp(f, "--tensor")) a.tensor = parse_num(v, f);
        else if (!strcmp(f, "--sub-group")) a.sub_group = parse_num(v, f);
        else if (!strcmp(f, "--buffers")) a.buffers = (int)parse_num(v, f);
        else if (!strcmp(f, "--steps")) a.steps = (int)parse_num(v, f);
        else if (!strcmp(f, "--atomic")) a.atomic = (int)parse_num(v, f);
        else if (!strcmp(f, "--pipeline")) a.pipeline = (int)parse_num(v, f);
        else if (!strcmp(f, "--overhead-mib")) a.overhead_mib = parse_num(v, f);
        else if (!strcmp(f, "--dir")) a.dir = v;
        else {
            fprintf(stderr, "bench_nvme: unknown flag %s\n", f);
            exit(2);
        }
    }
    if (a.params < 1 || a.tensor < 1 || a.sub_group < 1024 || a.buffers < 1 || a.steps < 1 || a.steps > 64) {
        fprintf(stderr, "bench_nvme: --params, --tensor, --buffers must be >= 1, --steps in [1, 64], --sub-group >= 1024\n");
        exit(2);
    }
    return a;
}

static uint16_t bf16_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

int main(int argc, char** argv) {
    const args_t a = parse(argc, argv);
    const long long P = (long long)a.params, T = (long long)a.tensor < P ? (long long)a.tensor : P;
    const long long ntensors = (P + T - 1) / T, sub = (long long)a.sub_group;
    const long long groups = (P + sub - 1) / sub;
    const long long record = ((sub * 4 + 4095) / 4096 * 4096) * 3; /* master + 2 moments, 4 KiB aligned */
    const long long disk_need = groups * record * (a.atomic ? 2 : 1);
    const long long calib = disk_need < CALIB_FILE_MAX ? disk_need : CALIB_FILE_MAX;
    const long long own = T * 4 + T * 2; /* init buffer (fp32) + gradient buffer (bf16) */
    const long long buffers = record * a.buffers;
    char json[2048], name[32];
    float* init;
    uint16_t* grad;
    ds_engine_t* e = NULL;
    struct statvfs vfs;
    long long i, j, free_bytes;
    double t, w_s = 0, r_s = 0, w2 = 0, r2 = 0, wb_s = 0, rb_s = 0, disk_s = 0;
    int created_dir = 0, s;
    double step_s[64];
    ds_memory_report_t mem, disk;

    if (mkdir(a.dir, 0700) == 0) created_dir = 1;
    else if (errno != EEXIST) {
        fprintf(stderr, "bench_nvme: --dir %s: %s\n", a.dir, strerror(errno));
        return 1;
    }
    print_machine(a.dir);
    if (statvfs(a.dir, &vfs) != 0) {
        fprintf(stderr, "bench_nvme: statvfs %s: %s\n", a.dir, strerror(errno));
        return 1;
    }
    free_bytes = (long long)vfs.f_bavail * (long long)vfs.f_frsize;
    printf("model: %lld parameters in %lld tensors of <= %lld, bf16 working weights + grads in memory (%.2f GiB), "
           "AdamW fp32 master + moments on disk: %.2f GiB (%s, %lld sub-groups of %lld, %.0f MiB records)\n",
           P, ntensors, T, (double)P * 4 / GIB, (double)disk_need / GIB, a.atomic ? "two slots" : "one slot", groups,
           sub, (double)record / MIB);
    printf("disk: %.1f GiB free; this run needs %.1f GiB (swap file + %.1f GiB calibration file) and leaves >= 5 GB\n",
           (double)free_bytes / GIB, (double)(disk_need + calib) / GIB, (double)calib / GIB);
    if (disk_need + calib + 5000000000LL > free_bytes) {
        fprintf(stderr, "bench_nvme: refused: %.1f GiB free in %s, the run needs %.1f GiB and must leave 5 GB "
                "(smaller --params, or --atomic 0)\n", (double)free_bytes / GIB, a.dir,
                (double)(disk_need + calib) / GIB);
        if (created_dir) rmdir(a.dir);
        return 1;
    }
    if (a.limit) {
        const long long limit = P * 4 + P * 2 + buffers + own + (3LL << 30);
        struct rlimit rl;
        rl.rlim_cur = rl.rlim_max = (rlim_t)limit;
        if (setrlimit(RLIMIT_DATA, &rl) != 0) {
            fprintf(stderr, "bench_nvme: setrlimit(RLIMIT_DATA): %s\n", strerror(errno));
            return 1;
        }
        printf("memory limit: setrlimit(RLIMIT_DATA) = %.2f GiB (registration copies 4 B/param + working 2 B/param "
               "+ swap buffers + own buffers + 3 GiB), %s the optimizer state's %.2f GiB\n", (double)limit / GIB,
               limit < P * 12 ? "below" : "NOT below (too small a model for the limit to bind)", (double)P * 12 / GIB);
    }

    snprintf(json, sizeof json,
             "{\"train_micro_batch_size_per_gpu\": 1, \"bf16\": {\"enabled\": true},"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-4, \"weight_decay\": 0.01}},"
             " \"zero_optimization\": {\"stage\": 2, \"sub_group_size\": %lld,"
             "  \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\", \"buffer_count\": %d,"
             "   \"pipeline_read\": %s, \"pipeline_write\": %s, \"dsc_atomic_step\": %s}},"
             " \"aio\": {\"block_size\": %d, \"queue_depth\": 8, \"intra_op_parallelism\": 1,"
             "  \"single_submit\": false, \"overlap_events\": true}}",
             sub, a.dir, a.buffers, a.pipeline ? "true" : "false", a.pipeline ? "true" : "false",
             a.atomic ? "true" : "false", BLOCK_SIZE);
    printf("config: %s\n", json);
    check(ds_engine_create(json, NULL, &e), "ds_engine_create");

    init = malloc((size_t)T * 4);
    grad = malloc((size_t)T * 2);
    if (!init || !grad) {
        fprintf(stderr, "bench_nvme: out of memory for %lld-element buffers\n", T);
        return 1;
    }
    t = now_s();
    for (i = 0; i < ntensors; ++i) {
        const long long n = i + 1 < ntensors ? T : P - T * i;
        int64_t shape[1];
        DLTensor d;
        for (j = 0; j < n; ++j) init[j] = 0.02f * (float)((int)((j * 2654435761u + (unsigned)i) >> 20 & 1023) - 512) / 512.0f;
        shape[0] = n;
        memset(&d, 0, sizeof d);
        d.data = init;
        d.device.device_type = kDLCPU;
        d.ndim = 1;
        d.dtype.code = kDLFloat;
        d.dtype.bits = 32;
        d.dtype.lanes = 1;
        d.shape = shape;
        snprintf(name, sizeof name, "layer%lld.weight", i);
        check(ds_engine_add_param(e, name, &d, DS_PARAM_TRAINABLE), "ds_engine_add_param");
    }
    printf("registered in %.1f s, RSS %.2f GiB\n", now_s() - t, (double)rss_bytes() / GIB);
    free(init);
    t = now_s();
    check(ds_engine_init(e), "ds_engine_init");
    mem.struct_size = disk.struct_size = sizeof mem;
    check(ds_engine_memory_report(e, &mem), "ds_engine_memory_report");
    check(ds_engine_disk_report(e, &disk), "ds_engine_disk_report");
    printf("init (swap file written) in %.1f s; peak RSS so far %.2f GiB; engine: params %.2f GiB, grads %.2f GiB, "
           "swap buffers %.2f GiB; on disk %.2f GiB\n", now_s() - t, (double)hwm_bytes() / GIB,
           (double)mem.params_bytes / GIB, (double)mem.grads_bytes / GIB, (double)mem.optimizer_state_bytes / GIB,
           (double)disk.total_bytes / GIB);
    fflush(stdout);

    calibrate(a.dir, disk.total_bytes, 1, &w_s, &r_s);
    printf("disk alone (before the steps): %.2f GiB written in %.1f s (%.0f MB/s), read in %.1f s (%.0f MB/s), "
           "O_DIRECT, %d-byte requests\n", (double)disk.total_bytes / GIB, w_s, disk.total_bytes / w_s / 1e6, r_s,
           disk.total_bytes / r_s / 1e6, BLOCK_SIZE);
    fflush(stdout);
    calibrate(a.dir, disk.total_bytes, 8, &wb_s, &rb_s);
    printf("disk alone, 8 requests in flight: written in %.1f s (%.0f MB/s), read in %.1f s (%.0f MB/s)\n", wb_s, disk.total_bytes / wb_s / 1e6, rb_s, disk.total_bytes / rb_s / 1e6);
    fflush(stdout);
    if (!reset_hwm()) printf("(VmHWM cannot be reset here: the step peak includes init)\n");

    for (s = 0; s < a.steps; ++s) {
        progress_t prog;
        pthread_t th;
        long long r0, w0, rb, wb, hwm;
        double fed, st;
        ds_step_info_t info;
        int64_t shape[1];
        DLTensor d;
        for (j = 0; j < T; ++j) grad[j] = bf16_bits(1e-3f * (float)((int)((j * 40503u + (unsigned)s * 7919u) >> 8 & 255) - 128) / 128.0f);
        t = now_s();
        for (i = 0; i < ntensors; ++i) {
            shape[0] = i + 1 < ntensors ? T : P - T * i;
            memset(&d, 0, sizeof d);
            d.data = grad;
            d.device.device_type = kDLCPU;
            d.ndim = 1;
            d.dtype.code = kDLBfloat;
            d.dtype.bits = 16;
            d.dtype.lanes = 1;
            d.shape = shape;
            snprintf(name, sizeof name, "layer%lld.weight", i);
            check(ds_engine_accumulate_grad(e, name, &d), "ds_engine_accumulate_grad");
        }
        check(ds_backward(e, NULL), "ds_backward");
        fed = now_s() - t;
        pthread_mutex_init(&prog.mu, NULL);
        pthread_cond_init(&prog.cv, NULL);
        prog.stop = 0;
        prog.groups = (int)groups;
        prog.record = disk.total_bytes / (groups > 0 ? groups : 1);
        r0 = io_read();
        w0 = prog.written0 = io_written();
        prog.t0 = t = now_s();
        pthread_create(&th, NULL, progress_main, &prog);
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        check(ds_step(e, &info), "ds_step");
        st = step_s[s] = now_s() - t;
        pthread_mutex_lock(&prog.mu);
        prog.stop = 1;
        pthread_cond_signal(&prog.cv);
        pthread_mutex_unlock(&prog.mu);
        pthread_join(th, NULL);
        rb = io_read() - r0;
        wb = io_written() - w0;
        hwm = hwm_bytes();
        printf("step %d: %.1f s (grads fed in %.1f s before it); read %.2f GiB, wrote %.2f GiB; peak RSS %.2f GiB\n",
               s + 1, st, fed, (double)rb / GIB, (double)wb / GIB, (double)hwm / GIB);
        printf("STEP %d step_s=%.2f read_bytes=%lld write_bytes=%lld disk_s_before=%.2f ratio_before=%.3f hwm_bytes=%lld\n",
               s + 1, st, rb, wb, w_s + r_s, st / (w_s + r_s), hwm);
        fflush(stdout);
    }
    calibrate(a.dir, disk.total_bytes, 1, &w2, &r2);
    disk_s = 0.5 * (w_s + r_s + w2 + r2);
    printf("disk alone (after the steps): written in %.1f s (%.0f MB/s), read in %.1f s (%.0f MB/s)\n", w2,
           disk.total_bytes / w2 / 1e6, r2, disk.total_bytes / r2 / 1e6);
    for (s = 0; s < a.steps; ++s)
        printf("RATIO step %d: %.1f s / %.1f s disk (mean of before and after) = %.2f (target <= 1.25: %s)\n", s + 1,
               step_s[s], disk_s, step_s[s] / disk_s, step_s[s] / disk_s <= 1.25 ? "met" : "NOT met");
    for (s = 0; s < a.steps; ++s)
        printf("RATIO_QD8 step %d: %.1f s / %.1f s disk with 8 requests in flight = %.2f\n", s + 1, step_s[s],
               wb_s + rb_s, step_s[s] / (wb_s + rb_s));
    {
        const long long hwm = hwm_bytes();
        const long long inmem = mem.params_bytes + mem.grads_bytes;
        const long long overhead = hwm - inmem - mem.optimizer_state_bytes - T * 2;
        printf("RESULT params=%lld disk_bytes=%lld disk_s=%.2f (mean of before/after: write %.1f+%.1f, read %.1f+%.1f)"
               " peak_rss=%.2fGiB params+grads=%.2fGiB swap_buffers=%.2fGiB own=%.2fGiB\n",
               P, (long long)disk.total_bytes, disk_s, w_s, w2, r_s, r2, (double)hwm / GIB, (double)inmem / GIB,
               (double)mem.optimizer_state_bytes / GIB, (double)(T * 2) / GIB);
        printf("OVERHEAD %.0f MiB (peak RSS during the steps - params - grads - swap buffers - own gradient buffer)\n",
               (double)overhead / MIB);
        if (a.overhead_mib >= 0) {
            const double budget = (double)(inmem + mem.optimizer_state_bytes + T * 2) + a.overhead_mib * MIB;
            printf("BUDGET peak RSS %.2f GiB vs budget %.2f GiB (params+grads+buffers+own+%.0f MiB overhead): %s\n",
                   (double)hwm / GIB, budget / GIB, a.overhead_mib, (double)hwm <= budget ? "met" : "NOT met");
        }
    }
    ds_engine_destroy(e); /* removes the swap directory */
    free(grad);
    {
        char root[PATH_MAX];
        snprintf(root, sizeof root, "%s/ds_swap", a.dir);
        rmdir(root); /* the engines' common swap root, when nothing else is in it */
    }
    if (created_dir && rmdir(a.dir) != 0) fprintf(stderr, "bench_nvme: rmdir %s: %s\n", a.dir, strerror(errno));
    printf("ratio per step = step_s / disk_s; target <= 1.25\n");
    return 0;
}
