/* C API: host-driven training. Every documented misuse status of the
 * parameter/gradient/step functions, plus small exact checks (SGD update,
 * counters over an accumulation window, fp16 overflow skip). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "tensor_util.h"

static const char* kAdam =
    "{\"train_batch_size\": 4, \"gradient_accumulation_steps\": 2,"
    " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}}}";

static void test_misuse(void) {
    ds_engine_t* e = NULL;
    float w[6] = {1, 2, 3, 4, 5, 6}, g[6] = {0}, out[6];
    int64_t shape[2] = {2, 3}, bad_shape[2] = {3, 2}, neg[2] = {2, -3};
    DLTensor tw = f32_tensor(w, 2, shape), tg = f32_tensor(g, 2, shape);
    DLTensor tout = f32_tensor(out, 2, shape);
    DLTensor view;
    ds_step_info_t info;
    double lr;
    int32_t flag;

    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_add_param(NULL, "w", &tw, DS_PARAM_TRAINABLE), "engine");
    EXPECT_OK(ds_engine_create(kAdam, NULL, &e));
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_add_param(e, NULL, &tw, DS_PARAM_TRAINABLE), "name");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_add_param(e, "", &tw, DS_PARAM_TRAINABLE), "empty");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_add_param(e, "w", NULL, DS_PARAM_TRAINABLE), "init");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_add_param(e, "w", &tw, 0x80u), "flag");
    {
        DLTensor bad = f32_tensor(w, 2, neg);
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_add_param(e, "w", &bad, DS_PARAM_TRAINABLE),
                      "shape[1]", "'w'");
        bad = f32_tensor(w, 2, shape);
        bad.dtype.lanes = 4;
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_add_param(e, "w", &bad, DS_PARAM_TRAINABLE), "lanes");
        bad = f32_tensor(w, 2, shape);
        bad.ndim = -1;
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_add_param(e, "w", &bad, DS_PARAM_TRAINABLE), "ndim");
    }
    /* calls before init */
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_backward(e, NULL), "ds_engine_init");
    info.struct_size = sizeof info;
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_step(e, &info), "ds_engine_init");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_engine_accumulate_grad(e, "w", &tg), "ds_engine_init");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_engine_param_view(e, "w", &view), "ds_engine_init");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_engine_get_full_fp32_param(e, "w", &tout), "ds_engine_init");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_engine_init(e), "no parameters");

    EXPECT_OK(ds_engine_add_param(e, "w", &tw, DS_PARAM_TRAINABLE));
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_add_param(e, "w", &tw, DS_PARAM_TRAINABLE), "already");
    EXPECT_OK(ds_engine_add_param(e, "frozen", &tw, 0));
    EXPECT_OK(ds_engine_init(e));
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_engine_init(e), "twice");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_engine_add_param(e, "late", &tw, DS_PARAM_TRAINABLE),
                  "after ds_engine_init");

    /* lookups and tensor checks */
    EXPECT_STATUS(DS_ERR_NOT_FOUND, ds_engine_accumulate_grad(e, "nope", &tg), "'nope'");
    EXPECT_STATUS(DS_ERR_NOT_FOUND, ds_engine_param_view(e, "nope", &view), "'nope'");
    EXPECT_STATUS(DS_ERR_NOT_FOUND, ds_engine_grad_view(e, "nope", &view), "'nope'");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_param_view(e, "w", NULL), "out");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_accumulate_grad(e, "w", NULL), "grad");
    {
        DLTensor wrong = f32_tensor(g, 2, bad_shape);
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_accumulate_grad(e, "w", &wrong), "shape", "'w'");
        wrong = make_tensor(g, 2, shape, kDLInt, 32);
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_accumulate_grad(e, "w", &wrong), "dtype");
        wrong = f32_tensor(g, 2, shape);
        wrong.device.device_type = kDLCUDA;
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_accumulate_grad(e, "w", &wrong), "device");
    }
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_accumulate_grad(e, "frozen", &tg), "frozen");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_grad_view(e, "frozen", &view), "frozen");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_get_full_grad(e, "frozen", &tout), "frozen");
    EXPECT_STATUS(DS_ERR_NOT_FOUND, ds_engine_get_full_optimizer_state(e, "w", "momentum", &tout),
                  "momentum", "exp_avg");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_get_full_optimizer_state(e, "w", NULL, &tout), "key");
    {
        uint16_t h[6];
        DLTensor half = make_tensor(h, 2, shape, kDLFloat, 16);
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_get_full_fp32_param(e, "w", &half), "dtype");
        half = f32_tensor(out, 2, bad_shape);
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_set_full_fp32_param(e, "w", &half), "shape");
    }

    /* step order */
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_step(e, &info), "ds_backward");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_backward(e, &tg), "out_grad");
    EXPECT_OK(ds_backward(e, NULL));
    info.struct_size = 4;
    EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_step(e, &info), "struct_size");
    info.struct_size = sizeof info;
    EXPECT_OK(ds_step(e, &info)); /* micro-step 1 of 2: not a boundary */
    CHECK(info.stepped == 0 && info.global_step == 0);
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_step(e, NULL), "ds_backward");

    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_set_lr(e, -1.0), "lr");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_set_lr(e, NAN), "lr");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_get_lr(e, NULL), "out");
    EXPECT_OK(ds_engine_get_lr(e, &lr));
    CHECK(lr == 0.01);
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_set_gradient_accumulation_boundary(e, 2), "value");
    EXPECT_OK(ds_engine_is_gradient_accumulation_boundary(e, &flag));
    CHECK(flag == 1);
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_skipped_steps(NULL, NULL), "engine");
    ds_engine_destroy(e);
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_step(e, &info), "not a live engine");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_init(e), "not a live engine");
}

static void test_no_optimizer(void) {
    ds_engine_t* e = NULL;
    float w[3] = {1, 2, 3};
    int64_t shape[1] = {3};
    DLTensor tw = f32_tensor(w, 1, shape);
    EXPECT_OK(ds_engine_create("{\"train_batch_size\": 1}", NULL, &e));
    EXPECT_OK(ds_engine_add_param(e, "w", &tw, DS_PARAM_TRAINABLE));
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG, ds_engine_init(e), "optimizer");
    ds_engine_destroy(e);
    /* frozen-only model needs no optimizer */
    EXPECT_OK(ds_engine_create("{\"train_batch_size\": 1}", NULL, &e));
    EXPECT_OK(ds_engine_add_param(e, "w", &tw, 0));
    EXPECT_OK(ds_engine_init(e));
    ds_engine_destroy(e);
}

/* SGD without momentum or clipping: p -= lr * mean of the window's grads. */
static void test_sgd_exact_and_counters(void) {
    ds_engine_t* e = NULL;
    float w[4] = {1.0f, -2.0f, 0.5f, 4.0f}, g1[4] = {1, 2, 3, 4}, g2[4] = {3, 2, 1, 0}, out[4];
    int64_t shape[1] = {4}, v = 0;
    DLTensor tw = f32_tensor(w, 1, shape), t1 = f32_tensor(g1, 1, shape), t2 = f32_tensor(g2, 1, shape);
    DLTensor tout = f32_tensor(out, 1, shape), view;
    ds_step_info_t info;
    int i;
    info.struct_size = sizeof info;
    EXPECT_OK(ds_engine_create("{\"train_micro_batch_size_per_gpu\": 3, \"gradient_accumulation_steps\": 2,"
                               " \"gradient_clipping\": 0,"
                               " \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.5}}}", NULL, &e));
    EXPECT_OK(ds_engine_add_param(e, "w", &tw, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_init(e));
    EXPECT_OK(ds_engine_accumulate_grad(e, "w", &t1));
    EXPECT_OK(ds_backward(e, NULL));
    EXPECT_OK(ds_step(e, &info));
    CHECK(info.stepped == 0);
    EXPECT_OK(ds_engine_get_full_grad(e, "w", &tout));
    for (i = 0; i < 4; ++i) CHECK(out[i] == g1[i] / 2.0f);
    EXPECT_OK(ds_engine_accumulate_grad(e, "w", &t2));
    EXPECT_OK(ds_backward(e, NULL));
    EXPECT_OK(ds_step(e, &info));
    CHECK(info.stepped == 1 && info.skipped == 0 && info.global_step == 1 && info.lr == 0.5);
    CHECK(fabs(info.grad_norm - sqrt(4.0 + 4.0 + 4.0 + 4.0)) < 1e-12);
    EXPECT_OK(ds_engine_get_full_fp32_param(e, "w", &tout));
    for (i = 0; i < 4; ++i) CHECK(out[i] == w[i] - 0.5f * ((g1[i] + g2[i]) / 2.0f));
    EXPECT_OK(ds_engine_param_view(e, "w", &view));
    CHECK(view.ndim == 1 && view.shape[0] == 4 && view.dtype.code == kDLFloat && view.dtype.bits == 32);
    CHECK(memcmp(view.data, out, sizeof out) == 0);
    EXPECT_OK(ds_engine_get_full_grad(e, "w", &tout)); /* zeroed after the step */
    for (i = 0; i < 4; ++i) CHECK(out[i] == 0.0f);
    EXPECT_OK(ds_engine_global_steps(e, &v));
    CHECK(v == 1);
    EXPECT_OK(ds_engine_micro_steps(e, &v));
    CHECK(v == 2);
    EXPECT_OK(ds_engine_global_samples(e, &v));
    CHECK(v == 6);
    EXPECT_OK(ds_engine_skipped_steps(e, &v));
    CHECK(v == 0);
    /* forced boundary persists */
    EXPECT_OK(ds_engine_set_gradient_accumulation_boundary(e, 1));
    EXPECT_OK(ds_backward(e, NULL));
    EXPECT_OK(ds_step(e, &info));
    CHECK(info.stepped == 1);
    EXPECT_OK(ds_backward(e, NULL));
    EXPECT_OK(ds_step(e, &info));
    CHECK(info.stepped == 1 && info.global_step == 3);
    ds_engine_destroy(e);
}

/* fp16: an Inf gradient skips the step; weights, master and moments unchanged. */
static void test_fp16_overflow_skip(void) {
    ds_engine_t* e = NULL;
    float w[3] = {0.5f, -1.0f, 2.0f}, g[3] = {1, 1, 1}, before[3], after[3], m0[3], m1[3];
    uint16_t gh[3];
    uint16_t w16_before[3];
    int64_t shape[1] = {3}, skipped = 0;
    DLTensor tw = f32_tensor(w, 1, shape), tg, tb = f32_tensor(before, 1, shape), ta = f32_tensor(after, 1, shape);
    DLTensor tm0 = f32_tensor(m0, 1, shape), tm1 = f32_tensor(m1, 1, shape), view;
    ds_step_info_t info;
    float scale = 0;
    int i;
    info.struct_size = sizeof info;
    EXPECT_OK(ds_engine_create("{\"train_batch_size\": 1, \"fp16\": {\"enabled\": true, \"hysteresis\": 1,"
                               " \"initial_scale_power\": 8},"
                               " \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0.1}}}", NULL, &e));
    EXPECT_OK(ds_engine_add_param(e, "w", &tw, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_init(e));
    EXPECT_OK(ds_engine_loss_scale(e, &scale));
    CHECK(scale == 256.0f);
    /* one clean step so the moments are non-zero */
    for (i = 0; i < 3; ++i) gh[i] = f32_to_f16_bits(g[i] * scale);
    tg = make_tensor(gh, 1, shape, kDLFloat, 16);
    EXPECT_OK(ds_engine_accumulate_grad(e, "w", &tg));
    EXPECT_OK(ds_backward(e, NULL));
    EXPECT_OK(ds_step(e, &info));
    CHECK(info.stepped == 1 && info.skipped == 0);
    CHECK(fabs(info.grad_norm - sqrt(3.0)) < 1e-6);
    EXPECT_OK(ds_engine_get_full_fp32_param(e, "w", &tb));
    EXPECT_OK(ds_engine_get_full_optimizer_state(e, "w", "exp_avg", &tm0));
    EXPECT_OK(ds_engine_param_view(e, "w", &view));
    CHECK(view.dtype.bits == 16 && view.dtype.code == kDLFloat);
    memcpy(w16_before, view.data, sizeof w16_before);
    /* now an Inf in one gradient */
    gh[1] = 0x7C00u;
    EXPECT_OK(ds_engine_accumulate_grad(e, "w", &tg));
    EXPECT_OK(ds_backward(e, NULL));
    EXPECT_OK(ds_step(e, &info));
    CHECK(info.stepped == 1 && info.skipped == 1 && info.loss_scale == 128.0f && info.global_step == 2);
    EXPECT_OK(ds_engine_get_full_fp32_param(e, "w", &ta));
    EXPECT_OK(ds_engine_get_full_optimizer_state(e, "w", "exp_avg", &tm1));
    CHECK(memcmp(before, after, sizeof before) == 0);
    CHECK(memcmp(m0, m1, sizeof m0) == 0);
    EXPECT_OK(ds_engine_param_view(e, "w", &view));
    CHECK(memcmp(w16_before, view.data, sizeof w16_before) == 0);
    EXPECT_OK(ds_engine_skipped_steps(e, &skipped));
    CHECK(skipped == 1);
    ds_engine_destroy(e);
}

int main(void) {
    test_misuse();
    test_no_optimizer();
    test_sgd_exact_and_counters();
    test_fp16_overflow_skip();
    return ds_test_finish();
}
