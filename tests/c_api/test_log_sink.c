/* The library-wide log sink (ds_set_log_callback): a communicator's message
 * (which went to stderr through the global logger before) reaches it; an
 * engine without its own callback logs into it; an engine's own
 * options.log_callback overrides it; NULL restores the default; setting it
 * while other threads log is atomic (fn and user_data travel together). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tensor_util.h"

typedef struct {
    int calls;
    int matched;
    const char* needle;
    int tag;  /* each sink's user_data carries its own tag */
    int bad_user;
} sink_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static void sink_fn(int32_t level, const char* message, void* user) {
    sink_t* s = (sink_t*)user;
    (void)level;
    pthread_mutex_lock(&g_mu);
    ++s->calls;
    if (s->needle && strstr(message, s->needle)) ++s->matched;
    pthread_mutex_unlock(&g_mu);
}

/* Checks the user_data it receives is the one set with it. */
static void tagged_fn_a(int32_t level, const char* message, void* user) {
    sink_t* s = (sink_t*)user;
    (void)level;
    (void)message;
    pthread_mutex_lock(&g_mu);
    ++s->calls;
    if (s->tag != 'a') ++s->bad_user;
    pthread_mutex_unlock(&g_mu);
}
static void tagged_fn_b(int32_t level, const char* message, void* user) {
    sink_t* s = (sink_t*)user;
    (void)level;
    (void)message;
    pthread_mutex_lock(&g_mu);
    ++s->calls;
    if (s->tag != 'b') ++s->bad_user;
    pthread_mutex_unlock(&g_mu);
}

static const char* kConfig =
    "{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.1}}}";

static void comm_message_reaches_sink(void) {
    sink_t s;
    ds_comm_options_t o;
    ds_comm_t* c = NULL;
    memset(&s, 0, sizeof s);
    s.needle = "abort-from-log-test";
    ds_set_log_callback(sink_fn, &s);
    ds_comm_options_init(&o, sizeof o);
    o.backend = DS_COMM_BACKEND_LOCAL;
    EXPECT_OK(ds_comm_create_world(&o, &c));
    EXPECT_OK(ds_comm_abort(c, "abort-from-log-test"));
    CHECK(s.matched == 1);
    ds_comm_destroy(c);

    /* NULL restores the default: the sink hears nothing more. */
    ds_set_log_callback(NULL, NULL);
    EXPECT_OK(ds_comm_create_world(&o, &c));
    EXPECT_OK(ds_comm_abort(c, "abort-from-log-test"));
    CHECK(s.matched == 1);
    ds_comm_destroy(c);
}

static void engine_messages(void) {
    sink_t global, own;
    ds_engine_options_t o;
    ds_engine_t* e = NULL;
    float w[2] = {1, 2};
    int64_t shape[1] = {2};
    DLTensor t = f32_tensor(w, 1, shape);
    memset(&global, 0, sizeof global);
    memset(&own, 0, sizeof own);
    global.needle = "engine initialized";
    own.needle = "engine initialized";
    ds_set_log_callback(sink_fn, &global);

    /* No callback of its own: the engine's messages go to the global sink. */
    ds_engine_options_init(&o, sizeof o);
    o.log_level = DS_LOG_INFO;
    EXPECT_OK(ds_engine_create(kConfig, &o, &e));
    EXPECT_OK(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_init(e));
    ds_engine_destroy(e);
    CHECK(global.matched == 1);

    /* Its own callback overrides the global sink. */
    o.log_callback = sink_fn;
    o.log_user_data = &own;
    EXPECT_OK(ds_engine_create(kConfig, &o, &e));
    EXPECT_OK(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_init(e));
    ds_engine_destroy(e);
    CHECK(own.matched == 1);
    CHECK(global.matched == 1);
    ds_set_log_callback(NULL, NULL);
}

/* Threads log (communicator aborts) while the main thread swaps sinks. */
static void* logging_thread(void* arg) {
    int i;
    ds_comm_options_t o;
    (void)arg;
    ds_comm_options_init(&o, sizeof o);
    o.backend = DS_COMM_BACKEND_LOCAL;
    for (i = 0; i < 200; ++i) {
        ds_comm_t* c = NULL;
        if (ds_comm_create_world(&o, &c) == DS_OK) {
            ds_comm_abort(c, "x");
            ds_comm_destroy(c);
        }
    }
    return NULL;
}

static void swap_while_logging(void) {
    sink_t a, b;
    pthread_t th[2];
    int i;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.tag = 'a';
    b.tag = 'b';
    ds_set_log_callback(tagged_fn_a, &a);
    CHECK(pthread_create(&th[0], NULL, logging_thread, NULL) == 0);
    CHECK(pthread_create(&th[1], NULL, logging_thread, NULL) == 0);
    for (i = 0; i < 2000; ++i) {
        if (i % 2) ds_set_log_callback(tagged_fn_a, &a);
        else ds_set_log_callback(tagged_fn_b, &b);
    }
    CHECK(pthread_join(th[0], NULL) == 0);
    CHECK(pthread_join(th[1], NULL) == 0);
    ds_set_log_callback(NULL, NULL);
    CHECK(a.bad_user == 0 && b.bad_user == 0);
    CHECK(a.calls + b.calls == 400); /* every message went to exactly one sink */
}

int main(void) {
    /* ctest runs the C API tests with DS_LOG_LEVEL=off; the global logger
     * reads the level once, so set it before anything logs. */
    setenv("DS_LOG_LEVEL", "warn", 1);
    comm_message_reaches_sink();
    engine_messages();
    swap_while_logging();
    return ds_test_finish();
}
