/* Checkpoints of sharded engines against a plain data-parallel engine of the
 * same model on the same ranks, in one run: a built-in GPT (about 110M
 * parameters by default, fp32, AdamW) as W data-parallel replicas at ZeRO-1
 * (the reference), as W pipeline stages, and as W tensor-parallel shards.
 * Every layout saves the same logical checkpoint (docs/CHECKPOINTS.md,
 * "Pipeline, tensor- and expert-parallel engines"): the stages' and shards'
 * pieces travel to their writers first, which the data-parallel engine does
 * not need. Rounds are interleaved (data, pipe, tp, data, ...); per layout it
 * prints the median save and load time (the load reads the checkpoint that
 * layout just saved, warm in the page cache) and their ratio to the
 * data-parallel engine's. Public C ABI only.
 *
 *   OMP_NUM_THREADS=1 mpirun -np 2 bench_parallel_ckpt [--layers 12 --embd 768 --heads 12 --vocab 32000
 *                                                       --rounds 5 --dir /tmp/ds_bench_pckpt]
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c99 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_c_util.h"
#include "bench_machine.h"
#include "deepspeed_c.h"

enum { kLayouts = 3, kMaxRounds = 64 };
static const char* const kNames[kLayouts] = {"data (ZeRO-1)", "pipe", "tp"};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Layout l's engine on `world` (collective). */
static ds_engine_t* make_engine(int l, ds_comm_t* world, int W, long layers, long embd, long heads, long vocab) {
    char spec[1024], config[1024], pipeline[64] = "", tp[64] = "";
    ds_model_t* model;
    ds_engine_t* e;
    ds_engine_options_t o;
    if (l == 1) snprintf(pipeline, sizeof pipeline, ", \"pipeline\": {\"stages\": %d}", W); /* a stage per rank */
    if (l == 2) snprintf(tp, sizeof tp, ", \"tensor_parallel\": {\"autotp_size\": %d}", W);
    snprintf(spec, sizeof spec,
             "{\"type\": \"gpt\", \"vocab_size\": %ld, \"block_size\": 64, \"n_layer\": %ld, \"n_head\": %ld, "
             "\"n_embd\": %ld, \"seed\": 3%s}",
             vocab, layers, heads, embd, pipeline);
    snprintf(config, sizeof config,
             "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_accumulation_steps\": 1, \"zero_optimization\": "
             "{\"stage\": %d}, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001}}%s}",
             l == 0 ? 1 : 0, tp);
    CHECK(ds_model_create(spec, &model));
    ds_engine_options_init(&o, sizeof o);
    o.comm = world;
    o.log_level = DS_LOG_WARN;
    CHECK(ds_engine_create_with_model(config, model, &o, &e));
    ds_model_destroy(model);
    return e;
}

int main(int argc, char** argv) {
    const long layers = arg_long(argc, argv, "--layers", 12), embd = arg_long(argc, argv, "--embd", 768);
    const long heads = arg_long(argc, argv, "--heads", 12), vocab = arg_long(argc, argv, "--vocab", 32000);
    const long rounds_arg = arg_long(argc, argv, "--rounds", 5);
    const int rounds = rounds_arg < 1 ? 1 : rounds_arg > kMaxRounds ? kMaxRounds : (int)rounds_arg;
    const char* dir = arg_str(argc, argv, "--dir", "/tmp/ds_bench_pckpt");
    static double save_s[kLayouts][kMaxRounds], load_s[kLayouts][kMaxRounds];
    ds_engine_t* engines[kLayouts];
    ds_comm_t* world;
    int32_t rank, W;
    int64_t params = 0;
    double ref_save = 0.0, ref_load = 0.0;
    int l, r;
    CHECK(ds_comm_create_world(NULL, &world));
    CHECK(ds_comm_rank(world, &rank));
    CHECK(ds_comm_size(world, &W));
    if (heads % W != 0 || (4 * embd) % W != 0) {
        if (rank == 0) fprintf(stderr, "--heads and 4 x --embd must be multiples of the %d ranks (tp)\n", W);
        return 2;
    }
    for (l = 0; l < kLayouts; ++l) engines[l] = make_engine(l, world, W, layers, embd, heads, vocab);
    {
        ds_model_t* m;
        char spec[512];
        snprintf(spec, sizeof spec,
                 "{\"type\": \"gpt\", \"vocab_size\": %ld, \"block_size\": 64, \"n_layer\": %ld, \"n_head\": %ld, "
                 "\"n_embd\": %ld}",
                 vocab, layers, heads, embd);
        CHECK(ds_model_create(spec, &m));
        CHECK(ds_model_num_params(m, &params));
        ds_model_destroy(m);
    }
    if (rank == 0) {
        bench_print_cpu();
        printf("GPT L=%ld C=%ld H=%ld V=%ld: %lld parameters, fp32 + AdamW (%.2f GB a checkpoint); %d ranks; "
               "%d interleaved rounds; checkpoints under %s\n",
               layers, embd, heads, vocab, (long long)params, 16.0 * (double)params / 1e9, W, rounds, dir);
    }
    for (r = 0; r < rounds; ++r)
        for (l = 0; l < kLayouts; ++l) {
            char tag[32];
            double t0;
            snprintf(tag, sizeof tag, "%s", l == 0 ? "data" : l == 1 ? "pipe" : "tp");
            CHECK(ds_comm_barrier(world));
            t0 = now_s();
            CHECK(ds_save_checkpoint(engines[l], dir, tag, NULL));
            save_s[l][r] = now_s() - t0;
            CHECK(ds_comm_barrier(world));
            t0 = now_s();
            CHECK(ds_load_checkpoint(engines[l], dir, tag, 0, NULL));
            load_s[l][r] = now_s() - t0;
        }
    if (rank == 0) {
        printf("%-16s %12s %12s %14s %14s\n", "layout", "save (s)", "load (s)", "save / data", "load / data");
        for (l = 0; l < kLayouts; ++l) {
            const double s = median_of(save_s[l], rounds), ld = median_of(load_s[l], rounds);
            if (l == 0) {
                ref_save = s;
                ref_load = ld;
            }
            printf("%-16s %12.3f %12.3f %14.2f %14.2f\n", kNames[l], s, ld, s / ref_save, ld / ref_load);
        }
    }
    for (l = 0; l < kLayouts; ++l) ds_engine_destroy(engines[l]);
    CHECK(ds_comm_finalize(world));
    ds_comm_destroy(world);
    return 0;
}
