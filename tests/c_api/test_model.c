/* Built-in models through the C ABI: a small GPT from a spec trains; bad
 * specs are refused naming the key; ds_forward/ds_backward call-order
 * errors; eval turns dropout off; the non-scalar backward with out_grad =
 * dloss/dlogits (computed here in double) equals the scalar backward; a
 * checkpoint resumes bit for bit with dropout on; fp16 and bf16 train. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tensor_util.h"

#define B 2
#define T 8
#define V 16
#define C 16
#define L 2

static const char* kSpec =
    "{\"type\": \"gpt\", \"vocab_size\": 16, \"block_size\": 8, \"n_layer\": 2, \"n_head\": 2, "
    "\"n_embd\": 16, \"dropout\": 0.1, \"seed\": 5}";

static char* config(const char* extra) {
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"train_micro_batch_size_per_gpu\": %d, \"gradient_accumulation_steps\": 1, "
             "\"optimizer\": {\"type\": \"adamw\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.0}}%s}",
             B, extra);
    return buf;
}

static int32_t ids[B * T], targets[B * T];
static int64_t ids_shape[2] = {B, T};

static void make_batch(void) {
    int i;
    for (i = 0; i < B * T; ++i) {
        ids[i] = (int32_t)((i * 7 + 3) % V);
        targets[i] = (int32_t)((i * 5 + 1) % V);
    }
}

static DLTensor inputs[2];
static void set_inputs(void) {
    inputs[0] = make_tensor(ids, 2, ids_shape, kDLInt, 32);
    inputs[1] = make_tensor(targets, 2, ids_shape, kDLInt, 32);
}

static float step_loss(ds_engine_t* e) {
    float loss = NAN;
    DLTensor out = f32_tensor(&loss, 0, NULL);
    EXPECT_OK(ds_forward(e, inputs, 2, &out));
    EXPECT_OK(ds_backward(e, NULL));
    EXPECT_OK(ds_step(e, NULL));
    return loss;
}

static ds_engine_t* engine_for(const char* spec, const char* extra) {
    ds_model_t* m = NULL;
    ds_engine_t* e = NULL;
    EXPECT_OK(ds_model_create(spec, &m));
    EXPECT_OK(ds_engine_create_with_model(config(extra), m, NULL, &e));
    ds_model_destroy(m); /* the engine keeps it */
    return e;
}

static void test_param_count(void) {
    ds_model_t* m = NULL;
    int64_t n = 0;
    /* GPT-2: wte V*C + wpe T*C; per layer ln_1 2C, c_attn 3C*C+3C, attn.c_proj C*C+C,
     * ln_2 2C, c_fc 4C*C+4C, mlp.c_proj 4C*C+C; ln_f 2C; lm_head tied. */
    const int64_t layer = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) + (4 * C * C + C);
    EXPECT_OK(ds_model_create(kSpec, &m));
    EXPECT_OK(ds_model_num_params(m, &n));
    CHECK(n == V * C + T * C + L * layer + 2 * C);
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_model_num_params(m, NULL), "out");
    ds_model_destroy(m);
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_model_num_params(m, &n), "not a live model");
    ds_model_destroy(m); /* destroyed: a no-op */
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_model_num_params(NULL, &n), "model");
}

static void test_bad_specs(void) {
    ds_model_t* m = (ds_model_t*)1;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_model_create(NULL, &m), "spec_json");
    CHECK(m == NULL);
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_model_create(kSpec, NULL), "out");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG,
                  ds_model_create("{\"type\": \"gpt\", \"vocab_size\": 16, \"block_size\": 8, \"n_layer\": 2, "
                                  "\"n_head\": 5, \"n_embd\": 64}", &m),
                  "n_head: 5 does not divide n_embd = 64");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG,
                  ds_model_create("{\"type\": \"gpt\", \"vocab_size\": 16, \"block_size\": 8, \"n_layer\": 2, "
                                  "\"n_head\": 2, \"n_embd\": 16, \"n_embed\": 3}", &m),
                  "n_embed: unknown key", "n_embd");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG,
                  ds_model_create("{\"type\": \"gpt\", \"vocab_size\": \"16\", \"block_size\": 8, \"n_layer\": 2, "
                                  "\"n_head\": 2, \"n_embd\": 16}", &m),
                  "vocab_size: expected an integer");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG,
                  ds_model_create("{\"type\": \"gpt\", \"vocab_size\": 16, \"block_size\": 8, \"n_layer\": 2, "
                                  "\"n_head\": 2, \"n_embd\": 16, \"dropout\": 1.5}", &m),
                  "dropout: 1.5 is outside [0, 1)");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG,
                  ds_model_create("{\"type\": \"gpt\", \"vocab_size\": 16, \"n_layer\": 2, \"n_head\": 2, "
                                  "\"n_embd\": 16}", &m),
                  "block_size: required key is missing");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG, ds_model_create("{\"type\": \"gpt\"", &m), "syntax error");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG, ds_model_create("{\"type\": \"mlp\"}", &m), "type: unknown model type");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG,
                  ds_model_create("{\"type\": \"sequential\", \"layers\": [{\"type\": \"linear\", \"in_features\": 4, "
                                  "\"out_features\": 8}, {\"type\": \"linear\", \"in_features\": 3, "
                                  "\"out_features\": 1}]}", &m),
                  "layers[1].in_features: 3 does not match the previous layer's output width 8");
    CHECK(m == NULL);
}

static void test_trains(const char* extra, float factor) {
    ds_engine_t* e = engine_for(kSpec, extra);
    float first, last = 0.0f;
    int i;
    if (!e) return;
    first = step_loss(e);
    CHECK(fabsf(first - logf((float)V)) < 0.5f); /* near uniform at init */
    for (i = 1; i < 30; ++i) last = step_loss(e);
    printf("%s: loss %.7f -> %.7f\n", extra[0] ? extra : "fp32", first, last);
    CHECK(last < factor * first);
    ds_engine_destroy(e);
}

static void test_call_order(void) {
    ds_engine_t* e = engine_for(kSpec, "");
    ds_engine_t* plain = NULL;
    float loss = 0.0f, logits[B * T * V], wrong[3];
    int64_t lshape[3] = {B, T, V}, wshape[1] = {3};
    DLTensor out = f32_tensor(&loss, 0, NULL), lo = f32_tensor(logits, 3, lshape), w = f32_tensor(wrong, 1, wshape);
    int32_t bad_ids[B * T];
    DLTensor bad;
    if (!e) return;
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_backward(e, NULL), "without a ds_forward");
    EXPECT_OK(ds_forward(e, inputs, 2, &out));
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_backward(e, &lo), "call ds_backward(engine, NULL)");
    EXPECT_OK(ds_backward(e, NULL));
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_backward(e, NULL), "without a ds_forward");
    EXPECT_OK(ds_step(e, NULL));
    EXPECT_OK(ds_forward(e, inputs, 1, &lo));
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_backward(e, NULL), "no scalar loss");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_backward(e, &w), "out_grad");
    EXPECT_OK(ds_engine_eval(e, 1));
    EXPECT_OK(ds_forward(e, inputs, 2, &out));
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_backward(e, NULL), "ds_engine_eval");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_eval(e, 2), "on = 2");
    EXPECT_OK(ds_engine_eval(e, 0));
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_forward(e, NULL, 1, &out), "inputs");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_forward(e, inputs, 0, &out), "n_inputs = 0");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_forward(e, inputs, 2, NULL), "out");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_forward(e, inputs, 1, &out), "out (the output)");
    memcpy(bad_ids, ids, sizeof ids);
    bad_ids[9] = V;
    bad = make_tensor(bad_ids, 2, ids_shape, kDLInt, 32);
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_forward(e, &bad, 1, &lo), "inputs[0][1][1] = 16");
    bad = make_tensor(logits, 2, ids_shape, kDLFloat, 32);
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_forward(e, &bad, 1, &lo), "int32 or int64");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_forward(NULL, inputs, 1, &lo), "engine");
    /* An engine without a model. */
    EXPECT_OK(ds_engine_create(config(""), NULL, &plain));
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_forward(plain, inputs, 1, &lo), "no built-in model");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_engine_eval(plain, 1), "no built-in model");
    ds_engine_destroy(plain);
    /* Still usable. */
    step_loss(e);
    ds_engine_destroy(e);
}

static void test_eval_and_dropout(void) {
    ds_engine_t* e = engine_for(kSpec, "");
    static float a[B * T * V], b[B * T * V];
    int64_t lshape[3] = {B, T, V};
    DLTensor oa = f32_tensor(a, 3, lshape), ob = f32_tensor(b, 3, lshape);
    if (!e) return;
    EXPECT_OK(ds_forward(e, inputs, 1, &oa));
    EXPECT_OK(ds_forward(e, inputs, 1, &ob));
    CHECK(memcmp(a, b, sizeof a) != 0); /* new masks each training forward */
    EXPECT_OK(ds_engine_eval(e, 1));
    EXPECT_OK(ds_forward(e, inputs, 1, &oa));
    EXPECT_OK(ds_forward(e, inputs, 1, &ob));
    CHECK(memcmp(a, b, sizeof a) == 0);
    ds_engine_destroy(e);
}

/* Every parameter's gradient of an engine, concatenated. */
static float* all_grads(ds_engine_t* e, int64_t* total) {
    int64_t n = 0, i, off = 0;
    float* out;
    ds_engine_num_params(e, &n);
    *total = 0;
    for (i = 0; i < n; ++i) {
        ds_param_info_t info;
        info.struct_size = sizeof info;
        ds_engine_param_info(e, i, &info);
        *total += info.numel;
    }
    out = (float*)malloc((size_t)*total * sizeof(float));
    for (i = 0; i < n; ++i) {
        ds_param_info_t info;
        DLTensor g;
        info.struct_size = sizeof info;
        ds_engine_param_info(e, i, &info);
        g = f32_tensor(out + off, info.ndim, (int64_t*)info.shape);
        EXPECT_OK(ds_engine_get_full_grad(e, info.name, &g));
        off += info.numel;
    }
    return out;
}

static void test_nonscalar_backward(void) {
    ds_engine_t* a = engine_for(kSpec, "");
    ds_engine_t* b = engine_for(kSpec, "");
    static float logits[B * T * V], dlogits[B * T * V];
    int64_t lshape[3] = {B, T, V}, na = 0, nb = 0, i;
    float loss = 0.0f, *ga, *gb;
    double worst = 0.0;
    DLTensor out = f32_tensor(&loss, 0, NULL), lo = f32_tensor(logits, 3, lshape), dl = f32_tensor(dlogits, 3, lshape);
    int r, v;
    if (!a || !b) return;
    EXPECT_OK(ds_forward(a, inputs, 2, &out));
    EXPECT_OK(ds_backward(a, NULL));
    EXPECT_OK(ds_forward(b, inputs, 1, &lo)); /* same init, same masks (forward 0) */
    for (r = 0; r < B * T; ++r) { /* d mean-CE / d logits = (softmax - onehot) / rows, in double */
        double mx = -1e300, s = 0.0;
        for (v = 0; v < V; ++v) mx = fmax(mx, logits[r * V + v]);
        for (v = 0; v < V; ++v) s += exp((double)logits[r * V + v] - mx);
        for (v = 0; v < V; ++v)
            dlogits[r * V + v] =
                (float)((exp((double)logits[r * V + v] - mx) / s - (v == targets[r] ? 1.0 : 0.0)) / (B * T));
    }
    EXPECT_OK(ds_backward(b, &dl));
    ga = all_grads(a, &na);
    gb = all_grads(b, &nb);
    CHECK(na == nb && na > 0);
    for (i = 0; i < na && na == nb; ++i) {
        const double d = fabs((double)ga[i] - gb[i]) / (1e-6 + fabs((double)ga[i]));
        if (d > worst) worst = d;
    }
    printf("non-scalar vs scalar backward: worst relative difference %.3g\n", worst);
    CHECK(worst < 1e-3);
    free(ga);
    free(gb);
    ds_engine_destroy(a);
    ds_engine_destroy(b);
}

static void test_checkpoint_resume(void) {
    char dir[256];
    float want[3], got[3];
    int i;
    ds_engine_t* e = engine_for(kSpec, "");
    ds_engine_t* r;
    snprintf(dir, sizeof dir, "/tmp/ds_test_model_%d", (int)getpid());
    if (!e) return;
    for (i = 0; i < 3; ++i) step_loss(e);
    EXPECT_OK(ds_save_checkpoint(e, dir, "mid", NULL));
    for (i = 0; i < 3; ++i) want[i] = step_loss(e);
    ds_engine_destroy(e);
    /* Another seed: the checkpoint's weights and dropout stream win. */
    r = engine_for("{\"type\": \"gpt\", \"vocab_size\": 16, \"block_size\": 8, \"n_layer\": 2, \"n_head\": 2, "
                   "\"n_embd\": 16, \"dropout\": 0.1, \"seed\": 77}",
                   "");
    if (!r) return;
    EXPECT_OK(ds_load_checkpoint(r, dir, "mid", 0, NULL));
    for (i = 0; i < 3; ++i) got[i] = step_loss(r);
    CHECK(memcmp(want, got, sizeof want) == 0);
    printf("resume: %.7f %.7f %.7f vs %.7f %.7f %.7f\n", want[0], want[1], want[2], got[0], got[1], got[2]);
    ds_engine_destroy(r);
    {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
}

int main(void) {
    make_batch();
    set_inputs();
    test_param_count();
    test_bad_specs();
    test_trains("", 0.5f);
    test_trains(", \"fp16\": {\"enabled\": true, \"initial_scale_power\": 12}", 0.6f);
    test_trains(", \"bf16\": {\"enabled\": true}", 0.6f);
    test_trains(", \"activation_checkpointing\": {\"number_checkpoints\": 1, \"cpu_checkpointing\": true}", 0.5f);
    test_call_order();
    test_eval_and_dropout();
    test_nonscalar_backward();
    test_checkpoint_resume();
    return ds_test_finish();
}
