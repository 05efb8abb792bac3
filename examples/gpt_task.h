/*
 * gpt_task.h — the data of examples/train_gpt.c: a character tokenizer, the
 * generated addition task (training/held-out split, batches with the loss
 * on the answer only) and a user's text split into training and held-out
 * parts. Plain C99, no library calls: tested on its own by test_gpt_task.c.
 *
 * The addition task. A problem is two D-digit numbers (zero-padded) and
 * their sum written as D+1 digits in reverse order (least significant digit
 * first), e.g. D = 3: 123 + 459 = 0582 is the text "123+459=2850". Reversed,
 * each answer digit depends only on the operand digits at its position and
 * on the carry the model has just written, so a small GPT learns it in a few
 * hundred steps; written most significant digit first it must compute the
 * whole carry chain before the first digit (it still learns, more slowly).
 * Every problem has the same length 3D+3, so batches need no padding.
 *
 * The split: a fixed hash of (a, b) puts 2 in 100 problems into the held-out
 * set; training never draws them, and the accuracy is measured on held-out
 * problems only (distinct, drawn with the evaluation seed).
 */
#ifndef GPT_TASK_H
#define GPT_TASK_H

#include <stddef.h>
#include <stdint.h>

/* The target value the loss ignores (PyTorch's ignore_index default). */
#define GPT_IGNORE (-100)
#define GPT_MAX_DIGITS 9

/* ---- random numbers (splitmix64: any 64-bit seed, zero included) ---- */

typedef struct { uint64_t s; } gpt_rng_t;

uint64_t gpt_rng_next(gpt_rng_t* r);
/* Uniform in [0, n), n >= 1 (rejection sampling: no modulo bias). */
uint64_t gpt_rng_below(gpt_rng_t* r, uint64_t n);
/* Uniform in [0, 1). */
double gpt_rng_unit(gpt_rng_t* r);
/* A stream for (seed, a, b): the data of one rank at one micro-step is a
 * pure function of them, so a resumed run draws what the uninterrupted run
 * would have drawn. */
gpt_rng_t gpt_rng_for(uint64_t seed, uint64_t a, uint64_t b);

/* ---- character tokenizer ---- */

typedef struct {
    int size;                 /* number of tokens */
    unsigned char chars[256]; /* token id -> byte */
    int16_t ids[256];         /* byte -> token id, -1 when not in the vocabulary */
} gpt_vocab_t;

/* The vocabulary of the given bytes in the order given (duplicates
 * ignored). Returns the size. */
int gpt_vocab_from_chars(gpt_vocab_t* v, const char* chars, size_t n);
/* The vocabulary of the distinct bytes of a text, in byte order. */
int gpt_vocab_from_text(gpt_vocab_t* v, const unsigned char* text, size_t n);
/* Encode n bytes; returns 0, or -1 (and *bad_at the index) on a byte
 * outside the vocabulary. */
int gpt_encode(const gpt_vocab_t* v, const char* text, size_t n, int32_t* ids, size_t* bad_at);
/* Decode n ids into n bytes plus a NUL; returns 0, or -1 on an id out of range. */
int gpt_decode(const gpt_vocab_t* v, const int32_t* ids, size_t n, char* text);

/* ---- the addition task ---- */

typedef struct {
    int digits;         /* D: operand digits, 1..GPT_MAX_DIGITS */
    int reverse;        /* 1: answer digits least significant first */
    int seq_len;        /* 3D + 3 tokens per problem */
    int prompt_len;     /* 2D + 2: "aaa+bbb=" */
    int answer_len;     /* D + 1 */
    gpt_vocab_t vocab;  /* "0123456789+=" */
} gpt_addition_t;

/* Returns 0, or -1 when digits is outside 1..GPT_MAX_DIGITS. */
int gpt_addition_init(gpt_addition_t* t, int digits, int reverse);
/* 10^D: the number of values an operand takes. */
uint64_t gpt_addition_operands(const gpt_addition_t* t);
/* 1 when (a, b) belongs to the held-out set. */
int gpt_addition_is_heldout(const gpt_addition_t* t, uint64_t a, uint64_t b);
/* The problem's text (seq_len bytes plus a NUL) into out. */
void gpt_addition_format(const gpt_addition_t* t, uint64_t a, uint64_t b, char* out);
/* A training problem (never a held-out one). */
void gpt_addition_draw_train(const gpt_addition_t* t, gpt_rng_t* r, uint64_t* a, uint64_t* b);
/* The row of problem (a, b): inputs [seq_len-1] are its text without the last
 * byte, targets [seq_len-1] the text shifted by one with GPT_IGNORE everywhere
 * but the answer digits. */
void gpt_addition_problem_row(const gpt_addition_t* t, uint64_t a, uint64_t b, int32_t* inputs, int32_t* targets);
/* Token ids of a batch of `batch` training problems: inputs [batch, seq_len-1]
 * are the text without its last byte, targets [batch, seq_len-1] the text
 * shifted by one with GPT_IGNORE everywhere but the answer digits. */
void gpt_addition_train_batch(const gpt_addition_t* t, gpt_rng_t* r, int batch, int32_t* inputs,
                              int32_t* targets);
/* The number of held-out problems (exact for D <= 3, where it is counted;
 * a lower bound of it beyond, where the set is too large to count). */
uint64_t gpt_addition_heldout_count(const gpt_addition_t* t);
/* n distinct held-out problems drawn with `seed`: pairs[2i], pairs[2i+1].
 * Returns 0, or -1 when n exceeds gpt_addition_heldout_count or memory runs out. */
int gpt_addition_heldout_set(const gpt_addition_t* t, uint64_t seed, size_t n, uint64_t* pairs);
/* The answer the generated tokens spell (answer_len ids, reversed when the
 * task is): returns 0 and the value, or -1 when an id is not a digit. */
int gpt_addition_read_answer(const gpt_addition_t* t, const int32_t* ids, uint64_t* value);

/* ---- a user's text ---- */

typedef struct {
    const unsigned char* text; /* borrowed */
    size_t train_len;          /* text[0, train_len) trains */
    size_t heldout_len;        /* text[train_len, train_len + heldout_len) is held out */
    int block;                 /* tokens per sequence */
    gpt_vocab_t vocab;
} gpt_text_t;

/* The last tenth of the text (at least block+1 bytes) is held out. Returns
 * 0, or -1 when the text is too short: either part needs block+1 bytes. */
int gpt_text_init(gpt_text_t* t, const unsigned char* text, size_t n, int block);
/* Random windows of the training part: inputs and next-byte targets [batch, block]. */
void gpt_text_train_batch(const gpt_text_t* t, gpt_rng_t* r, int batch, int32_t* inputs, int32_t* targets);
/* Window i of `count` evenly spaced windows of the held-out part. */
void gpt_text_heldout_window(const gpt_text_t* t, int i, int count, int32_t* inputs, int32_t* targets);

#endif /* GPT_TASK_H */
