/* Concurrent use of one engine (label "threads"; also run under TSan):
 *  - a call entering an engine while another thread is inside a call on it
 *    fails with DS_ERR_INVALID_STATE "concurrent call on engine (another
 *    thread is inside ds_xxx)" and changes nothing;
 *  - ds_engine_destroy while a call is inside returns at once, later calls
 *    get DS_ERR_INVALID_HANDLE, and the call inside finishes safely (the
 *    engine is freed when it leaves: run under ASan this proves no
 *    use-after-free);
 *  - several threads hammering ds_backward/ds_step: counters equal the
 *    number of DS_OK steps. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "tensor_util.h"

static const char* kConfig =
    "{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0.001}}}";

/* ---- a call held inside the engine by its own log callback --------------- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int block;   /* 1: the next log call blocks until released */
    int inside;  /* set by the callback when it blocks */
    int release;
} gate_t;

static gate_t g_gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};

static void blocking_log(int32_t level, const char* message, void* user) {
    gate_t* g = (gate_t*)user;
    (void)level;
    (void)message;
    pthread_mutex_lock(&g->mu);
    if (g->block) {
        g->block = 0;
        g->inside = 1;
        pthread_cond_broadcast(&g->cv);
        while (!g->release) pthread_cond_wait(&g->cv, &g->mu);
    }
    pthread_mutex_unlock(&g->mu);
}

static ds_status_t g_init_status = -1;

static void* init_thread(void* arg) {
    g_init_status = ds_engine_init((ds_engine_t*)arg);
    return NULL;
}

static void held_call(int destroy_inside) {
    ds_engine_t* e = NULL;
    ds_engine_options_t o;
    float w[8] = {0};
    int64_t shape[1] = {8};
    DLTensor t = f32_tensor(w, 1, shape);
    pthread_t th;
    int64_t v = 0;
    int32_t r = 0;

    ds_engine_options_init(&o, sizeof o);
    o.log_callback = blocking_log;
    o.log_user_data = &g_gate;
    o.log_level = DS_LOG_INFO; /* ds_engine_init logs "engine initialized" at INFO */
    EXPECT_OK(ds_engine_create(kConfig, &o, &e));
    EXPECT_OK(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE));

    pthread_mutex_lock(&g_gate.mu);
    g_gate.block = 1;
    g_gate.inside = 0;
    g_gate.release = 0;
    pthread_mutex_unlock(&g_gate.mu);
    CHECK(pthread_create(&th, NULL, init_thread, e) == 0);
    pthread_mutex_lock(&g_gate.mu);
    while (!g_gate.inside) pthread_cond_wait(&g_gate.cv, &g_gate.mu);
    pthread_mutex_unlock(&g_gate.mu);

    /* The other thread is inside ds_engine_init now. */
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_step(e, NULL), "concurrent call on engine", "ds_engine_init");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_engine_add_param(e, "x", &t, DS_PARAM_TRAINABLE),
                  "concurrent call on engine");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_engine_global_steps(e, &v), "concurrent call on engine");
    if (destroy_inside) {
        ds_engine_destroy(e); /* must return without waiting for the call inside */
        EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_rank(e, &r), "not a live engine");
        EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_step(e, NULL), "not a live engine");
        ds_engine_destroy(e); /* a second destroy is harmless */
    }
    pthread_mutex_lock(&g_gate.mu);
    g_gate.release = 1;
    pthread_cond_broadcast(&g_gate.cv);
    pthread_mutex_unlock(&g_gate.mu);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK(g_init_status == DS_OK);
    if (!destroy_inside) {
        /* Nothing the refused calls tried happened; the engine works. */
        int64_t n = 0;
        EXPECT_OK(ds_engine_num_params(e, &n));
        CHECK(n == 1);
        EXPECT_OK(ds_backward(e, NULL));
        EXPECT_OK(ds_step(e, NULL));
        EXPECT_OK(ds_engine_global_steps(e, &v));
        CHECK(v == 1);
        ds_engine_destroy(e);
    }
}

/* ---- const getters run together ------------------------------------------ */

typedef struct {
    ds_engine_t* e;
    int iters;
    int ok;
    int concurrent;  /* DS_ERR_INVALID_STATE "concurrent call" */
    int other;       /* anything else that is not an expected ordering error */
} worker_t;

static void* getter_worker(void* arg) {
    worker_t* w = (worker_t*)arg;
    int i;
    for (i = 0; i < w->iters; ++i) {
        int64_t v;
        double lr;
        if (ds_engine_global_steps(w->e, &v) == DS_OK && ds_engine_get_lr(w->e, &lr) == DS_OK) ++w->ok;
        else ++w->other;
    }
    return NULL;
}

static void getters_share(void) {
    ds_engine_t* e = NULL;
    float wv[4] = {0};
    int64_t shape[1] = {4};
    DLTensor t = f32_tensor(wv, 1, shape);
    pthread_t th[4];
    worker_t w[4];
    int i;
    EXPECT_OK(ds_engine_create(kConfig, NULL, &e));
    EXPECT_OK(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_init(e));
    for (i = 0; i < 4; ++i) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].e = e;
        w[i].iters = 2000;
        CHECK(pthread_create(&th[i], NULL, getter_worker, &w[i]) == 0);
    }
    for (i = 0; i < 4; ++i) {
        CHECK(pthread_join(th[i], NULL) == 0);
        CHECK(w[i].ok == w[i].iters && w[i].other == 0);
    }
    ds_engine_destroy(e);
}

/* ---- many threads stepping one engine -------------------------------------- */

static pthread_barrier_t g_start;

static void* step_worker(void* arg) {
    worker_t* w = (worker_t*)arg;
    int i;
    pthread_barrier_wait(&g_start); /* all threads start together */
    for (i = 0; i < w->iters; ++i) {
        ds_status_t s = ds_backward(w->e, NULL);
        if (s == DS_ERR_INVALID_STATE && strstr(ds_last_error(), "concurrent call on engine")) ++w->concurrent;
        else if (s != DS_OK) ++w->other;
        s = ds_step(w->e, NULL);
        if (s == DS_OK) ++w->ok;
        else if (s == DS_ERR_INVALID_STATE && strstr(ds_last_error(), "concurrent call on engine"))
            ++w->concurrent;
        else if (!(s == DS_ERR_INVALID_STATE && strstr(ds_last_error(), "ds_backward")))
            ++w->other; /* "no ds_backward since the last ds_step": another thread took it */
    }
    return NULL;
}

static void hammer_steps(void) {
    enum { kThreads = 4 };
    ds_engine_t* e = NULL;
    static float wv[1 << 16];
    int64_t shape[1] = {1 << 16};
    DLTensor t = f32_tensor(wv, 1, shape);
    pthread_t th[kThreads];
    worker_t w[kThreads];
    int i, ok = 0, other = 0, concurrent = 0;
    CHECK(pthread_barrier_init(&g_start, NULL, kThreads) == 0);
    int64_t global = -1, micro = -1;
    EXPECT_OK(ds_engine_create(kConfig, NULL, &e));
    EXPECT_OK(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_init(e));
    for (i = 0; i < kThreads; ++i) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].e = e;
        w[i].iters = 300;
        CHECK(pthread_create(&th[i], NULL, step_worker, &w[i]) == 0);
    }
    for (i = 0; i < kThreads; ++i) {
        CHECK(pthread_join(th[i], NULL) == 0);
        ok += w[i].ok;
        other += w[i].other;
        concurrent += w[i].concurrent;
    }
    pthread_barrier_destroy(&g_start);
    CHECK(other == 0);
    EXPECT_OK(ds_engine_global_steps(e, &global));
    EXPECT_OK(ds_engine_micro_steps(e, &micro));
    CHECK(global == ok && micro == ok);
    CHECK(ok > 0);
    printf("hammer: %d DS_OK steps, counters %lld/%lld, %d concurrent entries refused\n", ok,
           (long long)global, (long long)micro, concurrent);
    ds_engine_destroy(e);
}

/* ---- destroy racing a checkpoint save ------------------------------------ */

typedef struct {
    ds_engine_t* e;
    const char* dir;
    int saves;
} saver_t;

static void* save_worker(void* arg) {
    saver_t* s = (saver_t*)arg;
    int i;
    for (i = 0; i < 50; ++i) {
        ds_status_t st = ds_save_checkpoint(s->e, s->dir, "t", NULL);
        if (st == DS_ERR_INVALID_HANDLE) break; /* destroyed: expected */
        if (st == DS_OK) ++s->saves;
    }
    return NULL;
}

static void destroy_races_save(void) {
    static float big[1 << 20]; /* 4 MB of weights */
    int64_t shape[1] = {1 << 20};
    DLTensor t = f32_tensor(big, 1, shape);
    char dir[] = "/tmp/ds_threads_XXXXXX";
    saver_t s;
    pthread_t th;
    ds_engine_t* e = NULL;
    char cmd[64];
    CHECK(mkdtemp(dir) != NULL);
    EXPECT_OK(ds_engine_create(kConfig, NULL, &e));
    EXPECT_OK(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_init(e));
    s.e = e;
    s.dir = dir;
    s.saves = 0;
    CHECK(pthread_create(&th, NULL, save_worker, &s) == 0);
    {
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    ds_engine_destroy(e); /* most likely while a save is inside */
    CHECK(pthread_join(th, NULL) == 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

int main(void) {
    held_call(0);
    held_call(1);
    getters_share();
    hammer_steps();
    destroy_races_save();
    return ds_test_finish();
}
