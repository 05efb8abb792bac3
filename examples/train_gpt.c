/*
 * train_gpt.c — the main job: train a small GPT through deepspeed_c's
 * built-in model ABI (loss = engine(batch); engine.backward(loss);
 * engine.step()) and show that it learned.
 *
 * By default it trains on a task it generates itself: 3-digit addition
 * written as text with the answer's digits reversed ("123+459=2850", see
 * gpt_task.h), the loss on the answer digits only (targets -100 elsewhere).
 * It prints the engine's progress lines, saves a checkpoint, measures the
 * exact-match accuracy of greedy decoding on held-out problems (never drawn
 * in training) and writes the loss curve of the CSV monitor as a PNG:
 *
 *   tools/ds-run -n 2 -- build/examples/train_gpt        (scripts/quickstart.sh)
 *   ...
 *   held-out exact match: 0.998 (998/1000)
 *   loss curve: gpt_run/loss.png
 *
 * With --text FILE it trains a character GPT on the file instead, reports
 * the loss on its held-out last tenth and samples a line.
 *
 * Data parallel: every rank draws its own micro-batches (a pure function of
 * --seed, the rank and the engine's micro-step counter, so a resumed run
 * draws what the uninterrupted one would have). The model's initial weights
 * come from the same seed on every rank. The config (ZeRO-2, AdamW,
 * WarmupCosineLR, clipping, steps_per_print, csv_monitor) is embedded below
 * and can be replaced with --config FILE.
 *
 * Pipeline (--pipe N): the model is cut into N stages (docs/PIPELINE.md
 * section 5), world = N stages x W/N data-parallel replicas, ZeRO-1; each
 * step, replica d's --batch rows (what data-parallel rank d would draw) go
 * through ds_train_batch as --micro-batches micro-batches (1F1B). A stage
 * takes no ds_forward, so after training rank 0 loads the run's last
 * checkpoint (which holds the whole model) into a plain engine of its own
 * (gpt_whole.h) and runs the same evaluation; the held-out loss is also
 * measured through the pipeline (ds_eval_batch). With --tp N the stages'
 * transformer layers are split over N ranks too (world = stages x replicas
 * x tp, DeepSpeed's pipe x data x model topology).
 * Checkpoints hold the whole (logical) model (docs/CHECKPOINTS.md), so
 * --resume works across layouts: a --pipe 2 run's checkpoint continues in a
 * data-parallel run, or at another --pipe, --tp or --ep-size:
 *
 *   tools/ds-run -n 4 -- build/examples/train_gpt --pipe 2
 *                                         (scripts/quickstart.sh --ranks 4 --pipe 2)
 *   tools/ds-run -n 2 -- build/examples/train_gpt --resume gpt_run/checkpoints --steps 2000
 *
 * Tensor parallel (--tp N, docs/PIPELINE.md section 6): the config gets
 * "tensor_parallel": {"autotp_size": N}; N consecutive ranks share every
 * transformer layer (rank = replica * N + tp rank) and all of them call
 * ds_forward/ds_backward/ds_step with the same batch: their replica's stream
 * (what data-parallel rank `replica` would draw). The engine runs ZeRO 0-2
 * over the replicas; the evaluation runs on every rank with the same problems
 * (the decoded tokens agreed on, see agree_tokens). Checkpoints consolidate
 * the shards into the whole model. With --pipe, see above:
 *
 *   tools/ds-run -n 2 -- build/examples/train_gpt --tp 2
 *                                         (scripts/quickstart.sh --ranks 2 --tp 2)
 *
 * Mixture of Experts (--moe-experts N, docs/MODELS.md "Mixture of Experts"):
 * the spec gets "moe": {"num_experts": N, "every": 2}, so the MLP of every
 * 2nd transformer layer is an MoE layer (top-1, DeepSpeed's defaults).
 * --ep-size P shards each MoE layer's experts over P consecutive
 * data-parallel replicas (docs/PIPELINE.md section 7): every replica still
 * trains its own batches, as in data parallelism, and every rank evaluates
 * the same problems (the tokens routed to another rank's experts make those
 * forwards collective). ZeRO 0 or 1 (1 by default) with P > 1; a checkpoint
 * holds every expert by its global name, so another --ep-size resumes it.
 * With --pipe the MoE layers sit in their stages (ranks = stages x
 * replicas, P dividing the replicas; the gathered whole model on rank 0 gets
 * every expert rank's experts); with --tp each MoE layer is whole on every
 * rank of a tensor-parallel group (ranks = replicas x tp, P dividing the
 * replicas):
 *
 *   tools/ds-run -n 2 -- build/examples/train_gpt --moe-experts 4 --ep-size 2
 *                                         (scripts/quickstart.sh --ranks 2 --moe-experts 4 --ep-size 2)
 *   tools/ds-run -n 4 -- build/examples/train_gpt --pipe 2 --moe-experts 4 --ep-size 2
 *
 * Exit status: 0 done; 1 a library call failed (the message names it);
 * 2 a bad option or input (the message says which).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "deepspeed_c.h"
#include "gpt_options.h"
#include "gpt_whole.h"
#include "gpt_task.h"
#include "png_plot.h"

/* The embedded default config: DeepSpeed JSON, as a user would write it.
 * The recipe (with gpt_options.c's defaults: lr 3e-3, 8 heads) is chosen to
 * learn on every seed: with lr 1e-2, 4 heads and weight decay 0.01 the loss
 * spiked as warmup reached the peak lr and runs often stalled with one answer
 * digit unlearned (loss ln(10)/4 = 0.576 for good), so whether a seed passed
 * hung on the last bits of the attention kernel's rounding
 * (docs/PERFORMANCE.md, "The main job across seeds and attention kernels"). */
static const char* kConfigTemplate =
    "{\n"
    "  \"train_micro_batch_size_per_gpu\": %d,\n"
    "  \"gradient_accumulation_steps\": %d,\n"
    "  \"steps_per_print\": %d,\n"
    "  \"gradient_clipping\": 1.0,\n"
    "  \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": %.9g, \"betas\": [0.9, 0.999], \"eps\": 1e-8,"
    " \"weight_decay\": 0.1}},\n"
    "  \"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {\"total_num_steps\": %d, \"warmup_num_steps\": %d,"
    " \"warmup_type\": \"linear\", \"cos_min_ratio\": 0.1}},\n"
    "  \"fp16\": {\"enabled\": %s, \"initial_scale_power\": 12},\n"
    "  \"bf16\": {\"enabled\": %s},\n"
    "  \"zero_optimization\": {\"stage\": %d%s},\n"
    "%s"
    "  \"csv_monitor\": {\"enabled\": true, \"output_path\": \"%s\", \"job_name\": \"train_gpt\"}\n"
    "}\n";

/* What a failure needs to end every rank cleanly. */
static ds_comm_t* g_comm = NULL;
static int g_world = 1;

static void fail(int code, const char* what) {
    fprintf(stderr, "train_gpt: %s\n", what);
    fflush(stdout);
    /* the other ranks may be waiting in a collective: break it, so they fail too */
    if (g_comm && g_world > 1) ds_comm_abort(g_comm, what);
    exit(code);
}

static void check(ds_status_t s, const char* call) {
    char msg[4096];
    if (s == DS_OK) return;
    snprintf(msg, sizeof msg, "%s failed: %s\n  %s", call, ds_status_string(s), ds_last_error());
    fail(1, msg);
}
#define DS_TRY(call) check((call), #call)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Engine log lines (the steps_per_print progress among them) on stdout, rank 0. */
static void log_to_stdout(int32_t level, const char* message, void* user_data) {
    const int* rank = (const int*)user_data;
    if (*rank != 0 && level > DS_LOG_WARN) return;
    if (level <= DS_LOG_WARN) fprintf(stderr, "[rank %d] %s\n", *rank, message);
    else printf("%s\n", message);
    fflush(stdout);
}

static DLTensor tensor_i32(int32_t* data, int64_t* shape, int64_t rows, int64_t cols) {
    DLTensor t;
    memset(&t, 0, sizeof t);
    shape[0] = rows;
    shape[1] = cols;
    t.data = data;
    t.device.device_type = kDLCPU;
    t.ndim = 2;
    t.dtype.code = kDLInt;
    t.dtype.bits = 32;
    t.dtype.lanes = 1;
    t.shape = shape;
    return t;
}

static DLTensor tensor_f32(float* data, int64_t* shape, int ndim) {
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

/* ---- the data: the addition task or a user's text ---- */

typedef struct {
    int is_text;
    gpt_addition_t add;
    gpt_text_t text;
    unsigned char* text_bytes;
    const gpt_vocab_t* vocab;
    int T; /* tokens per sequence the model sees */
    char identity[256]; /* saved in the checkpoint: a resume must train the same task */
} task_t;

static void load_task(const gpt_options_t* o, task_t* t) {
    char msg[1024];
    memset(t, 0, sizeof *t);
    if (!o->text) {
        gpt_addition_init(&t->add, o->digits, 1);
        t->vocab = &t->add.vocab;
        t->T = t->add.seq_len - 1;
        snprintf(t->identity, sizeof t->identity, "addition digits=%d reversed", o->digits);
        return;
    }
    {
        FILE* f = fopen(o->text, "rb");
        long n;
        uint32_t h = 2166136261u;
        if (!f) {
            snprintf(msg, sizeof msg, "--text: cannot open '%s': %s", o->text, strerror(errno));
            fail(2, msg);
        }
        if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
            fclose(f);
            snprintf(msg, sizeof msg, "--text: '%s' is not a regular file", o->text);
            fail(2, msg);
        }
        if (n > (64L << 20)) {
            fclose(f);
            snprintf(msg, sizeof msg, "--text: '%s' is %ld bytes; at most 64 MiB", o->text, n);
            fail(2, msg);
        }
        t->text_bytes = (unsigned char*)malloc((size_t)n + 1);
        if (!t->text_bytes || fread(t->text_bytes, 1, (size_t)n, f) != (size_t)n) {
            fclose(f);
            snprintf(msg, sizeof msg, "--text: cannot read '%s'", o->text);
            fail(2, msg);
        }
        fclose(f);
        if (gpt_text_init(&t->text, t->text_bytes, (size_t)n, o->block_size) != 0) {
            snprintf(msg, sizeof msg,
                     "--text: '%s' has %ld bytes; with --block-size %d it needs at least %d (a training and a "
                     "held-out part of block size + 1 bytes each)",
                     o->text, n, o->block_size, 2 * (o->block_size + 1));
            fail(2, msg);
        }
        for (long i = 0; i < n; ++i) h = (h ^ t->text_bytes[i]) * 16777619u; /* FNV-1a of the text */
        t->is_text = 1;
        t->vocab = &t->text.vocab;
        t->T = o->block_size;
        snprintf(t->identity, sizeof t->identity, "text bytes=%ld fnv1a=%08x vocab=%d block=%d", n, (unsigned)h,
                 t->vocab->size, o->block_size);
    }
}

/* ---- config ---- */

/* s as the body of a JSON string (quotes, backslashes and control bytes escaped). */
static void json_escape(const char* s, char* out, size_t n) {
    size_t k = 0;
    for (; *s && k + 7 < n; ++s) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { out[k++] = '\\'; out[k++] = (char)c; }
        else if (c < 0x20) k += (size_t)snprintf(out + k, n - k, "\\u%04x", c);
        else out[k++] = (char)c;
    }
    out[k] = '\0';
}

static void make_config(const gpt_options_t* o, char* config, size_t n) {
    char monitor_dir[2048], escaped[4200], sections[256] = "";
    int print_every = o->steps >= 1000 ? 100 : (o->steps >= 10 ? o->steps / 10 : 1);
    int warmup = o->steps / 20 < 1 ? 1 : (o->steps / 20 > 100 ? 100 : o->steps / 20);
    int gas = o->pipe > 1 ? o->micro_batches : 1; /* --pipe: --batch rows per replica, cut into micro-batches */
    if (o->tp > 1) snprintf(sections, sizeof sections, "  \"tensor_parallel\": {\"autotp_size\": %d},\n", o->tp);
    /* expert parallelism is built for fp32 gradient buffers; 16-bit training
     * accumulates in bf16/fp16 unless data_types says otherwise */
    if (o->ep_size > 1 && strcmp(o->dtype, "fp32") != 0)
        snprintf(sections + strlen(sections), sizeof sections - strlen(sections),
                 "  \"data_types\": {\"grad_accum_dtype\": \"fp32\"},\n");
    snprintf(monitor_dir, sizeof monitor_dir, "%s/monitor", o->out);
    json_escape(monitor_dir, escaped, sizeof escaped);
    snprintf(config, n, kConfigTemplate, o->batch / gas, gas, print_every, o->lr, o->steps, warmup,
             strcmp(o->dtype, "fp16") ? "false" : "true", strcmp(o->dtype, "bf16") ? "false" : "true", o->zero,
             o->zero == 3 ? ", \"stage3_param_persistence_threshold\": 0" : "", sections, escaped);
}

/* In the object whose body starts at p (just after its '{'), the value of
 * its member `key` (not of a nested object's): a pointer to the value's first
 * byte, or NULL. Strings are skipped whole, so braces inside them do not count. */
static const char* member(const char* p, const char* key) {
    size_t klen = strlen(key);
    int depth = 1;
    for (; *p && depth > 0; ++p) {
        if (*p == '"') {
            const char* start = ++p;
            while (*p && *p != '"') p += (*p == '\\' && p[1]) ? 2 : 1;
            if (!*p) return NULL;
            if (depth == 1 && (size_t)(p - start) == klen && !strncmp(start, key, klen)) {
                const char* v = p + 1;
                while (*v == ' ' || *v == '\n' || *v == '\r' || *v == '\t') ++v;
                if (*v == ':') {
                    ++v;
                    while (*v == ' ' || *v == '\n' || *v == '\r' || *v == '\t') ++v;
                    return v;
                }
            }
        } else if (*p == '{' || *p == '[') {
            ++depth;
        } else if (*p == '}' || *p == ']') {
            --depth;
        }
    }
    return NULL;
}

/* The scalar value of `key` in the top-level object `section` of the
 * engine's resolved config (section NULL: a top-level key), as text (a
 * string's body without quotes; escapes are not decoded: the values read
 * here are numbers, booleans and the monitor's paths). Returns 0 when found. */
static int config_value(const char* json, const char* section, const char* key, char* out, size_t n) {
    const char* p = strchr(json, '{');
    size_t len = 0;
    if (!p) return -1;
    if (section) {
        p = member(p + 1, section);
        if (!p || *p != '{') return -1;
    }
    p = member(p + 1, key);
    if (!p) return -1;
    if (*p == '"') {
        ++p;
        while (p[len] && p[len] != '"') len += (p[len] == '\\' && p[len + 1]) ? 2 : 1;
    } else {
        while (p[len] && p[len] != ',' && p[len] != '}' && p[len] != ']' && p[len] != '\n' && p[len] != ' ') ++len;
    }
    if (len >= n) return -1;
    memcpy(out, p, len);
    out[len] = '\0';
    return 0;
}

/* ---- evaluation ---- */

/* The largest index of row r of logits [rows, T, V] at position pos. */
static int32_t argmax_at(const float* logits, int r, int pos, int T, int V) {
    const float* l = logits + ((size_t)r * (size_t)T + (size_t)pos) * (size_t)V;
    int32_t best = 0;
    int k;
    for (k = 1; k < V; ++k)
        if (l[k] > l[best]) best = k;
    return best;
}

/* --tp (and --ep-size, whose all-to-alls make every forward collective): the
 * ranks of a group must feed their shared layers the same inputs.
 * The next tokens come from the logits, which the layers' all-reduces make
 * equal on every rank, but a difference in the last bit could flip an argmax
 * or a sampled token (and end a text sample at another length, leaving a rank
 * alone in a collective): every rank takes world rank 0's tokens. */
static void agree_tokens(const gpt_options_t* o, int32_t* tokens, int n) {
    int64_t shape[1];
    DLTensor t;
    /* --pipe: the whole model evaluates on rank 0 alone (gpt_whole.h) */
    if ((o->tp == 1 && o->ep_size == 1) || o->pipe > 1) return;
    shape[0] = n;
    memset(&t, 0, sizeof t);
    t.data = tokens;
    t.device.device_type = kDLCPU;
    t.ndim = 1;
    t.dtype.code = kDLInt;
    t.dtype.bits = 32;
    t.dtype.lanes = 1;
    t.shape = shape;
    DS_TRY(ds_comm_broadcast(g_comm, &t, 0));
}

/* Exact match of greedy decoding on held-out problems. The model sees the
 * whole sequence length every time (the answer positions not yet generated
 * hold '0'): causal attention keeps the prompt's logits independent of them. */
static void eval_addition(ds_engine_t* e, const task_t* t, const gpt_options_t* o, int rank) {
    const gpt_addition_t* A = &t->add;
    const int T = t->T, V = t->vocab->size, chunk = 200;
    uint64_t* pairs;
    int32_t* inputs;
    int32_t answer[GPT_MAX_DIGITS + 1];
    int32_t* next; /* each row's next token */
    float* logits;
    int64_t in_shape[2], out_shape[3];
    long correct = 0, n = o->eval_problems;
    uint64_t available = gpt_addition_heldout_count(A);
    char text[3 * GPT_MAX_DIGITS + 4];
    int shown = 0;
    int32_t ids[3 * GPT_MAX_DIGITS + 3];
    long i;
    if ((uint64_t)n > available) {
        if (rank == 0)
            printf("--eval-problems %ld: the %d-digit task holds out %llu problems; evaluating all of them\n", n,
                   o->digits, (unsigned long long)available);
        n = (long)available;
    }
    pairs = (uint64_t*)malloc((size_t)n * 2 * sizeof *pairs);
    inputs = (int32_t*)malloc((size_t)chunk * (size_t)T * sizeof *inputs);
    logits = (float*)malloc((size_t)chunk * (size_t)T * (size_t)V * sizeof *logits);
    next = (int32_t*)malloc((size_t)chunk * sizeof *next);
    if (!pairs || !inputs || !logits || !next) fail(1, "out of memory for the evaluation");
    if (gpt_addition_heldout_set(A, o->seed, (size_t)n, pairs) != 0) fail(1, "cannot draw the held-out problems");
    for (i = 0; i < n; i += chunk) {
        int rows = (int)(n - i < chunk ? n - i : chunk), r, d;
        DLTensor in, out;
        for (r = 0; r < rows; ++r) {
            gpt_addition_format(A, pairs[2 * (i + r)], pairs[2 * (i + r) + 1], text);
            gpt_encode(t->vocab, text, (size_t)T, ids, NULL);
            memcpy(inputs + (size_t)r * (size_t)T, ids, (size_t)A->prompt_len * sizeof *ids);
            for (d = A->prompt_len; d < T; ++d) inputs[(size_t)r * (size_t)T + (size_t)d] = 0;
        }
        in = tensor_i32(inputs, in_shape, rows, T);
        out_shape[0] = rows; out_shape[1] = T; out_shape[2] = V;
        out = tensor_f32(logits, out_shape, 3);
        /* position prompt_len-1+d predicts answer digit d */
        for (d = 0; d < A->answer_len; ++d) {
            DS_TRY(ds_forward(e, &in, 1, &out));
            for (r = 0; r < rows; ++r) next[r] = argmax_at(logits, r, A->prompt_len - 1 + d, T, V);
            agree_tokens(o, next, rows);
            for (r = 0; r < rows; ++r) {
                int32_t tok = next[r];
                if (A->prompt_len + d < T) inputs[(size_t)r * (size_t)T + (size_t)(A->prompt_len + d)] = tok;
                if (d == A->answer_len - 1) {
                    uint64_t value = 0, a = pairs[2 * (i + r)], b = pairs[2 * (i + r) + 1];
                    int k, ok;
                    for (k = 0; k + 1 < A->answer_len; ++k)
                        answer[k] = inputs[(size_t)r * (size_t)T + (size_t)(A->prompt_len + k)];
                    answer[A->answer_len - 1] = tok;
                    ok = gpt_addition_read_answer(A, answer, &value) == 0 && value == a + b;
                    correct += ok;
                    if (rank == 0 && shown < 3) { /* a few examples, as the model wrote them */
                        char got[GPT_MAX_DIGITS + 2];
                        gpt_decode(t->vocab, answer, (size_t)A->answer_len, got);
                        gpt_addition_format(A, a, b, text);
                        text[A->prompt_len] = '\0';
                        printf("  %s%s  (%s)\n", text, got, ok ? "right" : "wrong");
                        ++shown;
                    }
                }
            }
        }
    }
    if (rank == 0) printf("held-out exact match: %.3f (%ld/%ld)\n", (double)correct / (double)n, correct, n);
    free(pairs);
    free(inputs);
    free(next);
    free(logits);
}

/* Loss on evenly spaced windows of the held-out tenth, then a sampled line. */
static void eval_text(ds_engine_t* e, const task_t* t, const gpt_options_t* o, int rank) {
    const int T = t->T, V = t->vocab->size, chunk = o->batch;
    int32_t *inputs = (int32_t*)malloc((size_t)chunk * (size_t)T * sizeof(int32_t));
    int32_t *targets = (int32_t*)malloc((size_t)chunk * (size_t)T * sizeof(int32_t));
    float* logits = (float*)malloc((size_t)T * (size_t)V * sizeof(float));
    int64_t in_shape[2], tg_shape[2], loss_shape[1] = {1}, out_shape[3];
    double sum = 0.0;
    int i, count = o->eval_problems, len = 0, produced = 0;
    gpt_rng_t rng = gpt_rng_for(o->seed, 0x5A3B1Eu, 0);
    char sample[256];
    if (!inputs || !targets || !logits) fail(1, "out of memory for the evaluation");
    for (i = 0; i < count; i += chunk) {
        int rows = count - i < chunk ? count - i : chunk, r;
        float loss = 0.0f;
        DLTensor batch[2], out;
        for (r = 0; r < rows; ++r)
            gpt_text_heldout_window(&t->text, i + r, count, inputs + (size_t)r * (size_t)T,
                                    targets + (size_t)r * (size_t)T);
        batch[0] = tensor_i32(inputs, in_shape, rows, T);
        batch[1] = tensor_i32(targets, tg_shape, rows, T);
        out = tensor_f32(&loss, loss_shape, 1);
        DS_TRY(ds_forward(e, batch, 2, &out));
        sum += (double)loss * rows;
    }
    if (rank == 0)
        printf("held-out loss: %.4f (perplexity %.2f) over %d windows of %d characters\n", sum / count,
               exp(sum / count), count, T);
    /* sample: start after a newline of the held-out part, draw from the softmax */
    {
        const unsigned char* held = t->text.text + t->text.train_len;
        size_t start = 0;
        DLTensor in, out;
        while (start + 1 < t->text.heldout_len && held[start] != '\n') ++start;
        inputs[0] = t->vocab->ids[held[start]];
        len = 1;
        in = tensor_i32(inputs, in_shape, 1, T);
        out_shape[0] = 1; out_shape[1] = T; out_shape[2] = V;
        out = tensor_f32(logits, out_shape, 3);
        while (produced < (int)sizeof sample - 1) {
            const float* l;
            double z = 0.0, u, acc = 0.0, mx = -HUGE_VAL;
            int k;
            int32_t tok = V - 1;
            for (k = len; k < T; ++k) inputs[k] = 0;
            DS_TRY(ds_forward(e, &in, 1, &out));
            l = logits + (size_t)(len - 1) * (size_t)V;
            for (k = 0; k < V; ++k) mx = l[k] > mx ? l[k] : mx;
            for (k = 0; k < V; ++k) z += exp(l[k] - mx);
            u = gpt_rng_unit(&rng) * z;
            for (k = 0; k < V; ++k) {
                acc += exp(l[k] - mx);
                if (u < acc) { tok = k; break; }
            }
            agree_tokens(o, &tok, 1);
            sample[produced++] = (char)t->vocab->chars[tok];
            if (t->vocab->chars[tok] == '\n' && produced > 1) break;
            if (len == T) memmove(inputs, inputs + 1, (size_t)(T - 1) * sizeof *inputs), --len;
            inputs[len++] = tok;
        }
        sample[produced] = '\0';
        if (produced && sample[produced - 1] == '\n') sample[produced - 1] = '\0';
        if (rank == 0) printf("sample: %s\n", sample);
    }
    free(inputs);
    free(targets);
    free(logits);
}

/* ---- the held-out loss: through a pipeline, through a whole model ---- */

/* Held-out row j (addition: problem j mod n_pairs of `pairs`; text: window j of count). */
static void heldout_row(const task_t* t, const uint64_t* pairs, long n_pairs, long j, long count, int32_t* in,
                        int32_t* tg) {
    if (t->is_text) {
        gpt_text_heldout_window(&t->text, (int)j, (int)count, in, tg);
    } else {
        long k = j % n_pairs;
        gpt_addition_problem_row(&t->add, pairs[2 * k], pairs[2 * k + 1], in, tg);
    }
}

/* The held-out loss through the pipeline (ds_eval_batch, collective) and
 * through a whole model (ds_forward on the same rows: with --pipe the model
 * rank 0 loaded from the run's checkpoint, which checks that it holds the
 * stages' weights; without,
 * the data-parallel engine, one replica, so the two runs can be compared).
 * Batch k of replica d holds rows (k * replicas + d) * rows .. + rows of
 * `count` held-out rows, count the smallest multiple of replicas * rows
 * covering --eval-problems (the addition task's problems distinct while the
 * held-out set lasts). The whole model runs a batch as forwards of
 * `forward_rows` rows, the pipeline's micro-batches (an MoE layer's capacity,
 * and so which tokens it drops, is per forward). The rows of a batch all have
 * the same number of targets, so the mean of forward means is the mean over
 * the rows. */
typedef struct {
    int rows, forward_rows, replica, replicas;
    long count, batches;
    uint64_t* pairs;
    long n_pairs;
    int32_t *inputs, *targets;
} heldout_t;

static void heldout_init(heldout_t* h, const task_t* t, const gpt_options_t* o, int rows, int forward_rows,
                         int replica, int replicas) {
    memset(h, 0, sizeof *h);
    h->rows = rows;
    h->forward_rows = forward_rows;
    h->replica = replica;
    h->replicas = replicas;
    h->batches = (o->eval_problems + (long)rows * replicas - 1) / ((long)rows * replicas);
    h->count = h->batches * rows * replicas;
    h->inputs = (int32_t*)malloc((size_t)rows * (size_t)t->T * sizeof *h->inputs);
    h->targets = (int32_t*)malloc((size_t)rows * (size_t)t->T * sizeof *h->targets);
    if (!h->inputs || !h->targets) fail(1, "out of memory for the evaluation");
    if (!t->is_text) {
        uint64_t available = gpt_addition_heldout_count(&t->add);
        h->n_pairs = (uint64_t)h->count < available ? h->count : (long)available;
        h->pairs = (uint64_t*)malloc((size_t)h->n_pairs * 2 * sizeof *h->pairs);
        if (!h->pairs || gpt_addition_heldout_set(&t->add, o->seed, (size_t)h->n_pairs, h->pairs) != 0)
            fail(1, "cannot draw the held-out problems");
    }
}

/* Batch k of replica d into h->inputs/targets. */
static void heldout_batch(heldout_t* h, const task_t* t, long k, int d) {
    int r;
    for (r = 0; r < h->rows; ++r)
        heldout_row(t, h->pairs, h->n_pairs, (k * h->replicas + d) * h->rows + r, h->count,
                    h->inputs + (size_t)r * (size_t)t->T, h->targets + (size_t)r * (size_t)t->T);
}

static double pipe_heldout_loss(ds_engine_t* stage, heldout_t* h, const task_t* t) {
    double sum = 0.0;
    long k;
    int64_t in_shape[2], tg_shape[2];
    for (k = 0; k < h->batches; ++k) {
        DLTensor in, tg;
        float loss = 0.0f;
        heldout_batch(h, t, k, h->replica);
        in = tensor_i32(h->inputs, in_shape, h->rows, t->T);
        tg = tensor_i32(h->targets, tg_shape, h->rows, t->T);
        DS_TRY(ds_eval_batch(stage, &in, &tg, &loss));
        sum += loss;
    }
    return sum / (double)h->batches;
}

static double whole_heldout_loss(ds_engine_t* whole, heldout_t* h, const task_t* t) {
    double sum = 0.0;
    long k, forwards = 0;
    int d, r;
    int64_t in_shape[2], tg_shape[2], loss_shape[1] = {1};
    for (k = 0; k < h->batches; ++k)
        for (d = 0; d < h->replicas; ++d) {
            heldout_batch(h, t, k, d);
            for (r = 0; r < h->rows; r += h->forward_rows) {
                DLTensor batch[2], out;
                float loss = 0.0f;
                batch[0] = tensor_i32(h->inputs + (size_t)r * (size_t)t->T, in_shape, h->forward_rows, t->T);
                batch[1] = tensor_i32(h->targets + (size_t)r * (size_t)t->T, tg_shape, h->forward_rows, t->T);
                out = tensor_f32(&loss, loss_shape, 1);
                DS_TRY(ds_forward(whole, batch, 2, &out));
                sum += loss;
                ++forwards;
            }
        }
    return sum / (double)forwards;
}

/* ---- the loss curve ---- */

/* The loss curve of a pipeline run: the batch losses ds_train_batch returned
 * (samples, loss), kept by rank 0 (the csv_monitor's train_loss rows hold the
 * same values, one per batch). */
static void write_pipe_plot(const gpt_options_t* o, const double* x, const double* y, long n) {
    char png[4200], err[512];
    snprintf(png, sizeof png, "%s/loss.png", o->out);
    if (n < 1) printf("loss curve: not written (no step was trained)\n");
    else if (plot_loss_png(png, x, y, (size_t)n, "train loss", "samples", err, sizeof err) != 0)
        fprintf(stderr, "train_gpt: loss curve not written: %s\n", err);
    else
        printf("loss curve: %s (%ld points: the pipeline's batch losses)\n", png, n);
}

static void write_plot(const char* config_json, const gpt_options_t* o) {
    char enabled[16], output_path[2048], job[512], csv[4200], png[4200], err[4400];
    double *x = NULL, *y = NULL;
    long n;
    if (config_value(config_json, "csv_monitor", "enabled", enabled, sizeof enabled) != 0 ||
        strcmp(enabled, "true") != 0) {
        printf("loss curve: not written (csv_monitor is not enabled in the config)\n");
        return;
    }
    if (config_value(config_json, "csv_monitor", "output_path", output_path, sizeof output_path) != 0)
        output_path[0] = '\0';
    if (config_value(config_json, "csv_monitor", "job_name", job, sizeof job) != 0) strcpy(job, "DeepSpeedJobName");
    /* DeepSpeed's layout: <output_path>/<job_name>/<event name, '/' as '_'>.csv */
    if (output_path[0]) snprintf(csv, sizeof csv, "%s/%s/Train_Samples_train_loss.csv", output_path, job);
    else snprintf(csv, sizeof csv, "%s/Train_Samples_train_loss.csv", job);
    n = plot_read_csv(csv, &x, &y, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "train_gpt: loss curve not written: %s\n", err);
        return;
    }
    snprintf(png, sizeof png, "%s/loss.png", o->out);
    if (plot_loss_png(png, x, y, (size_t)n, "train loss", "samples", err, sizeof err) != 0)
        fprintf(stderr, "train_gpt: loss curve not written: %s\n", err);
    else
        printf("loss curve: %s (%ld points from %s)\n", png, n, csv);
    free(x);
    free(y);
}

/* ---- main ---- */

/* `path` and its missing parents (mkdir -p). */
static void make_dir(const char* path) {
    char msg[4200], part[4096];
    size_t n = strlen(path), i;
    if (n >= sizeof part) {
        snprintf(msg, sizeof msg, "--out: path longer than %zu bytes", sizeof part - 1);
        fail(2, msg);
    }
    memcpy(part, path, n + 1);
    for (i = 1; i <= n; ++i) {
        if (part[i] != '/' && part[i] != '\0') continue;
        part[i] = '\0';
        if (mkdir(part, 0777) != 0 && errno != EEXIST) {
            snprintf(msg, sizeof msg, "--out: cannot create '%s': %s", part, strerror(errno));
            fail(2, msg);
        }
        part[i] = path[i];
    }
}

/* The identity string a checkpoint's client state carries: {"train_gpt": "<task> <model>"}. */
static void identity_of(const task_t* t, const gpt_options_t* o, char* out, size_t n) {
    int k = snprintf(out, n, "%s n_layer=%d n_head=%d n_embd=%d", t->identity, o->n_layer, o->n_head, o->n_embd);
    /* only MoE runs say so: the identities of earlier checkpoints stay what they were */
    if (o->moe_experts > 0 && k > 0 && (size_t)k < n) snprintf(out + k, n - (size_t)k, " moe_experts=%d", o->moe_experts);
}

int main(int argc, char** argv) {
    gpt_options_t o;
    task_t task;
    char err[1024], spec[1024], whole_spec[1024], msg[8192], identity[512], saved_identity[512], client_state[600];
    static char config[16384];
    const char* resolved = NULL;
    ds_model_t* model = NULL;
    ds_engine_t* e = NULL;
    ds_engine_options_t eo;
    ds_step_info_t info;
    int rank = 0, rc, micro = 0, gas = 1, print_every = 0, window = 0;
    int replicas = 1, replica = 0; /* --pipe: this rank's data-parallel replica of its stage; --tp: its group's */
    double *curve_x = NULL, *curve_y = NULL; /* --pipe, rank 0: (samples, loss) of every step */
    long curve_n = 0;
    int64_t batches = 0; /* --pipe: ds_train_batch calls, as micro_steps counts ds_step calls */
    double window_loss = 0.0;
    int32_t r32 = 0, w32 = 1;
    int64_t global_steps = 0, start_steps = 0, micro_steps = 0, n_params = 0, last_saved = -1;
    int saved_here = 0; /* a checkpoint was written into --save by this run */
    int32_t* inputs;
    int32_t* targets;
    int64_t in_shape[2], tg_shape[2], loss_shape[1] = {1};
    float loss = 0.0f;
    double t0 = now_s(), t_train, t_eval;

    rc = gpt_options_parse(argc, argv, &o, err, sizeof err);
    if (rc == 1) { gpt_options_usage(stdout, argv[0]); return 0; }
    if (rc != 0) {
        fprintf(stderr, "train_gpt: %s\n", err);
        gpt_options_usage(stderr, argv[0]);
        return 2;
    }
    load_task(&o, &task);
    if (o.config) {
        FILE* f = fopen(o.config, "rb");
        size_t n = f ? fread(config, 1, sizeof config - 1, f) : 0;
        if (!f) {
            snprintf(msg, sizeof msg, "--config: cannot open '%s': %s", o.config, strerror(errno));
            fail(2, msg);
        }
        if (n == sizeof config - 1 && !feof(f)) {
            fclose(f);
            snprintf(msg, sizeof msg, "--config: '%s' is larger than %zu bytes", o.config, sizeof config - 1);
            fail(2, msg);
        }
        fclose(f);
        config[n] = '\0';
        {
            /* the data layout (which ranks feed the same batch) follows --tp: the file must agree */
            char v[64] = "1";
            int has_tp = config_value(config, "tensor_parallel", "autotp_size", v, sizeof v) == 0;
            int file_tp = atoi(v) < 1 ? 1 : atoi(v); /* autotp_size 0 or 1 is off */
            if (file_tp != o.tp) {
                snprintf(msg, sizeof msg, "--config %s %s tensor_parallel.autotp_size%s%s and the command line says "
                         "--tp %d: give --tp the file's value (the ranks of a tensor-parallel group must draw the same "
                         "batches)", o.config, has_tp ? "sets" : "has no", has_tp ? " " : "", has_tp ? v : "", o.tp);
                fail(2, msg);
            }
        }
    } else {
        make_config(&o, config, sizeof config);
    }

    DS_TRY(ds_comm_create_world(NULL, &g_comm));
    DS_TRY(ds_comm_rank(g_comm, &r32));
    DS_TRY(ds_comm_size(g_comm, &w32));
    rank = (int)r32;
    g_world = (int)w32;
    if (g_world % o.pipe != 0) {
        snprintf(msg, sizeof msg, "--pipe %d: %d rank(s) cannot be laid out as %d pipeline stages (the rank count "
                 "must be a multiple of --pipe: stages x data-parallel replicas)", o.pipe, g_world, o.pipe);
        fail(2, msg);
    }
    if (g_world % o.tp != 0) {
        snprintf(msg, sizeof msg, "--tp %d: %d rank(s) cannot be laid out as tensor-parallel groups of %d (the rank "
                 "count must be a multiple of --tp: replicas x tp)", o.tp, g_world, o.tp);
        fail(2, msg);
    }
    if (g_world % (o.pipe * o.tp) != 0) {
        snprintf(msg, sizeof msg, "--pipe %d --tp %d: %d rank(s) cannot be laid out as %d stages x replicas x tp %d "
                 "(the rank count must be a multiple of --pipe x --tp)", o.pipe, o.tp, g_world, o.pipe, o.tp);
        fail(2, msg);
    }
    if ((g_world / (o.pipe * o.tp)) % o.ep_size != 0) {
        if (o.pipe == 1 && o.tp == 1)
            snprintf(msg, sizeof msg, "--ep-size %d: %d rank(s) cannot be laid out as expert groups of %d (the rank "
                     "count must be a multiple of --ep-size)", o.ep_size, g_world, o.ep_size);
        else
            snprintf(msg, sizeof msg, "--ep-size %d: the %d data-parallel replicas (%d rank(s) / --%s %d) cannot be "
                     "laid out as expert groups of %d (an expert group is --ep-size consecutive replicas)",
                     o.ep_size, g_world / (o.pipe * o.tp), g_world, o.pipe > 1 ? "pipe" : "tp",
                     o.pipe > 1 ? o.pipe : o.tp, o.ep_size);
        fail(2, msg);
    }
    /* DeepSpeed's pipe x data x model topology: rank = (stage * replicas + replica) * tp + tp rank */
    replicas = g_world / (o.pipe * o.tp);
    replica = (rank / o.tp) % replicas;
    if (rank == 0) {
        make_dir(o.out);
        if (!o.config) {
            snprintf(msg, sizeof msg, "%s/monitor", o.out);
            make_dir(msg);
        }
    }

    /* the model: GPT-2 (learned positions, pre-LN, GELU, tied embeddings, biases) */
    snprintf(spec, sizeof spec,
             "{\"type\": \"gpt\", \"vocab_size\": %d, \"block_size\": %d, \"n_layer\": %d, \"n_head\": %d, "
             "\"n_embd\": %d, \"dropout\": 0.0, \"tied_embeddings\": true, \"seed\": %llu}",
             task.vocab->size, task.T, o.n_layer, o.n_head, o.n_embd, (unsigned long long)o.seed);
    memcpy(whole_spec, spec, sizeof spec); /* --pipe: the model evaluated on rank 0 (every expert) */
    if (o.moe_experts > 0) /* DeepSpeed's defaults otherwise: top-1, capacity factor 1, min capacity 4 */
        snprintf(whole_spec + strlen(whole_spec) - 1, sizeof whole_spec - strlen(whole_spec) + 1,
                 ", \"moe\": {\"num_experts\": %d, \"every\": 2}}", o.moe_experts);
    if (o.pipe > 1) /* the stages balanced by parameter count, DeepSpeed's default */
        snprintf(spec + strlen(spec) - 1, sizeof spec - strlen(spec) + 1,
                 ", \"pipeline\": {\"stages\": %d, \"partition_method\": \"parameters\"}}", o.pipe);
    if (o.moe_experts > 0)
        snprintf(spec + strlen(spec) - 1, sizeof spec - strlen(spec) + 1,
                 ", \"moe\": {\"num_experts\": %d, \"every\": 2, \"ep_size\": %d}}", o.moe_experts, o.ep_size);
    {
        ds_status_t s = ds_model_create(spec, &model);
        if (s != DS_OK) {
            snprintf(msg, sizeof msg, "the model options were refused: %s\n  %s\n  spec: %s", ds_status_string(s),
                     ds_last_error(), spec);
            fail(s == DS_ERR_INVALID_CONFIG ? 2 : 1, msg);
        }
    }
    DS_TRY(ds_model_num_params(model, &n_params));

    ds_engine_options_init(&eo, sizeof eo);
    eo.comm = g_comm;
    eo.log_callback = log_to_stdout;
    eo.log_user_data = &rank;
    eo.log_level = DS_LOG_INFO;
    {
        ds_status_t s = ds_engine_create_with_model(config, model, &eo, &e);
        if (s != DS_OK) {
            snprintf(msg, sizeof msg, "the %s config was refused: %s\n  %s", o.config ? o.config : "embedded",
                     ds_status_string(s), ds_last_error());
            fail(s == DS_ERR_INVALID_CONFIG || s == DS_ERR_UNSUPPORTED ? 2 : 1, msg);
        }
    }
    ds_model_destroy(model); /* the engine keeps it */
    DS_TRY(ds_engine_config_json(e, &resolved));
    {
        char v[64];
        if (config_value(resolved, NULL, "train_micro_batch_size_per_gpu", v, sizeof v) != 0 || (micro = atoi(v)) < 1)
            fail(1, "the resolved config has no train_micro_batch_size_per_gpu");
        if (config_value(resolved, NULL, "steps_per_print", v, sizeof v) == 0 && atoi(v) > 0) print_every = atoi(v);
        if (config_value(resolved, NULL, "gradient_accumulation_steps", v, sizeof v) == 0 && atoi(v) > 0)
            gas = atoi(v);
    }
    identity_of(&task, &o, identity, sizeof identity);
    if (rank == 0) {
        if (task.is_text)
            printf("train_gpt: character GPT on %s (%zu training, %zu held-out bytes, %d symbols)\n", o.text,
                   task.text.train_len, task.text.heldout_len, task.vocab->size);
        else
            printf("train_gpt: %d-digit addition, answers reversed (e.g. 123+459=2850), %llu held-out problems "
                   "never trained on\n",
                   o.digits, (unsigned long long)gpt_addition_heldout_count(&task.add));
        printf("model: GPT n_layer=%d n_head=%d n_embd=%d block=%d vocab=%d, %lld parameters\n", o.n_layer,
               o.n_head, o.n_embd, task.T, task.vocab->size, (long long)n_params);
        if (o.pipe > 1) {
            ds_pipe_info_t pi;
            pi.struct_size = sizeof pi;
            DS_TRY(ds_engine_pipe_info(e, &pi));
            char tp_axis[32] = "";
            if (o.tp > 1) snprintf(tp_axis, sizeof tp_axis, " x tp %d", o.tp);
            printf("pipeline: %d ranks = %d stages x %d data-parallel replicas%s; per step each replica trains %d "
                   "micro-batches of %d (1F1B); rank 0 holds pipeline layers %d..%d of %d\n",
                   g_world, o.pipe, replicas, tp_axis, gas, micro, pi.first_layer, pi.last_layer - 1, pi.num_layers);
        }
        if (o.tp > 1)
            printf("tensor parallel: %d ranks = %d replicas x tp %d%s; each group of %d consecutive ranks shares every "
                   "transformer layer%s (%d of %d heads and %d of %d MLP columns a rank) and trains its replica's "
                   "batches of %d rows\n",
                   g_world, replicas, o.tp, o.pipe > 1 ? " in each stage" : "", o.tp,
                   o.pipe > 1 ? " of its stage" : "", o.n_head / o.tp, o.n_head, 4 * o.n_embd / o.tp, 4 * o.n_embd,
                   micro);
        if (o.moe_experts > 0)
            printf("MoE: %d experts in every 2nd layer, ep_size %d (each rank holds %d/%d experts of each MoE "
                   "layer%s)\n", o.moe_experts, o.ep_size, o.moe_experts / o.ep_size, o.moe_experts,
                   o.ep_size == 1 ? ""
                   : o.pipe > 1   ? "; expert groups of --ep-size consecutive replicas of each stage"
                   : o.tp > 1     ? "; expert groups of --ep-size consecutive replicas of each tp rank"
                                  : "");
        if (o.config)
            printf("engine: deepspeed_c %s, %d rank(s), micro-batch %d per rank, config %s\n", ds_version_string(),
                   g_world, micro, o.config);
        else if (o.tp > 1)
            printf("engine: deepspeed_c %s, %d rank(s), micro-batch %d per replica, embedded config: ZeRO-%d over "
                   "the %d replicas%s, tensor_parallel.autotp_size %d, %s, AdamW lr %g, WarmupCosineLR over %d steps, "
                   "clipping 1.0\n",
                   ds_version_string(), g_world, micro, o.zero, replicas,
                   o.pipe > 1 ? " of each stage (a pipeline runs ZeRO 0 or 1)" : "", o.tp, o.dtype, o.lr, o.steps);
        else if (o.ep_size > 1)
            printf("engine: deepspeed_c %s, %d rank(s), micro-batch %d per rank, embedded config: ZeRO-%d (expert "
                   "parallelism runs ZeRO 0 or 1), %s%s, AdamW lr %g, WarmupCosineLR over %d steps, clipping 1.0\n",
                   ds_version_string(), g_world, micro, o.zero, o.dtype,
                   strcmp(o.dtype, "fp32") ? " with fp32 gradient accumulation" : "", o.lr, o.steps);
        else if (o.pipe > 1)
            printf("engine: deepspeed_c %s, %d rank(s), micro-batch %d per rank, embedded config: ZeRO-%d (a "
                   "pipeline runs ZeRO 0 or 1), %s, AdamW lr %g, WarmupCosineLR over %d steps, clipping 1.0\n",
                   ds_version_string(), g_world, micro, o.zero, o.dtype, o.lr, o.steps);
        else
            printf("engine: deepspeed_c %s, %d rank(s), micro-batch %d per rank, embedded config: ZeRO-%d, %s, "
                   "AdamW lr %g, WarmupCosineLR over %d steps, clipping 1.0\n",
                   ds_version_string(), g_world, micro, o.zero, o.dtype, o.lr, o.steps);
        fflush(stdout);
    }

    if (o.resume) {
        const char* client = NULL;
        char dir[4096], probe[4200];
        const char* tag = NULL;
        struct stat st;
        size_t len;
        ds_status_t s;
        /* DIR: its latest checkpoint; DIR/<tag> (a directory with a manifest): that one */
        snprintf(dir, sizeof dir, "%s", o.resume);
        for (len = strlen(dir); len > 1 && dir[len - 1] == '/'; --len) dir[len - 1] = '\0';
        snprintf(probe, sizeof probe, "%s/manifest.json", dir);
        if (stat(probe, &st) == 0 && S_ISREG(st.st_mode)) {
            char* slash = strrchr(dir, '/');
            if (slash && slash != dir) {
                *slash = '\0';
                tag = slash + 1;
            } else if (!slash) {
                memmove(dir + 2, dir, strlen(dir) + 1); /* "tag" -> "./" + "tag" */
                dir[0] = '.';
                dir[1] = '\0';
                tag = dir + 2;
            }
        }
        s = ds_load_checkpoint(e, dir, tag, 0, &client);
        if (s != DS_OK) {
            snprintf(msg, sizeof msg, "--resume %s: %s\n  %s", o.resume, ds_status_string(s), ds_last_error());
            fail(s == DS_ERR_NOT_FOUND || s == DS_ERR_FORMAT ? 2 : 1, msg);
        }
        if (config_value(client, NULL, "train_gpt", saved_identity, sizeof saved_identity) != 0)
            strcpy(saved_identity, "(none: not written by train_gpt)");
        if (strcmp(saved_identity, identity) != 0) {
            snprintf(msg, sizeof msg, "--resume %s: the checkpoint trained '%s', this run is '%s'", o.resume,
                     saved_identity, identity);
            fail(2, msg);
        }
        DS_TRY(ds_engine_global_steps(e, &global_steps));
        start_steps = global_steps;
        last_saved = global_steps;
        batches = global_steps; /* --pipe: one ds_train_batch per step, so its stream goes on where it was */
        if (rank == 0) printf("resumed from %s at step %lld\n", o.resume, (long long)global_steps);
    }

    /* a pipeline step takes all its micro-batches at once */
    inputs = (int32_t*)malloc((size_t)micro * (size_t)gas * (size_t)task.T * sizeof *inputs);
    targets = (int32_t*)malloc((size_t)micro * (size_t)gas * (size_t)task.T * sizeof *targets);
    if (!inputs || !targets) fail(1, "out of memory for a batch");
    if (o.pipe > 1 && rank == 0) {
        curve_x = (double*)malloc((size_t)o.steps * sizeof *curve_x);
        curve_y = (double*)malloc((size_t)o.steps * sizeof *curve_y);
        if (!curve_x || !curve_y) fail(1, "out of memory for the loss curve");
    }
    snprintf(client_state, sizeof client_state, "{\"train_gpt\": \"%s\"}", identity);
    info.struct_size = sizeof info;
    DS_TRY(ds_engine_eval(e, 0));
    while (o.pipe > 1 && global_steps < o.steps) {
        DLTensor in, tg;
        int64_t samples = 0;
        /* replica d's rows of step s are data-parallel rank d's batch of step s
         * with the same --batch (one stream per replica, as per rank there) */
        gpt_rng_t rng = gpt_rng_for(o.seed, (uint64_t)replica, (uint64_t)batches++);
        if (task.is_text) gpt_text_train_batch(&task.text, &rng, micro * gas, inputs, targets);
        else gpt_addition_train_batch(&task.add, &rng, micro * gas, inputs, targets);
        in = tensor_i32(inputs, in_shape, (int64_t)micro * gas, task.T);
        tg = tensor_i32(targets, tg_shape, (int64_t)micro * gas, task.T);
        DS_TRY(ds_train_batch(e, &in, &tg, &loss, &info));
        global_steps = info.global_step;
        if (!isfinite(loss)) {
            snprintf(msg, sizeof msg, "rank %d: the loss is %g at step %lld", rank, (double)loss,
                     (long long)global_steps);
            fail(1, msg);
        }
        DS_TRY(ds_engine_global_samples(e, &samples));
        if (curve_x && curve_n < o.steps) {
            curve_x[curve_n] = (double)samples;
            curve_y[curve_n++] = loss;
        }
        window_loss += loss;
        ++window;
        if (print_every > 0 && global_steps % print_every == 0) {
            if (rank == 0)
                printf("train_gpt: step %lld, the pipeline's mean loss over the last %d steps %.4f\n",
                       (long long)global_steps, window, window_loss / window);
            window_loss = 0.0;
            window = 0;
        }
        if (o.save_every > 0 && global_steps % o.save_every == 0 && global_steps < o.steps) {
            DS_TRY(ds_save_checkpoint(e, o.save, NULL, client_state));
            last_saved = global_steps;
            saved_here = 1;
        }
    }
    while (o.pipe == 1 && global_steps < o.steps) {
        DLTensor batch[2], out;
        gpt_rng_t rng;
        DS_TRY(ds_engine_micro_steps(e, &micro_steps));
        /* --tp: every rank of a group draws its replica's stream (replica = rank without --tp) */
        rng = gpt_rng_for(o.seed, (uint64_t)(o.tp > 1 ? replica : rank), (uint64_t)micro_steps);
        if (task.is_text) gpt_text_train_batch(&task.text, &rng, micro, inputs, targets);
        else gpt_addition_train_batch(&task.add, &rng, micro, inputs, targets);
        batch[0] = tensor_i32(inputs, in_shape, micro, task.T);
        batch[1] = tensor_i32(targets, tg_shape, micro, task.T);
        out = tensor_f32(&loss, loss_shape, 1);
        DS_TRY(ds_forward(e, batch, 2, &out));
        DS_TRY(ds_backward(e, NULL));
        DS_TRY(ds_step(e, &info));
        global_steps = info.global_step;
        if (!isfinite(loss)) {
            snprintf(msg, sizeof msg, "rank %d: the loss is %g at step %lld", rank, (double)loss,
                     (long long)global_steps);
            fail(1, msg);
        }
        window_loss += loss;
        ++window;
        if (info.stepped && print_every > 0 && global_steps % print_every == 0) {
            if (rank == 0)
                printf("train_gpt: step %lld, %s 0's mean loss over its last %d micro-batches %.4f\n",
                       (long long)global_steps, o.tp > 1 ? "replica" : "rank", window, window_loss / window);
            window_loss = 0.0;
            window = 0;
        }
        if (info.stepped && o.save_every > 0 && global_steps % o.save_every == 0 && global_steps < o.steps) {
            DS_TRY(ds_save_checkpoint(e, o.save, NULL, client_state));
            last_saved = global_steps; /* the engine logs "checkpoint saved: <dir>/<tag>" */
            saved_here = 1;
        }
    }
    t_train = now_s();
    /* every layout saves the whole model (a pipeline's stages, tensor- and expert-parallel shards together);
     * a pipeline's evaluation reads it back from --save (gpt_whole.h) */
    if (global_steps != last_saved || (o.pipe > 1 && !saved_here))
        DS_TRY(ds_save_checkpoint(e, o.save, NULL, client_state));
    if (rank == 0) {
        printf("trained steps %lld..%lld in %.1f s (%.1f ms/step), last %s loss %.6f\n",
               (long long)start_steps, (long long)global_steps, t_train - t0,
               global_steps > start_steps ? 1e3 * (t_train - t0) / (double)(global_steps - start_steps) : 0.0,
               o.pipe > 1 ? "batch" : "micro-batch", (double)loss);
        fflush(stdout);
    }

    if (o.pipe > 1) {
        /* the held-out loss through the pipeline, then the whole model on rank 0
         * for the same evaluation as a data-parallel run */
        heldout_t h;
        ds_comm_t* solo = NULL;
        ds_engine_t* whole = NULL;
        double pipe_loss;
        char whole_config[512], fp16[16] = "false", bf16[16] = "false";
        heldout_init(&h, &task, &o, micro * gas, micro, replica, replicas);
        pipe_loss = pipe_heldout_loss(e, &h, &task);
        config_value(resolved, "fp16", "enabled", fp16, sizeof fp16);
        config_value(resolved, "bf16", "enabled", bf16, sizeof bf16);
        /* evaluation only: the training's precision, no monitor; the engine
         * wants an optimizer for trainable weights, a stateless one never used */
        snprintf(whole_config, sizeof whole_config,
                 "{\"train_micro_batch_size_per_gpu\": %d, \"optimizer\": {\"type\": \"SGD\", \"params\": "
                 "{\"lr\": 0.001}}, \"fp16\": {\"enabled\": %s}, \"bf16\": {\"enabled\": %s}}",
                 micro, fp16, bf16);
        eo.log_level = DS_LOG_WARN; /* the whole model's creation lines would read as a second run */
        if (gpt_whole_from_checkpoint(g_comm, o.save, whole_spec, whole_config, &eo, &solo, &whole, msg,
                                      sizeof msg) != 0)
            fail(1, msg);
        if (rank == 0) {
            double whole_loss;
            DS_TRY(ds_engine_eval(whole, 1));
            whole_loss = whole_heldout_loss(whole, &h, &task);
            printf("held-out loss: %.6f through the pipeline (ds_eval_batch), %.6f by the whole model loaded from "
                   "the checkpoint on rank 0, over %ld %s\n",
                   pipe_loss, whole_loss, h.count, task.is_text ? "windows" : "problems");
            if (task.is_text) eval_text(whole, &task, &o, rank);
            else eval_addition(whole, &task, &o, rank);
            ds_engine_destroy(whole);
            DS_TRY(ds_comm_finalize(solo));
            ds_comm_destroy(solo);
        }
        free(h.pairs);
        free(h.inputs);
        free(h.targets);
    } else {
        DS_TRY(ds_engine_eval(e, 1));
        if (task.is_text) {
            eval_text(e, &task, &o, rank);
        } else {
            /* the loss on the held-out problems a pipeline run evaluates with the
             * same --batch (--eval-problems a multiple of it: the same problems) */
            heldout_t h;
            double held;
            heldout_init(&h, &task, &o, micro, micro, 0, 1);
            held = whole_heldout_loss(e, &h, &task);
            if (rank == 0) printf("held-out loss: %.6f over %ld problems\n", held, h.count);
            free(h.pairs);
            free(h.inputs);
            free(h.targets);
            eval_addition(e, &task, &o, rank);
        }
    }
    t_eval = now_s();
    if (rank == 0) printf("evaluated in %.1f s; total %.1f s\n", t_eval - t_train, t_eval - t0);

    /* the monitor flushes its files as it writes; the engine's resolved config
     * names them, so read it before the engine goes */
    if (rank == 0) {
        char* resolved_copy = strdup(resolved);
        ds_engine_destroy(e);
        if (!resolved_copy) fail(1, "out of memory");
        if (o.pipe > 1) write_pipe_plot(&o, curve_x, curve_y, curve_n);
        else write_plot(resolved_copy, &o);
        free(resolved_copy);
    } else {
        ds_engine_destroy(e);
    }
    free(inputs);
    free(targets);
    free(curve_x);
    free(curve_y);
    free(task.text_bytes);
    DS_TRY(ds_comm_finalize(g_comm)); /* collective: every rank gets here */
    ds_comm_destroy(g_comm);
    return 0;
}
