/*
 * test_gpt_task.c — the generated task and the tokenizer of train_gpt
 * (gpt_task.h): texts checked against hand-written expectations, answers
 * against a+b computed here, the held-out split against a bitmap of the
 * whole held-out set, batches against the texts they encode.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_task.h"
#include "example_check.h"

static void test_tokenizer(void) {
    gpt_vocab_t v;
    const char* s = "hello, world\n";
    int32_t ids[64];
    char back[64];
    size_t bad = 0;
    unsigned char bytes[256];
    int i;
    CHECK(gpt_vocab_from_chars(&v, "abcab", 5) == 3);
    CHECK(v.chars[0] == 'a' && v.chars[2] == 'c' && v.ids['b'] == 1 && v.ids['z'] == -1);
    /* a text's vocabulary: its distinct bytes in byte order */
    CHECK(gpt_vocab_from_text(&v, (const unsigned char*)s, strlen(s)) == 10);
    CHECK(v.chars[0] == '\n' && v.chars[1] == ' ' && v.chars[2] == ',' && v.chars[9] == 'w');
    CHECK(gpt_encode(&v, s, strlen(s), ids, &bad) == 0);
    CHECK(gpt_decode(&v, ids, strlen(s), back) == 0 && strcmp(back, s) == 0);
    CHECK(gpt_encode(&v, "hex", 3, ids, &bad) == -1 && bad == 2);
    ids[0] = 10;
    CHECK(gpt_decode(&v, ids, 1, back) == -1);
    ids[0] = -1;
    CHECK(gpt_decode(&v, ids, 1, back) == -1);
    /* every byte value round-trips */
    for (i = 0; i < 256; ++i) bytes[i] = (unsigned char)(255 - i);
    CHECK(gpt_vocab_from_text(&v, bytes, 256) == 256);
    {
        int32_t all[256];
        char text[257];
        CHECK(gpt_encode(&v, (const char*)bytes, 256, all, NULL) == 0);
        CHECK(all[0] == 255 && all[255] == 0);
        CHECK(gpt_decode(&v, all, 256, text) == 0 && memcmp(text, bytes, 256) == 0);
    }
}

static void test_format(void) {
    gpt_addition_t t, f;
    char s[64];
    CHECK(gpt_addition_init(&t, 0, 1) == -1);
    CHECK(gpt_addition_init(&t, GPT_MAX_DIGITS + 1, 1) == -1);
    CHECK(gpt_addition_init(&t, 3, 1) == 0 && gpt_addition_init(&f, 3, 0) == 0);
    CHECK(t.seq_len == 12 && t.prompt_len == 8 && t.answer_len == 4 && t.vocab.size == 12);
    CHECK(gpt_addition_operands(&t) == 1000);
    gpt_addition_format(&t, 123, 459, s); CHECK(strcmp(s, "123+459=2850") == 0);
    gpt_addition_format(&f, 123, 459, s); CHECK(strcmp(s, "123+459=0582") == 0);
    gpt_addition_format(&t, 999, 999, s); CHECK(strcmp(s, "999+999=8991") == 0);
    gpt_addition_format(&t, 0, 7, s);     CHECK(strcmp(s, "000+007=7000") == 0);
    CHECK(gpt_addition_init(&t, 9, 1) == 0);
    gpt_addition_format(&t, 999999999ull, 1ull, s);
    CHECK(strcmp(s, "999999999+000000001=0000000001") == 0);
}

static void test_read_answer(void) {
    gpt_addition_t t, f;
    int32_t ids[4] = {2, 8, 5, 0};
    uint64_t v = 0;
    gpt_addition_init(&t, 3, 1);
    gpt_addition_init(&f, 3, 0);
    CHECK(gpt_addition_read_answer(&t, ids, &v) == 0 && v == 582);
    CHECK(gpt_addition_read_answer(&f, ids, &v) == 0 && v == 2850);
    ids[1] = 10; /* '+' */
    CHECK(gpt_addition_read_answer(&t, ids, &v) == -1);
    ids[1] = 99;
    CHECK(gpt_addition_read_answer(&t, ids, &v) == -1);
}

/* The held-out set: about 2%, disjoint from every training draw, the
 * evaluation set distinct and inside it. */
static void test_split(void) {
    gpt_addition_t t;
    uint64_t count, i, *all, *some, *again, *other;
    unsigned char* held = (unsigned char*)calloc(1000000, 1);
    gpt_rng_t r = gpt_rng_for(7, 0, 0);
    int same = 1;
    gpt_addition_init(&t, 3, 1);
    count = gpt_addition_heldout_count(&t);
    CHECK(count > 15000 && count < 25000);
    all = (uint64_t*)malloc(count * 2 * sizeof *all);
    CHECK(held && all && gpt_addition_heldout_set(&t, 1, (size_t)count, all) == 0);
    for (i = 0; i < count; ++i) {
        uint64_t key = all[2 * i] * 1000 + all[2 * i + 1];
        CHECK(held[key] == 0); /* distinct */
        held[key] = 1;
    }
    CHECK(gpt_addition_heldout_set(&t, 1, (size_t)count + 1, all) == -1);
    for (i = 0; i < 300000; ++i) {
        uint64_t a, b;
        gpt_addition_draw_train(&t, &r, &a, &b);
        CHECK(a < 1000 && b < 1000);
        if (held[a * 1000 + b]) { CHECK(!"a training draw is held out"); break; }
    }
    /* evaluation sets: distinct held-out problems, a function of the seed */
    some = (uint64_t*)malloc(2000 * sizeof *some);
    again = (uint64_t*)malloc(2000 * sizeof *again);
    other = (uint64_t*)malloc(2000 * sizeof *other);
    CHECK(gpt_addition_heldout_set(&t, 5, 1000, some) == 0);
    CHECK(gpt_addition_heldout_set(&t, 5, 1000, again) == 0);
    CHECK(gpt_addition_heldout_set(&t, 6, 1000, other) == 0);
    CHECK(memcmp(some, again, 2000 * sizeof *some) == 0);
    for (i = 0; i < 2000; ++i) same &= some[i] == other[i];
    CHECK(!same);
    for (i = 0; i < 1000; ++i) {
        uint64_t key = some[2 * i] * 1000 + some[2 * i + 1];
        CHECK(held[key] == 1);
        held[key] = 2;
    }
    for (i = 0; i < 1000; ++i) CHECK(held[some[2 * i] * 1000 + some[2 * i + 1]] == 2); /* distinct */
    /* beyond 3 digits the set is sampled: still distinct and held out */
    gpt_addition_init(&t, 5, 1);
    CHECK(gpt_addition_heldout_set(&t, 3, 1000, some) == 0);
    for (i = 0; i < 1000; ++i) {
        uint64_t j;
        CHECK(some[2 * i] < 100000 && some[2 * i + 1] < 100000);
        CHECK(gpt_addition_is_heldout(&t, some[2 * i], some[2 * i + 1]));
        for (j = 0; j < i; ++j) CHECK(some[2 * j] != some[2 * i] || some[2 * j + 1] != some[2 * i + 1]);
    }
    free(held); free(all); free(some); free(again); free(other);
}

/* A batch encodes whole problems; the loss sees only the answer digits. */
static void test_batch(void) {
    gpt_addition_t t;
    enum { B = 64 };
    int32_t in[B * 11], tg[B * 11], in2[B * 11], ids[12];
    char text[13];
    gpt_rng_t r = gpt_rng_for(1, 0, 5), r2 = gpt_rng_for(1, 0, 5), r3 = gpt_rng_for(1, 1, 5);
    int i, j;
    gpt_addition_init(&t, 3, 1);
    gpt_addition_train_batch(&t, &r, B, in, tg);
    for (i = 0; i < B; ++i) {
        unsigned a, b, sum, rev = 0;
        for (j = 0; j < 11; ++j) ids[j] = in[i * 11 + j];
        ids[11] = tg[i * 11 + 10];
        CHECK(gpt_decode(&t.vocab, ids, 12, text) == 0);
        CHECK(sscanf(text, "%3u+%3u=%4u", &a, &b, &sum) == 3 && text[3] == '+' && text[7] == '=');
        for (j = 11; j >= 8; --j) rev = rev * 10 + (unsigned)(text[j] - '0');
        CHECK(rev == a + b);
        CHECK(!gpt_addition_is_heldout(&t, a, b));
        for (j = 0; j < 11; ++j) {
            if (j < 7) CHECK(tg[i * 11 + j] == GPT_IGNORE);
            else CHECK(tg[i * 11 + j] == ids[j + 1]);
        }
    }
    gpt_addition_train_batch(&t, &r2, B, in2, tg);
    CHECK(memcmp(in, in2, sizeof in) == 0); /* same stream, same batch */
    gpt_addition_train_batch(&t, &r3, B, in2, tg);
    CHECK(memcmp(in, in2, sizeof in) != 0); /* another rank, another batch */
}

/* One problem's row, against its text written out here by hand. */
static void test_problem_row(void) {
    gpt_addition_t t;
    int32_t in[11], tg[11];
    const char* text = "123+459=2850"; /* vocab "0123456789+=": a digit is its own id, '+' 10, '=' 11 */
    int j;
    gpt_addition_init(&t, 3, 1);
    gpt_addition_problem_row(&t, 123, 459, in, tg);
    for (j = 0; j < 11; ++j) {
        int id = text[j] == '+' ? 10 : text[j] == '=' ? 11 : text[j] - '0';
        CHECK(in[j] == id);
        CHECK(tg[j] == (j >= 7 ? text[j + 1] - '0' : GPT_IGNORE));
    }
}

static void test_rng(void) {
    gpt_rng_t r = gpt_rng_for(0, 0, 0);
    int hist[10] = {0}, i;
    double u;
    for (i = 0; i < 100000; ++i) {
        uint64_t x = gpt_rng_below(&r, 10);
        CHECK(x < 10);
        hist[x]++;
    }
    for (i = 0; i < 10; ++i) CHECK(hist[i] > 9500 && hist[i] < 10500);
    for (i = 0; i < 1000; ++i) {
        u = gpt_rng_unit(&r);
        CHECK(u >= 0.0 && u < 1.0);
    }
}

static int find(const unsigned char* hay, size_t n, const char* needle, size_t m) {
    size_t i;
    for (i = 0; i + m <= n; ++i)
        if (!memcmp(hay + i, needle, m)) return (int)i;
    return -1;
}

static void test_text(void) {
    unsigned char text[2000];
    gpt_text_t t;
    gpt_rng_t r = gpt_rng_for(3, 0, 0);
    enum { BLOCK = 16, B = 32 };
    int32_t in[B * BLOCK], tg[B * BLOCK];
    char s[BLOCK + 2];
    int i, j;
    for (i = 0; i < 2000; ++i) text[i] = (unsigned char)("the quick brown fox\n"[i % 20] + (i / 200) % 3);
    CHECK(gpt_text_init(&t, text, 2 * BLOCK + 1, BLOCK) == -1); /* too short for two parts */
    CHECK(gpt_text_init(&t, text, 2 * BLOCK + 2, BLOCK) == 0);
    CHECK(t.heldout_len == BLOCK + 1 && t.train_len == BLOCK + 1);
    CHECK(gpt_text_init(&t, text, 2000, BLOCK) == 0);
    CHECK(t.train_len == 1800 && t.heldout_len == 200);
    gpt_text_train_batch(&t, &r, B, in, tg);
    for (i = 0; i < B; ++i) {
        int32_t ids[BLOCK + 1];
        int at;
        for (j = 0; j < BLOCK; ++j) ids[j] = in[i * BLOCK + j];
        ids[BLOCK] = tg[i * BLOCK + BLOCK - 1];
        for (j = 0; j + 1 < BLOCK; ++j) CHECK(tg[i * BLOCK + j] == in[i * BLOCK + j + 1]);
        CHECK(gpt_decode(&t.vocab, ids, BLOCK + 1, s) == 0);
        at = find(text, t.train_len, s, BLOCK + 1); /* inside the training part */
        CHECK(at >= 0);
    }
    for (i = 0; i < 8; ++i) {
        int32_t ids[BLOCK + 1];
        gpt_text_heldout_window(&t, i, 8, in, tg);
        for (j = 0; j < BLOCK; ++j) ids[j] = in[j];
        ids[BLOCK] = tg[BLOCK - 1];
        CHECK(gpt_decode(&t.vocab, ids, BLOCK + 1, s) == 0);
        CHECK(find(text + t.train_len, t.heldout_len, s, BLOCK + 1) >= 0); /* inside the held-out part */
    }
}

int main(void) {
    test_tokenizer();
    test_format();
    test_read_answer();
    test_split();
    test_batch();
    test_problem_row();
    test_rng();
    test_text();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("gpt_task: all checks passed\n");
    return 0;
}
