/* gpt_options.c — see gpt_options.h. */
#include "gpt_options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void gpt_options_usage(FILE* f, const char* prog) {
    fprintf(f,
            "usage: %s [options]\n"
            "  --n-layer N        transformer layers (default 2)\n"
            "  --n-head N         attention heads (default 8; must divide --n-embd)\n"
            "  --n-embd N         embedding width (default 64)\n"
            "  --steps N          optimizer steps to train to (default 1500)\n"
            "  --batch N          rows per rank and step (default 64); with --pipe, per data-parallel\n"
            "                     replica, cut into --micro-batches micro-batches; with --tp, per replica\n"
            "  --lr X             peak learning rate (default 0.003)\n"
            "  --zero 0|1|2|3     ZeRO stage (default 2; with --pipe > 1: 0 or 1, default 1; with --tp > 1: 0-2;\n"
            "                     with --ep-size > 1: 0 or 1, default 1)\n"
            "  --pipe N           pipeline stages (default 1: data parallel only); the ranks must be a\n"
            "                     multiple of N (N stages x ranks/N data-parallel replicas); after\n"
            "                     training rank 0 loads the run's checkpoint (the whole model) to evaluate\n"
            "  --tp N             tensor parallelism (default 1: off): N consecutive ranks share every\n"
            "                     transformer layer (AutoTP: heads and MLP columns split) and feed it\n"
            "                     the same batch; the ranks must be a multiple of N (e.g. 4 ranks =\n"
            "                     2 replicas x tp 2); --n-head and 4 x --n-embd multiples of N; ZeRO 0-2;\n"
            "                     with --pipe S: ranks = S stages x replicas x N (every stage's layers split)\n"
            "  --moe-experts N    Mixture of Experts (default 0: off): the MLP of every 2nd transformer\n"
            "                     layer becomes an MoE layer of N experts (top-1 gating, DeepSpeed's\n"
            "                     defaults otherwise); also with --pipe (in the stages) or --tp (each\n"
            "                     MoE layer whole on every rank of a tensor-parallel group)\n"
            "  --ep-size P        with --moe-experts: expert parallelism (default 1: off): P consecutive\n"
            "                     data-parallel replicas share each MoE layer, each holding N/P of its\n"
            "                     experts, and every replica trains its own batches; P must divide N\n"
            "                     and the replicas (the ranks / (--pipe x --tp));\n"
            "                     with P > 1 ZeRO 0 or 1 (default 1), fp16/bf16 accumulate gradients\n"
            "                     in fp32\n"
            "  --micro-batches M  with --pipe > 1: micro-batches per step, must divide --batch\n"
            "                     (default 2 x --pipe)\n"
            "  --dtype fp32|fp16|bf16  training precision (default fp32)\n"
            "  --config FILE      DeepSpeed JSON config replacing the embedded one\n"
            "                     (then --batch, --micro-batches, --lr, --zero and --dtype come from it)\n"
            "  --resume DIR       continue from the latest checkpoint in DIR, or from DIR/<tag>; any\n"
            "                     layout (--pipe, --tp, --ep-size, rank count) loads any other's\n"
            "  --save DIR         checkpoint directory (default <out>/checkpoints)\n"
            "  --save-every N     also save every N steps (default: only at the end)\n"
            "  --text FILE        train a character GPT on FILE instead of the addition task\n"
            "  --block-size N     with --text: characters per sequence (default 64)\n"
            "  --digits N         addition: operand digits, 1..9 (default 3)\n"
            "  --eval-problems N  held-out problems to evaluate (default 1000; --text: windows, default 256)\n"
            "  --seed N           seed of the data, the initial weights and the evaluation (default 1)\n"
            "  --out DIR          run directory, made with its parents: monitor CSVs, loss.png, checkpoints\n"
            "                     (default gpt_run)\n"
            "  --help             this text\n",
            prog);
}

/* An integer option in [lo, hi]. */
static int int_arg(const char* name, const char* v, long long lo, long long hi, long long* out, char* err,
                   size_t n) {
    char* end;
    long long x;
    errno = 0;
    x = strtoll(v, &end, 10);
    if (end == v || *end != '\0' || errno == ERANGE || x < lo || x > hi) {
        snprintf(err, n, "%s: '%s' is not an integer in [%lld, %lld]", name, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

int gpt_options_parse(int argc, char** argv, gpt_options_t* o, char* err, size_t n) {
    int a, set_batch = 0, set_lr = 0, set_zero = 0, set_dtype = 0, set_eval = 0, set_block = 0, set_digits = 0;
    int set_micro = 0, set_ep = 0;
    long long v;
    memset(o, 0, sizeof *o);
    o->n_layer = 2; o->n_head = 8; o->n_embd = 64;
    o->steps = 1500; o->batch = 64; o->lr = 3e-3; o->zero = 2; o->pipe = 1; o->tp = 1; o->ep_size = 1; o->dtype = "fp32";
    o->block_size = 64; o->digits = 3; o->eval_problems = 1000; o->seed = 1; o->out = "gpt_run";
    for (a = 1; a < argc; ++a) {
        const char* opt = argv[a];
        const char* val = a + 1 < argc ? argv[a + 1] : NULL;
        int takes = 1;
        if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) return 1;
        if (strncmp(opt, "--", 2) != 0) {
            snprintf(err, n, "unexpected argument '%s' (options start with --; see --help)", opt);
            return -1;
        }
#define INT_OPT(flag, field, lo, hi)                                  \
        else if (!strcmp(opt, flag)) {                                \
            if (!val) goto missing;                                   \
            if (int_arg(flag, val, lo, hi, &v, err, n)) return -1;    \
            o->field = (int)v;                                        \
        }
        if (0) {}
        INT_OPT("--n-layer", n_layer, 1, 256)
        INT_OPT("--n-head", n_head, 1, 256)
        INT_OPT("--n-embd", n_embd, 1, 16384)
        INT_OPT("--steps", steps, 1, 100000000)
        INT_OPT("--save-every", save_every, 0, 100000000)
        INT_OPT("--pipe", pipe, 1, 256)
        INT_OPT("--tp", tp, 1, 256)
        INT_OPT("--moe-experts", moe_experts, 0, 65536)
        else if (!strcmp(opt, "--ep-size")) {
            if (!val) goto missing;
            if (int_arg(opt, val, 1, 65536, &v, err, n)) return -1;
            o->ep_size = (int)v; set_ep = 1;
        }
        else if (!strcmp(opt, "--micro-batches")) {
            if (!val) goto missing;
            if (int_arg(opt, val, 1, 65536, &v, err, n)) return -1;
            o->micro_batches = (int)v; set_micro = 1;
        }
        else if (!strcmp(opt, "--batch")) {
            if (!val) goto missing;
            if (int_arg(opt, val, 1, 65536, &v, err, n)) return -1;
            o->batch = (int)v; set_batch = 1;
        } else if (!strcmp(opt, "--zero")) {
            if (!val) goto missing;
            if (int_arg(opt, val, 0, 3, &v, err, n)) return -1;
            o->zero = (int)v; set_zero = 1;
        } else if (!strcmp(opt, "--block-size")) {
            if (!val) goto missing;
            if (int_arg(opt, val, 2, 8192, &v, err, n)) return -1;
            o->block_size = (int)v; set_block = 1;
        } else if (!strcmp(opt, "--digits")) {
            if (!val) goto missing;
            if (int_arg(opt, val, 1, 9, &v, err, n)) return -1;
            o->digits = (int)v; set_digits = 1;
        } else if (!strcmp(opt, "--eval-problems")) {
            if (!val) goto missing;
            if (int_arg(opt, val, 1, 1000000, &v, err, n)) return -1;
            o->eval_problems = (int)v; set_eval = 1;
        } else if (!strcmp(opt, "--seed")) {
            if (!val) goto missing;
            if (int_arg(opt, val, 0, 0x7FFFFFFFFFFFFFFFll, &v, err, n)) return -1;
            o->seed = (uint64_t)v;
        } else if (!strcmp(opt, "--lr")) {
            char* end;
            if (!val) goto missing;
            errno = 0;
            o->lr = strtod(val, &end);
            if (end == val || *end != '\0' || errno == ERANGE || !(o->lr > 0.0 && o->lr <= 10.0)) {
                snprintf(err, n, "--lr: '%s' is not a number in (0, 10]", val);
                return -1;
            }
            set_lr = 1;
        } else if (!strcmp(opt, "--dtype")) {
            if (!val) goto missing;
            if (strcmp(val, "fp32") && strcmp(val, "fp16") && strcmp(val, "bf16")) {
                snprintf(err, n, "--dtype: '%s' is not fp32, fp16 or bf16", val);
                return -1;
            }
            o->dtype = val; set_dtype = 1;
        } else if (!strcmp(opt, "--config") || !strcmp(opt, "--resume") || !strcmp(opt, "--save") ||
                   !strcmp(opt, "--text") || !strcmp(opt, "--out")) {
            if (!val) goto missing;
            if (!*val) {
                snprintf(err, n, "%s: the path is empty", opt);
                return -1;
            }
            if (!strcmp(opt, "--config")) o->config = val;
            else if (!strcmp(opt, "--resume")) o->resume = val;
            else if (!strcmp(opt, "--save")) o->save = val;
            else if (!strcmp(opt, "--text")) o->text = val;
            else o->out = val;
        } else {
            snprintf(err, n, "unknown option '%s' (see --help)", opt);
            return -1;
        }
#undef INT_OPT
        a += takes;
        continue;
    missing:
        snprintf(err, n, "%s needs a value", opt);
        return -1;
    }
    if (o->n_embd % o->n_head != 0) {
        snprintf(err, n, "--n-head: %d does not divide --n-embd %d", o->n_head, o->n_embd);
        return -1;
    }
    if (o->config && (set_batch || set_lr || set_zero || set_dtype)) {
        snprintf(err, n, "--%s sets the embedded config; with --config %s set it in that file instead",
                 set_batch ? "batch" : set_lr ? "lr" : set_zero ? "zero" : "dtype", o->config);
        return -1;
    }
    if (o->text && set_digits) {
        snprintf(err, n, "--digits sets the addition task; it does not apply with --text");
        return -1;
    }
    if (!o->text && set_block) {
        snprintf(err, n, "--block-size applies with --text only (the addition task's length follows --digits)");
        return -1;
    }
    if (o->pipe == 1 && set_micro) {
        snprintf(err, n, "--micro-batches applies with --pipe > 1 only");
        return -1;
    }
    if (o->pipe > 1) {
        /* DeepSpeed's pipeline engine runs ZeRO 0 or 1 (the stages' gradients are reduced after the schedule) */
        if (set_zero && o->zero > 1) {
            snprintf(err, n, "--zero %d: with --pipe %d the pipeline runs ZeRO stage 0 or 1", o->zero, o->pipe);
            return -1;
        }
        if (!set_zero) o->zero = 1;
        if (o->config && set_micro) {
            snprintf(err, n, "--micro-batches sets the embedded config; with --config %s set "
                     "gradient_accumulation_steps in that file instead", o->config);
            return -1;
        }
        if (!set_micro) o->micro_batches = 2 * o->pipe; /* the usual 1F1B choice: the bubble is (N-1)/(M+N-1) */
        if (!o->config && o->batch % o->micro_batches != 0) {
            snprintf(err, n, "--batch %d: with --pipe %d it is cut into --micro-batches %d micro-batches, which "
                     "does not divide it", o->batch, o->pipe, o->micro_batches);
            return -1;
        }
    }
    if (o->tp > 1) {
        /* the engine's AutoTP: ZeRO 0-2 over the replicas of a shard */
        if (o->zero == 3) {
            snprintf(err, n, "--zero 3: with --tp %d the engine runs ZeRO stage 0, 1 or 2 (as DeepSpeed's AutoTP)",
                     o->tp);
            return -1;
        }
        if (o->n_head % o->tp != 0 || (4 * o->n_embd) % o->tp != 0) {
            snprintf(err, n, "--tp %d: %s %d is not a multiple of it (each rank of a group takes whole heads and "
                     "an equal share of the MLP's 4 x n_embd columns)", o->tp,
                     o->n_head % o->tp ? "--n-head" : "4 x --n-embd", o->n_head % o->tp ? o->n_head : 4 * o->n_embd);
            return -1;
        }
    }
    if (set_ep && o->moe_experts == 0) {
        snprintf(err, n, "--ep-size %d applies with --moe-experts N only (it shards the experts)", o->ep_size);
        return -1;
    }
    if (o->moe_experts > 0) {
        if (o->moe_experts % o->ep_size != 0) {
            snprintf(err, n, "--ep-size %d does not divide --moe-experts %d (each rank of an expert group holds "
                     "the same number of experts)", o->ep_size, o->moe_experts);
            return -1;
        }
    }
    if (o->ep_size > 1) {
        /* expert parallelism in the engine: ZeRO 0 or 1 with fp32 gradient buffers */
        if (set_zero && o->zero > 1) {
            snprintf(err, n, "--zero %d: with --ep-size %d the engine runs ZeRO stage 0 or 1", o->zero, o->ep_size);
            return -1;
        }
        if (!set_zero) o->zero = 1;
    }
    if (o->text && !set_eval) o->eval_problems = 256;
    if (!o->save) {
        snprintf(o->save_buf, sizeof o->save_buf, "%s/checkpoints", o->out);
        o->save = o->save_buf;
    }
    return 0;
}
