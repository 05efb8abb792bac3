/*
 * gpt_options.h — the command line of examples/train_gpt.c, parsed and
 * checked: each bad option gets a message naming it (the program exits 2).
 */
#ifndef GPT_OPTIONS_H
#define GPT_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    int n_layer, n_head, n_embd;  /* model size */
    int steps;                    /* optimizer steps to reach (a resumed run continues to it) */
    int batch;                    /* rows per rank (per replica with --pipe or --tp) and optimizer step */
    double lr;                    /* peak learning rate */
    int zero;                     /* ZeRO stage (1 by default with --pipe > 1) */
    int pipe;                     /* pipeline stages (1: data parallel only) */
    int micro_batches;            /* --pipe > 1: micro-batches per step (gradient_accumulation_steps) */
    int tp;                       /* tensor-parallel ranks sharing every transformer layer (1: off) */
    int moe_experts;              /* experts of the MoE layer replacing every 2nd MLP (0: no MoE) */
    int ep_size;                  /* expert parallelism: ranks sharing each MoE layer's experts (1: off) */
    const char* dtype;            /* fp32 | fp16 | bf16 */
    const char* config;           /* --config FILE replaces the embedded config, or NULL */
    const char* resume;           /* checkpoint directory to continue from, or NULL */
    const char* save;             /* checkpoint directory (default <out>/checkpoints) */
    int save_every;               /* also save every N steps (0: only at the end) */
    const char* text;             /* train on this file instead of the addition task, or NULL */
    int block_size;               /* --text: characters per sequence */
    int digits;                   /* addition: operand digits */
    int eval_problems;            /* held-out problems (or --text windows) evaluated */
    uint64_t seed;                /* data, initialisation and evaluation seed */
    const char* out;              /* run directory: monitor CSVs, loss.png, checkpoints */
    char save_buf[4096];
} gpt_options_t;

/* 0: parsed; 1: --help was asked for; -1: a bad option, err says which. */
int gpt_options_parse(int argc, char** argv, gpt_options_t* o, char* err, size_t err_len);
void gpt_options_usage(FILE* f, const char* prog);

#endif /* GPT_OPTIONS_H */
