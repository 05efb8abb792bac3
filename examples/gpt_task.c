/* gpt_task.c — see gpt_task.h. */
#include "gpt_task.h"

#include <stdlib.h>
#include <string.h>

/* ---- random numbers ---- */

uint64_t gpt_rng_next(gpt_rng_t* r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t gpt_rng_below(gpt_rng_t* r, uint64_t n) {
    /* the largest multiple of n that fits: draws at or above it are redrawn */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n, x;
    do x = gpt_rng_next(r); while (x >= limit);
    return x % n;
}

double gpt_rng_unit(gpt_rng_t* r) { return (double)(gpt_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

gpt_rng_t gpt_rng_for(uint64_t seed, uint64_t a, uint64_t b) {
    gpt_rng_t r;
    r.s = seed;
    r.s = gpt_rng_next(&r) ^ (a * 0xD1B54A32D192ED03ull);
    r.s = gpt_rng_next(&r) ^ (b * 0xAEF17502108EF2D9ull);
    return r;
}

/* ---- character tokenizer ---- */

int gpt_vocab_from_chars(gpt_vocab_t* v, const char* chars, size_t n) {
    size_t i;
    memset(v, 0, sizeof *v);
    for (i = 0; i < 256; ++i) v->ids[i] = -1;
    for (i = 0; i < n; ++i) {
        unsigned char c = (unsigned char)chars[i];
        if (v->ids[c] >= 0) continue;
        v->ids[c] = (int16_t)v->size;
        v->chars[v->size++] = c;
    }
    return v->size;
}

int gpt_vocab_from_text(gpt_vocab_t* v, const unsigned char* text, size_t n) {
    char seen[256], order[256];
    size_t i, k = 0;
    memset(seen, 0, sizeof seen);
    for (i = 0; i < n; ++i) seen[text[i]] = 1;
    for (i = 0; i < 256; ++i)
        if (seen[i]) order[k++] = (char)i;
    return gpt_vocab_from_chars(v, order, k);
}

int gpt_encode(const gpt_vocab_t* v, const char* text, size_t n, int32_t* ids, size_t* bad_at) {
    size_t i;
    for (i = 0; i < n; ++i) {
        int16_t id = v->ids[(unsigned char)text[i]];
        if (id < 0) {
            if (bad_at) *bad_at = i;
            return -1;
        }
        ids[i] = id;
    }
    return 0;
}

int gpt_decode(const gpt_vocab_t* v, const int32_t* ids, size_t n, char* text) {
    size_t i;
    for (i = 0; i < n; ++i) {
        if (ids[i] < 0 || ids[i] >= v->size) return -1;
        text[i] = (char)v->chars[ids[i]];
    }
    text[n] = '\0';
    return 0;
}

/* ---- the addition task ---- */

int gpt_addition_init(gpt_addition_t* t, int digits, int reverse) {
    static const char kChars[] = "0123456789+=";
    if (digits < 1 || digits > GPT_MAX_DIGITS) return -1;
    memset(t, 0, sizeof *t);
    t->digits = digits;
    t->reverse = reverse ? 1 : 0;
    t->seq_len = 3 * digits + 3;
    t->prompt_len = 2 * digits + 2;
    t->answer_len = digits + 1;
    gpt_vocab_from_chars(&t->vocab, kChars, sizeof kChars - 1);
    return 0;
}

uint64_t gpt_addition_operands(const gpt_addition_t* t) {
    uint64_t n = 1;
    int i;
    for (i = 0; i < t->digits; ++i) n *= 10;
    return n;
}

int gpt_addition_is_heldout(const gpt_addition_t* t, uint64_t a, uint64_t b) {
    gpt_rng_t r;
    r.s = (a * gpt_addition_operands(t) + b) ^ 0x5851F42D4C957F2Dull;
    return gpt_rng_next(&r) % 100 < 2;
}

static void write_digits(uint64_t x, int n, int reverse, char* out) {
    int i;
    for (i = n - 1; i >= 0; --i) {
        out[reverse ? n - 1 - i : i] = (char)('0' + x % 10);
        x /= 10;
    }
}

void gpt_addition_format(const gpt_addition_t* t, uint64_t a, uint64_t b, char* out) {
    int d = t->digits;
    write_digits(a, d, 0, out);
    out[d] = '+';
    write_digits(b, d, 0, out + d + 1);
    out[2 * d + 1] = '=';
    write_digits(a + b, d + 1, t->reverse, out + 2 * d + 2);
    out[t->seq_len] = '\0';
}

void gpt_addition_draw_train(const gpt_addition_t* t, gpt_rng_t* r, uint64_t* a, uint64_t* b) {
    uint64_t n = gpt_addition_operands(t);
    do {
        *a = gpt_rng_below(r, n);
        *b = gpt_rng_below(r, n);
    } while (gpt_addition_is_heldout(t, *a, *b));
}

void gpt_addition_problem_row(const gpt_addition_t* t, uint64_t a, uint64_t b, int32_t* inputs, int32_t* targets) {
    char text[3 * GPT_MAX_DIGITS + 4];
    int32_t ids[3 * GPT_MAX_DIGITS + 3];
    int j, T = t->seq_len - 1;
    gpt_addition_format(t, a, b, text);
    gpt_encode(&t->vocab, text, (size_t)t->seq_len, ids, NULL); /* the task's own bytes: always encodes */
    for (j = 0; j < T; ++j) {
        inputs[j] = ids[j];
        /* position j predicts byte j+1: an answer digit when j+1 >= prompt_len */
        targets[j] = j + 1 >= t->prompt_len ? ids[j + 1] : GPT_IGNORE;
    }
}

void gpt_addition_train_batch(const gpt_addition_t* t, gpt_rng_t* r, int batch, int32_t* inputs,
                              int32_t* targets) {
    int i, T = t->seq_len - 1;
    for (i = 0; i < batch; ++i) {
        uint64_t a, b;
        gpt_addition_draw_train(t, r, &a, &b);
        gpt_addition_problem_row(t, a, b, inputs + (size_t)i * (size_t)T, targets + (size_t)i * (size_t)T);
    }
}

uint64_t gpt_addition_heldout_count(const gpt_addition_t* t) {
    uint64_t n = gpt_addition_operands(t), a, b, count = 0;
    if (t->digits > 3) return n / 100 * n; /* half the expected 2%: the real count is far above it */
    for (a = 0; a < n; ++a)
        for (b = 0; b < n; ++b) count += (uint64_t)gpt_addition_is_heldout(t, a, b);
    return count;
}

static int cmp_u64(const void* x, const void* y) {
    uint64_t a = *(const uint64_t*)x, b = *(const uint64_t*)y;
    return a < b ? -1 : a > b;
}

int gpt_addition_heldout_set(const gpt_addition_t* t, uint64_t seed, size_t n, uint64_t* pairs) {
    uint64_t ops = gpt_addition_operands(t), a, b;
    gpt_rng_t r = gpt_rng_for(seed, 0x4E56A1u, 0);
    uint64_t* keys;
    size_t have = 0, i, k;
    if ((uint64_t)n > gpt_addition_heldout_count(t)) return -1;
    if (n == 0) return 0;
    if (t->digits <= 3) {
        /* all of them, then the first n of a seeded shuffle */
        size_t total = (size_t)gpt_addition_heldout_count(t);
        keys = (uint64_t*)malloc(total * sizeof *keys);
        if (!keys) return -1;
        for (a = 0; a < ops; ++a)
            for (b = 0; b < ops; ++b)
                if (gpt_addition_is_heldout(t, a, b)) keys[have++] = a * ops + b;
        for (i = 0; i < n; ++i) {
            uint64_t tmp;
            k = i + (size_t)gpt_rng_below(&r, (uint64_t)(total - i));
            tmp = keys[i]; keys[i] = keys[k]; keys[k] = tmp;
        }
    } else {
        /* rejection sampling; duplicates are dropped and drawn again */
        keys = (uint64_t*)malloc(n * sizeof *keys);
        if (!keys) return -1;
        while (have < n) {
            while (have < n) {
                a = gpt_rng_below(&r, ops);
                b = gpt_rng_below(&r, ops);
                if (gpt_addition_is_heldout(t, a, b)) keys[have++] = a * ops + b;
            }
            qsort(keys, have, sizeof *keys, cmp_u64);
            for (i = 1, k = 1; i < have; ++i)
                if (keys[i] != keys[k - 1]) keys[k++] = keys[i];
            have = k;
        }
    }
    for (i = 0; i < n; ++i) {
        pairs[2 * i] = keys[i] / ops;
        pairs[2 * i + 1] = keys[i] % ops;
    }
    free(keys);
    return 0;
}

int gpt_addition_read_answer(const gpt_addition_t* t, const int32_t* ids, uint64_t* value) {
    uint64_t v = 0;
    int i;
    for (i = 0; i < t->answer_len; ++i) {
        int32_t id = ids[t->reverse ? t->answer_len - 1 - i : i];
        if (id < 0 || id >= t->vocab.size || t->vocab.chars[id] < '0' || t->vocab.chars[id] > '9') return -1;
        v = v * 10 + (uint64_t)(t->vocab.chars[id] - '0');
    }
    *value = v;
    return 0;
}

/* ---- a user's text ---- */

int gpt_text_init(gpt_text_t* t, const unsigned char* text, size_t n, int block) {
    size_t held;
    memset(t, 0, sizeof *t);
    if (block < 1) return -1;
    held = n / 10;
    if (held < (size_t)block + 1) held = (size_t)block + 1;
    if (n < held + (size_t)block + 1) return -1;
    t->text = text;
    t->train_len = n - held;
    t->heldout_len = held;
    t->block = block;
    gpt_vocab_from_text(&t->vocab, text, n);
    return 0;
}

static void window(const gpt_text_t* t, size_t start, int32_t* inputs, int32_t* targets) {
    int j;
    for (j = 0; j < t->block; ++j) {
        inputs[j] = t->vocab.ids[t->text[start + (size_t)j]];
        targets[j] = t->vocab.ids[t->text[start + (size_t)j + 1]];
    }
}

void gpt_text_train_batch(const gpt_text_t* t, gpt_rng_t* r, int batch, int32_t* inputs, int32_t* targets) {
    int i;
    /* a window and its shifted targets need block+1 bytes inside the training part */
    uint64_t starts = (uint64_t)(t->train_len - (size_t)t->block);
    for (i = 0; i < batch; ++i)
        window(t, (size_t)gpt_rng_below(r, starts), inputs + (size_t)i * (size_t)t->block,
               targets + (size_t)i * (size_t)t->block);
}

void gpt_text_heldout_window(const gpt_text_t* t, int i, int count, int32_t* inputs, int32_t* targets) {
    size_t span = t->heldout_len - (size_t)t->block - 1; /* last usable start, relative */
    size_t start = count > 1 ? span * (size_t)i / (size_t)(count - 1) : 0;
    window(t, t->train_len + start, inputs, targets);
}
