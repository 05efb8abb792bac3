/* C API test for ds_pipe_schedule_*: the instruction streams of every
 * schedule in tests/data/pipe/schedules.txt (written by DeepSpeed's own
 * schedule.py, tests/tools/gen_pipe_fixtures.py: TrainSchedule,
 * InferenceSchedule and DataParallelSchedule for stages 1-5, micro-batches
 * 1, 2, 3, 4, 8, every stage) must equal ours instruction by instruction;
 * the 1F1B bubble counted from the schedule must be (S-1)/(M+S-1); sends
 * and receives of neighbouring stages must pair up within a step; every
 * documented error. Prints the 1F1B timelines of a few pipelines. */
#include <stdint.h>

#include "check.h"

#define MAX_INSTRS 4096

typedef struct {
    int32_t step, buffer_id, micro_batch;
    char name[32];
} expected_t;

static int kind_of(const char* name) {
    if (strcmp(name, "train") == 0) return DS_PIPE_SCHEDULE_TRAIN;
    if (strcmp(name, "inference") == 0) return DS_PIPE_SCHEDULE_INFERENCE;
    if (strcmp(name, "data_parallel") == 0) return DS_PIPE_SCHEDULE_DATA_PARALLEL;
    return -1;
}

static ds_pipe_instr_t fresh(void) {
    ds_pipe_instr_t i;
    memset(&i, 0, sizeof i);
    i.struct_size = sizeof i;
    return i;
}

/* One fixture block against ds_pipe_schedule_next and the random-access calls. */
static void compare(int kind, int32_t stages, int32_t mbs, int32_t stage, int32_t want_buffers, int32_t want_steps,
                    const expected_t* want, int n) {
    ds_pipe_schedule_t* s = NULL;
    ds_pipe_instr_t in = fresh();
    int32_t v = -1, done = 0, pass, k, t, total = 0;
    EXPECT_OK(ds_pipe_schedule_create(kind, mbs, stages, stage, &s));
    if (!s) return;
    EXPECT_OK(ds_pipe_schedule_num_buffers(s, &v));
    CHECK(v == want_buffers);
    EXPECT_OK(ds_pipe_schedule_num_steps(s, &v));
    CHECK(v == want_steps);
    for (pass = 0; pass < 2; ++pass) { /* the second pass after a reset */
        for (k = 0; k <= n; ++k) {
            EXPECT_OK(ds_pipe_schedule_next(s, &in, &done));
            if (k == n) {
                CHECK(done == 1);
                break;
            }
            if (done || in.step != want[k].step || strcmp(ds_pipe_instr_name(in.type), want[k].name) != 0 ||
                in.buffer_id != want[k].buffer_id || in.micro_batch != want[k].micro_batch) {
                ++ds_test_failed;
                fprintf(stderr, "kind %d S=%d M=%d stage %d instruction %d: got step %d %s(%d) mb %d, want step %d %s(%d) mb %d\n",
                        kind, stages, mbs, stage, k, in.step, ds_pipe_instr_name(in.type), in.buffer_id, in.micro_batch,
                        want[k].step, want[k].name, want[k].buffer_id, want[k].micro_batch);
                break;
            }
            ++ds_test_passed;
        }
        EXPECT_OK(ds_pipe_schedule_next(s, &in, &done)); /* stays done */
        CHECK(done == 1);
        EXPECT_OK(ds_pipe_schedule_reset(s));
    }
    /* random access gives the same stream */
    k = 0;
    for (t = 0; t < want_steps; ++t) {
        int32_t size = -1, i;
        EXPECT_OK(ds_pipe_schedule_step_size(s, t, &size));
        for (i = 0; i < size; ++i, ++k) {
            EXPECT_OK(ds_pipe_schedule_instr(s, t, i, &in));
            CHECK(k < n && in.step == t && strcmp(ds_pipe_instr_name(in.type), want[k].name) == 0 &&
                  in.buffer_id == want[k].buffer_id);
        }
        total += size;
    }
    CHECK(total == n);
    ds_pipe_schedule_destroy(s);
}

static void test_fixture(void) {
    static expected_t want[MAX_INSTRS];
    char path[1024], line[256];
    const char* dir = getenv("DS_TEST_DATA_DIR");
    FILE* f;
    int blocks = 0, n = 0, kind = -1;
    int32_t stages = 0, mbs = 0, stage = 0, buffers = 0, steps = 0;
    CHECK(dir != NULL);
    if (!dir) return;
    snprintf(path, sizeof path, "%s/pipe/schedules.txt", dir);
    f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        char kname[32];
        if (line[0] == 'S') {
            CHECK(sscanf(line, "S %31s %d %d %d %d %d", kname, &stages, &mbs, &stage, &buffers, &steps) == 6);
            kind = kind_of(kname);
            CHECK(kind >= 0);
            n = 0;
        } else if (line[0] == 'I') {
            CHECK(n < MAX_INSTRS);
            if (n >= MAX_INSTRS) break;
            CHECK(sscanf(line, "I %d %31s %d %d", &want[n].step, want[n].name, &want[n].buffer_id,
                         &want[n].micro_batch) == 4);
            ++n;
        } else if (line[0] == 'E') {
            compare(kind, stages, mbs, stage, buffers, steps, want, n);
            ++blocks;
        }
    }
    fclose(f);
    /* 3 kinds x (1+2+3+4+5 stage ids) x 5 micro-batch counts */
    CHECK(blocks == 3 * 15 * 5);
    printf("compared %d schedules with DeepSpeed's\n", blocks);
}

/* The instructions of `step` of stage `stage` of a train schedule, as types. */
static int step_has(ds_pipe_schedule_t* s, int32_t step, int32_t type, int32_t* mb) {
    int32_t size = 0, i;
    ds_pipe_instr_t in = fresh();
    ds_pipe_schedule_step_size(s, step, &size);
    for (i = 0; i < size; ++i) {
        ds_pipe_schedule_instr(s, step, i, &in);
        if (in.type == type) {
            if (mb) *mb = in.micro_batch;
            return 1;
        }
    }
    return 0;
}

/* Bubble fraction and send/receive pairing, for pipelines up to 8 stages x 16 micro-batches. */
static void test_bubble_and_pairing(void) {
    int32_t S, M, s, t;
    for (S = 1; S <= 8; ++S) {
        for (M = 1; M <= 16; ++M) {
            ds_pipe_schedule_t* st[8] = {0};
            int32_t steps = 0;
            for (s = 0; s < S; ++s) EXPECT_OK(ds_pipe_schedule_create(DS_PIPE_SCHEDULE_TRAIN, M, S, s, &st[s]));
            ds_pipe_schedule_num_steps(st[0], &steps);
            CHECK(steps == 2 * (M + S - 1));
            for (s = 0; s < S; ++s) {
                int32_t idle = 0, fwd = 0, bwd = 0;
                for (t = 0; t < steps; ++t) {
                    int f = step_has(st[s], t, DS_PIPE_INSTR_FORWARD_PASS, NULL);
                    int b = step_has(st[s], t, DS_PIPE_INSTR_BACKWARD_PASS, NULL);
                    fwd += f;
                    bwd += b;
                    idle += !f && !b;
                }
                CHECK(fwd == M && bwd == M);
                /* idle / steps == (S-1)/(M+S-1), in integers */
                CHECK((int64_t)idle * (M + S - 1) == (int64_t)(S - 1) * steps);
            }
            for (s = 0; s + 1 < S; ++s) {
                for (t = 0; t < steps; ++t) {
                    int32_t a = -1, b = -2;
                    /* activations: stage s sends what stage s+1 receives, in the same step */
                    int send = step_has(st[s], t, DS_PIPE_INSTR_SEND_ACTIVATION, &a);
                    int recv = step_has(st[s + 1], t, DS_PIPE_INSTR_RECV_ACTIVATION, &b);
                    CHECK(send == recv);
                    if (send && recv) CHECK(a == b);
                    /* gradients: stage s+1 sends what stage s receives */
                    a = -1, b = -2;
                    send = step_has(st[s + 1], t, DS_PIPE_INSTR_SEND_GRAD, &a);
                    recv = step_has(st[s], t, DS_PIPE_INSTR_RECV_GRAD, &b);
                    CHECK(send == recv);
                    if (send && recv) CHECK(a == b);
                }
            }
            for (s = 0; s < S; ++s) ds_pipe_schedule_destroy(st[s]);
        }
    }
    printf("1F1B bubble = (S-1)/(M+S-1) on every stage, S 1..8, M 1..16; e.g. S=4, M=8: %.4f\n", 3.0 / 11.0);
}

/* Prints stage x step timelines: F3 = forward of micro-batch 3, B3 backward, . idle. */
static void print_timeline(int32_t S, int32_t M) {
    int32_t s, t, steps = 2 * (M + S - 1);
    printf("TrainSchedule stages=%d micro_batches=%d (steps %d)\n", S, M, steps);
    for (s = 0; s < S; ++s) {
        ds_pipe_schedule_t* st = NULL;
        EXPECT_OK(ds_pipe_schedule_create(DS_PIPE_SCHEDULE_TRAIN, M, S, s, &st));
        printf("  stage %d:", s);
        for (t = 0; t < steps; ++t) {
            int32_t mb = -1;
            if (step_has(st, t, DS_PIPE_INSTR_FORWARD_PASS, &mb)) printf(" F%-2d", mb);
            else if (step_has(st, t, DS_PIPE_INSTR_BACKWARD_PASS, &mb)) printf(" B%-2d", mb);
            else printf(" .  ");
        }
        printf("\n");
        ds_pipe_schedule_destroy(st);
    }
}

static void print_stream(int kind, int32_t S, int32_t M, int32_t s) {
    ds_pipe_schedule_t* st = NULL;
    ds_pipe_instr_t in = fresh();
    int32_t done = 0, last = -1;
    EXPECT_OK(ds_pipe_schedule_create(kind, M, S, s, &st));
    printf("kind %d stages=%d micro_batches=%d stage %d:", kind, S, M, s);
    for (;;) {
        EXPECT_OK(ds_pipe_schedule_next(st, &in, &done));
        if (done) break;
        if (in.step != last) printf("\n  step %2d:", in.step);
        last = in.step;
        printf(" %s(%d)", ds_pipe_instr_name(in.type), in.buffer_id);
    }
    printf("\n");
    ds_pipe_schedule_destroy(st);
}

static void test_errors(void) {
    ds_pipe_schedule_t* s = (ds_pipe_schedule_t*)(void*)&s;
    ds_pipe_instr_t in = fresh();
    int32_t v = 0, done = 0;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_schedule_create(7, 4, 2, 0, &s), "kind 7");
    CHECK(s == NULL);
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_schedule_create(DS_PIPE_SCHEDULE_TRAIN, 0, 2, 0, &s), "micro_batches = 0");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_schedule_create(DS_PIPE_SCHEDULE_TRAIN, 4, 0, 0, &s), "stages = 0");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_schedule_create(DS_PIPE_SCHEDULE_TRAIN, 4, 2, 2, &s), "stage_id = 2");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_schedule_create(DS_PIPE_SCHEDULE_TRAIN, 4, 2, -1, &s), "stage_id = -1");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT,
                  ds_pipe_schedule_create(DS_PIPE_SCHEDULE_TRAIN, 2000000000, 2000000000, 0, &s), "steps");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_schedule_create(DS_PIPE_SCHEDULE_TRAIN, 4, 2, 0, NULL), "'out'");
    EXPECT_OK(ds_pipe_schedule_create(DS_PIPE_SCHEDULE_TRAIN, 4, 2, 0, &s));
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_schedule_next(s, NULL, &done), "'out'");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_schedule_next(s, &in, NULL), "'done'");
    in.struct_size = 8;
    EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_pipe_schedule_next(s, &in, &done), "struct_size");
    EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_pipe_schedule_instr(s, 0, 0, &in), "struct_size");
    in.struct_size = sizeof in;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_schedule_step_size(s, 10, &v), "step 10");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_schedule_step_size(s, -1, &v), "step -1");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_schedule_instr(s, 1, 1, &in), "'index' = 1");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_schedule_num_buffers(s, NULL), "'out'");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_schedule_num_steps(s, NULL), "'out'");
    /* a larger struct from a newer caller: the bytes past what we know are zeroed */
    {
        struct { ds_pipe_instr_t base; int64_t future; } big;
        memset(&big, 0x7F, sizeof big);
        big.base.struct_size = sizeof big;
        EXPECT_OK(ds_pipe_schedule_next(s, &big.base, &done));
        CHECK(done == 0 && big.future == 0 && big.base.type == DS_PIPE_INSTR_LOAD_MICRO_BATCH && big.base.step == 0);
    }
    ds_pipe_schedule_destroy(s);
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_pipe_schedule_next(s, &in, &done), "'schedule'", "not a live");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_pipe_schedule_num_steps(NULL, &v), "'schedule'", "NULL");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_pipe_schedule_reset(NULL), "'schedule'");
    ds_pipe_schedule_destroy(s);    /* twice: harmless */
    ds_pipe_schedule_destroy(NULL); /* harmless */
    CHECK(strcmp(ds_pipe_instr_name(0), "?") == 0);
    CHECK(strcmp(ds_pipe_instr_name(11), "?") == 0);
    CHECK(strcmp(ds_pipe_instr_name(DS_PIPE_INSTR_REDUCE_TIED_GRADS), "ReduceTiedGrads") == 0);
}

int main(void) {
    test_fixture();
    test_bubble_and_pairing();
    test_errors();
    print_timeline(2, 4);
    print_timeline(4, 8);
    print_stream(DS_PIPE_SCHEDULE_TRAIN, 2, 4, 0);
    print_stream(DS_PIPE_SCHEDULE_TRAIN, 2, 4, 1);
    print_stream(DS_PIPE_SCHEDULE_INFERENCE, 3, 4, 1);
    return ds_test_finish();
}
