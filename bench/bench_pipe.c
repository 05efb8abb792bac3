/* The pipeline's bubble: a built-in GPT split into one stage per rank
 * (pipeline.stages = world size, no data parallelism) trains batches of M
 * micro-batches through ds_train_batch (DeepSpeed's 1F1B TrainSchedule), for
 * several M. Per stage and M it prints the measured idle fraction,
 * 1 - (the stage's forward, backward and optimizer time) / (the batch's wall
 * time), i.e. the share of the batch it waited on a neighbour or a collective, the
 * median over the timed batches, beside the schedule's theoretical bubble
 * (S-1)/(M+S-1), and the share of the stage's compute spent recomputing
 * forwards (every stage but the last recomputes a micro-batch's forward
 * before its backward: docs/PIPELINE.md). Public C ABI only.
 *
 *   OMP_NUM_THREADS=1 mpirun -np 2 bench_pipe [--layers 8 --embd 256 --heads 4 --vocab 4096
 *                                              --micro 4 --seq 64 --batches 5 --max-m 16]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_c_util.h"
#include "bench_machine.h"
#include "deepspeed_c.h"

int main(int argc, char** argv) {
    const long layers = arg_long(argc, argv, "--layers", 8), embd = arg_long(argc, argv, "--embd", 256);
    const long heads = arg_long(argc, argv, "--heads", 4), vocab = arg_long(argc, argv, "--vocab", 4096);
    const long micro = arg_long(argc, argv, "--micro", 4), seq = arg_long(argc, argv, "--seq", 64);
    const long batches = arg_long(argc, argv, "--batches", 5), max_m = arg_long(argc, argv, "--max-m", 16);
    ds_comm_t* world;
    int32_t rank, W;
    long M, b, i;
    CHECK(ds_comm_create_world(NULL, &world));
    CHECK(ds_comm_rank(world, &rank));
    CHECK(ds_comm_size(world, &W));
    if (rank == 0) {
        bench_print_cpu();
        printf("GPT L=%ld C=%ld H=%ld V=%ld, micro-batch %ld x %ld tokens; %d stages (one per rank), %ld timed "
               "batches per M after one warm-up\n",
               layers, embd, heads, vocab, micro, seq, W, batches);
        printf("%4s %6s %10s", "M", "stage", "theory");
        printf(" %10s %10s %12s %12s\n", "idle", "idle/th", "recompute", "tokens/s");
    }
    for (M = 1; M <= max_m; M *= 2) {
        char spec[1024], config[1024];
        ds_model_t* model;
        ds_engine_t* engine;
        ds_engine_options_t o;
        ds_pipe_info_t info;
        const long rows = M * micro;
        int32_t* ids = malloc(sizeof(int32_t) * (size_t)(rows * seq));
        int32_t* tg = malloc(sizeof(int32_t) * (size_t)(rows * seq));
        int64_t shape[2];
        DLTensor in, t;
        double* idle = malloc(sizeof(double) * (size_t)batches);
        double* wall = malloc(sizeof(double) * (size_t)batches);
        double* rec = malloc(sizeof(double) * (size_t)batches);
        double mine[3], all[3 * 64];
        DLTensor mt, at;
        int64_t mshape[1] = {3}, ashape[1];
        snprintf(spec, sizeof spec,
                 "{\"type\": \"gpt\", \"vocab_size\": %ld, \"block_size\": %ld, \"n_layer\": %ld, \"n_head\": %ld, "
                 "\"n_embd\": %ld, \"pipeline\": {\"stages\": %d}}",
                 vocab, seq, layers, heads, embd, W);
        snprintf(config, sizeof config,
                 "{\"train_micro_batch_size_per_gpu\": %ld, \"gradient_accumulation_steps\": %ld, "
                 "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.0001}}}",
                 micro, M);
        CHECK(ds_model_create(spec, &model));
        ds_engine_options_init(&o, sizeof o);
        o.comm = world;
        o.log_level = DS_LOG_WARN;
        CHECK(ds_engine_create_with_model(config, model, &o, &engine));
        for (i = 0; i < rows * seq; ++i) {
            ids[i] = (int32_t)((i * 7 + 3) % vocab);
            tg[i] = (int32_t)((i * 7 + 4) % vocab);
        }
        shape[0] = rows;
        shape[1] = seq;
        memset(&in, 0, sizeof in);
        in.data = ids;
        in.device.device_type = kDLCPU;
        in.ndim = 2;
        in.dtype.code = kDLInt;
        in.dtype.bits = 32;
        in.dtype.lanes = 1;
        in.shape = shape;
        t = in;
        t.data = tg;
        info.struct_size = sizeof info;
        CHECK(ds_train_batch(engine, &in, &t, NULL, NULL));  /* warm-up */
        for (b = 0; b < batches; ++b) {
            CHECK(ds_train_batch(engine, &in, &t, NULL, NULL));
            CHECK(ds_engine_pipe_info(engine, &info));
            wall[b] = info.batch_seconds;
            idle[b] = 1.0 - info.compute_seconds / info.batch_seconds;
            rec[b] = info.compute_seconds > 0 ? info.recompute_seconds / info.compute_seconds : 0.0;
        }
        qsort(idle, (size_t)batches, sizeof(double), cmp_double);
        qsort(wall, (size_t)batches, sizeof(double), cmp_double);
        qsort(rec, (size_t)batches, sizeof(double), cmp_double);
        mine[0] = idle[batches / 2];
        mine[1] = wall[batches / 2];
        mine[2] = rec[batches / 2];
        /* Every stage's medians to rank 0 (as bytes: the collectives take fp32 or integers). */
        memset(&mt, 0, sizeof mt);
        mt.data = mine;
        mt.device.device_type = kDLCPU;
        mt.ndim = 1;
        mt.dtype.code = kDLUInt;
        mt.dtype.bits = 8;
        mt.dtype.lanes = 1;
        mshape[0] = (int64_t)sizeof mine;
        mt.shape = mshape;
        at = mt;
        at.data = all;
        ashape[0] = (int64_t)sizeof mine * W;
        at.shape = ashape;
        if (W > 64) {
            fprintf(stderr, "bench_pipe: at most 64 ranks\n");
            return 1;
        }
        CHECK(ds_comm_all_gather_into_tensor(world, &at, &mt));
        if (rank == 0) {
            const double theory = (double)(W - 1) / (double)(M + W - 1);
            for (i = 0; i < W; ++i) {
                const double* s = all + 3 * i;
                printf("%4ld %6ld %10.3f %10.3f %10.2f %12.3f %12.0f\n", M, i, theory, s[0],
                       theory > 0 ? s[0] / theory : 0.0, s[2], (double)(rows * seq) / s[1]);
            }
        }
        ds_engine_destroy(engine);
        ds_model_destroy(model);
        free(ids);
        free(tg);
        free(idle);
        free(wall);
        free(rec);
    }
    ds_comm_destroy(world);
    return 0;
}
