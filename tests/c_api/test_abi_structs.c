/* ABI v0 struct evolution: frozen sizes and offsets, a truncated "old"
 * struct, an exact V0 one, an oversized "new" one with a zero tail (accepted)
 * and a non-zero tail (DS_ERR_ABI_MISMATCH naming the struct and offset),
 * non-zero reserved fields, and output structs larger than the library
 * knows (written up to the known size, the caller's extra bytes zeroed). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "tensor_util.h"

/* Compile-time: the v0 layouts never change (C99: a negative array size fails). */
#define STATIC_CHECK(name, cond) typedef char static_check_##name[(cond) ? 1 : -1]
STATIC_CHECK(eo_size, sizeof(ds_engine_options_t) == DS_ENGINE_OPTIONS_SIZE_V0 && DS_ENGINE_OPTIONS_SIZE_V0 == 56);
STATIC_CHECK(eo_comm, offsetof(ds_engine_options_t, comm) == 8);
STATIC_CHECK(eo_device, offsetof(ds_engine_options_t, device) == 16);
STATIC_CHECK(eo_stream, offsetof(ds_engine_options_t, cuda_stream) == 24);
STATIC_CHECK(eo_cb, offsetof(ds_engine_options_t, log_callback) == 32);
STATIC_CHECK(eo_user, offsetof(ds_engine_options_t, log_user_data) == 40);
STATIC_CHECK(eo_level, offsetof(ds_engine_options_t, log_level) == 48);
STATIC_CHECK(eo_res, offsetof(ds_engine_options_t, reserved0) == 52);
STATIC_CHECK(si_size, sizeof(ds_step_info_t) == DS_STEP_INFO_SIZE_V0 && DS_STEP_INFO_SIZE_V0 == 48);
STATIC_CHECK(si_stepped, offsetof(ds_step_info_t, stepped) == 8);
STATIC_CHECK(si_skipped, offsetof(ds_step_info_t, skipped) == 12);
STATIC_CHECK(si_scale, offsetof(ds_step_info_t, loss_scale) == 16);
STATIC_CHECK(si_res, offsetof(ds_step_info_t, reserved0) == 20);
STATIC_CHECK(si_norm, offsetof(ds_step_info_t, grad_norm) == 24);
STATIC_CHECK(si_lr, offsetof(ds_step_info_t, lr) == 32);
STATIC_CHECK(si_gs, offsetof(ds_step_info_t, global_step) == 40);
STATIC_CHECK(co_size, sizeof(ds_comm_options_t) == DS_COMM_OPTIONS_SIZE_V0 && DS_COMM_OPTIONS_SIZE_V0 == 24);
STATIC_CHECK(co_timeout, offsetof(ds_comm_options_t, timeout_ms) == 8);
STATIC_CHECK(co_debug, offsetof(ds_comm_options_t, debug) == 12);
STATIC_CHECK(co_backend, offsetof(ds_comm_options_t, backend) == 16);
STATIC_CHECK(co_device, offsetof(ds_comm_options_t, device) == 20);
STATIC_CHECK(mr_size, sizeof(ds_memory_report_t) == DS_MEMORY_REPORT_SIZE_V0 && DS_MEMORY_REPORT_SIZE_V0 == 56);
STATIC_CHECK(mr_peak, offsetof(ds_memory_report_t, peak_total_bytes) == 48);
STATIC_CHECK(pi_size, sizeof(ds_param_info_t) == DS_PARAM_INFO_SIZE_V0 && DS_PARAM_INFO_SIZE_V0 == 48);
STATIC_CHECK(pi_name, offsetof(ds_param_info_t, name) == 8);
STATIC_CHECK(pi_shape, offsetof(ds_param_info_t, shape) == 16);
STATIC_CHECK(pi_ndim, offsetof(ds_param_info_t, ndim) == 24);
STATIC_CHECK(pi_flags, offsetof(ds_param_info_t, flags) == 28);
STATIC_CHECK(pi_dtype, offsetof(ds_param_info_t, dtype) == 32);
STATIC_CHECK(pi_res, offsetof(ds_param_info_t, reserved0) == 36);
STATIC_CHECK(pi_numel, offsetof(ds_param_info_t, numel) == 40);
STATIC_CHECK(pp_size, sizeof(ds_pipe_info_t) == DS_PIPE_INFO_SIZE_V0 && DS_PIPE_INFO_SIZE_V0 == 64);
STATIC_CHECK(pp_stage, offsetof(ds_pipe_info_t, stage_id) == 8);
STATIC_CHECK(pp_stages, offsetof(ds_pipe_info_t, num_stages) == 12);
STATIC_CHECK(pp_first, offsetof(ds_pipe_info_t, first_layer) == 16);
STATIC_CHECK(pp_last, offsetof(ds_pipe_info_t, last_layer) == 20);
STATIC_CHECK(pp_layers, offsetof(ds_pipe_info_t, num_layers) == 24);
STATIC_CHECK(pp_micro, offsetof(ds_pipe_info_t, micro_batches) == 28);
STATIC_CHECK(pp_dp, offsetof(ds_pipe_info_t, data_parallel_size) == 32);
STATIC_CHECK(pp_res, offsetof(ds_pipe_info_t, reserved0) == 36);
STATIC_CHECK(pp_batch, offsetof(ds_pipe_info_t, batch_seconds) == 40);
STATIC_CHECK(pp_compute, offsetof(ds_pipe_info_t, compute_seconds) == 48);
STATIC_CHECK(pp_recompute, offsetof(ds_pipe_info_t, recompute_seconds) == 56);

static const char* kConfig =
    "{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.1}}}";

/* A "new" caller's options: the v0 struct followed by fields this library lacks. */
typedef struct {
    ds_engine_options_t v0;
    int64_t future_field;
    int64_t future_field2;
} engine_options_v9_t;

static void engine_options(void) {
    ds_engine_t* e = NULL;
    ds_engine_options_t o;
    engine_options_v9_t big;
    unsigned char raw[128];
    size_t i;

    /* Exactly V0. */
    ds_engine_options_init(&o, DS_ENGINE_OPTIONS_SIZE_V0);
    CHECK(o.struct_size == DS_ENGINE_OPTIONS_SIZE_V0 && o.reserved0 == 0 && o.log_level == DS_UNSET_I32);
    EXPECT_OK(ds_engine_create(kConfig, &o, &e));
    ds_engine_destroy(e);

    /* Truncated "old" struct (before log_level existed, say). */
    ds_engine_options_init(&o, sizeof o);
    o.struct_size = offsetof(ds_engine_options_t, log_level);
    EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_engine_create(kConfig, &o, &e), "options.struct_size = 48", "56");
    CHECK(e == NULL);

    /* Non-zero reserved field. */
    ds_engine_options_init(&o, sizeof o);
    o.reserved0 = 7;
    EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_engine_create(kConfig, &o, &e), "options.reserved0", "offset 52");

    /* Oversized with a zero tail: options_init zeroes the tail, create accepts it. */
    memset(&big, 0xAB, sizeof big);
    ds_engine_options_init(&big.v0, sizeof big);
    CHECK(big.v0.struct_size == sizeof big && big.future_field == 0 && big.future_field2 == 0);
    CHECK(big.v0.reserved0 == 0);
    EXPECT_OK(ds_engine_create(kConfig, &big.v0, &e));
    ds_engine_destroy(e);

    /* Oversized with a non-zero tail: a field this library does not know is set. */
    big.future_field2 = 1;
    EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_engine_create(kConfig, &big.v0, &e), "options: byte at offset 64",
                  "first 56 bytes");
    CHECK(e == NULL);

    /* An absurd struct_size is refused, not scanned. */
    ds_engine_options_init(&o, sizeof o);
    o.struct_size = (size_t)1 << 40;
    EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_engine_create(kConfig, &o, &e), "options.struct_size");

    /* options_init writes nothing past struct_size. */
    memset(raw, 0x5A, sizeof raw);
    ds_engine_options_init((ds_engine_options_t*)(void*)raw, 24);
    for (i = 24; i < sizeof raw; ++i) CHECK(raw[i] == 0x5A);
}

static void comm_options(void) {
    struct {
        ds_comm_options_t v0;
        int32_t future;
        int32_t future2;
    } big;
    ds_comm_options_t o;
    ds_comm_t* c = NULL;

    ds_comm_options_init(&o, sizeof o);
    o.struct_size = 16;
    EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_comm_create_world(&o, &c), "options.struct_size = 16");
    memset(&big, 0xEE, sizeof big);
    ds_comm_options_init(&big.v0, sizeof big);
    CHECK(big.future == 0 && big.future2 == 0);
    big.v0.backend = DS_COMM_BACKEND_LOCAL;
    EXPECT_OK(ds_comm_create_world(&big.v0, &c));
    ds_comm_destroy(c);
    c = NULL;
    big.future = 3;
    EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_comm_create_world(&big.v0, &c), "options: byte at offset 24");
    CHECK(c == NULL);
}

static ds_engine_t* ready_engine(void) {
    ds_engine_t* e = NULL;
    float w[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4};
    DLTensor t = f32_tensor(w, 1, shape);
    EXPECT_OK(ds_engine_create(kConfig, NULL, &e));
    EXPECT_OK(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_init(e));
    return e;
}

static void step_info(void) {
    ds_engine_t* e = ready_engine();
    unsigned char buf[80];
    ds_step_info_t* info = (ds_step_info_t*)(void*)buf;
    int64_t steps = -1;
    size_t i;
    float g[4] = {1, 1, 1, 1};
    int64_t shape[1] = {4};
    DLTensor gt = f32_tensor(g, 1, shape);

    /* Truncated: refused before anything changes. */
    memset(buf, 0, sizeof buf);
    info->struct_size = 40;
    EXPECT_OK(ds_backward(e, NULL));
    EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_step(e, info), "info.struct_size = 40", "48");
    EXPECT_OK(ds_engine_global_steps(e, &steps));
    CHECK(steps == 0);

    /* Larger than known: the fields up to 48 are written, reserved0 and the tail zeroed. */
    memset(buf, 0xCD, sizeof buf);
    info->struct_size = 72;
    EXPECT_OK(ds_engine_accumulate_grad(e, "w", &gt));
    EXPECT_OK(ds_step(e, info));
    CHECK(info->struct_size == 72);
    CHECK(info->stepped == 1 && info->skipped == 0 && info->global_step == 1);
    CHECK(info->reserved0 == 0);
    CHECK(info->grad_norm > 1.99 && info->grad_norm < 2.01);
    for (i = DS_STEP_INFO_SIZE_V0; i < 72; ++i) CHECK(buf[i] == 0);
    for (i = 72; i < sizeof buf; ++i) CHECK(buf[i] == 0xCD); /* beyond struct_size: untouched */

    /* Exactly V0. */
    memset(buf, 0, sizeof buf);
    info->struct_size = DS_STEP_INFO_SIZE_V0;
    EXPECT_OK(ds_backward(e, NULL));
    EXPECT_OK(ds_step(e, info));
    CHECK(info->global_step == 2);
    ds_engine_destroy(e);
}

static void memory_report_and_param_info(void) {
    ds_engine_t* e = ready_engine();
    unsigned char buf[96];
    ds_memory_report_t* r = (ds_memory_report_t*)(void*)buf;
    ds_param_info_t* p = (ds_param_info_t*)(void*)buf;
    size_t i;

    memset(buf, 0x77, sizeof buf);
    r->struct_size = 48;
    EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_engine_memory_report(e, r), "out.struct_size = 48");
    r->struct_size = 88;
    EXPECT_OK(ds_engine_memory_report(e, r));
    CHECK(r->total_bytes > 0 && r->total_bytes == r->params_bytes + r->grads_bytes +
                                                      r->optimizer_state_bytes + r->buffers_bytes);
    for (i = DS_MEMORY_REPORT_SIZE_V0; i < 88; ++i) CHECK(buf[i] == 0);
    for (i = 88; i < sizeof buf; ++i) CHECK(buf[i] == 0x77);

    memset(buf, 0x77, sizeof buf);
    p->struct_size = 40;
    EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_engine_param_info(e, 0, p), "out.struct_size = 40");
    p->struct_size = 64;
    EXPECT_OK(ds_engine_param_info(e, 0, p));
    CHECK(p->reserved0 == 0 && p->numel == 4 && strcmp(p->name, "w") == 0);
    for (i = DS_PARAM_INFO_SIZE_V0; i < 64; ++i) CHECK(buf[i] == 0);
    ds_engine_destroy(e);
}

int main(void) {
    engine_options();
    comm_options();
    step_info();
    memory_report_and_param_info();
    return ds_test_finish();
}
