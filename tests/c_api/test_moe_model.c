/* The GPT spec's "moe" option through the C ABI: GPTs with MoE layers
 * (top-1 with RTS, Jitter and token dropping; top-2 with PR-MoE residual;
 * activation checkpointing over an MoE layer; bf16) train through
 * ds_engine_create_with_model and their loss falls; the loss includes
 * aux_loss_coef * l_aux (same seed, coefficient 0 vs 0.1: the first losses
 * differ by 0.1 * l_aux, l_aux ~ 1 at init); eval runs; the parameter count
 * follows the formula; bad "moe" keys and values are refused by name, and
 * ep_size 2 on a world of one is refused by the engine (it must divide the
 * world: tests/mpi/test_moe_ep_engine.cpp trains with it). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tensor_util.h"

#define B 4
#define T 8
#define V 16
#define C 16

static char spec_buf[1024];

/* A 2-layer GPT with the given "moe" object body. */
static const char* spec(const char* moe) {
    snprintf(spec_buf, sizeof spec_buf,
             "{\"type\": \"gpt\", \"vocab_size\": 16, \"block_size\": 8, \"n_layer\": 2, \"n_head\": 2, "
             "\"n_embd\": 16, \"seed\": 5, \"moe\": {%s}}",
             moe);
    return spec_buf;
}

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
static DLTensor inputs[2];

static void make_batch(void) {
    int i;
    for (i = 0; i < B * T; ++i) {
        ids[i] = (int32_t)((i * 7 + 3) % V);
        targets[i] = (int32_t)((i * 5 + 1) % V);
    }
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

static ds_engine_t* engine_for(const char* model_spec, const char* extra) {
    ds_model_t* m = NULL;
    ds_engine_t* e = NULL;
    EXPECT_OK(ds_model_create(model_spec, &m));
    if (!m) return NULL;
    EXPECT_OK(ds_engine_create_with_model(config(extra), m, NULL, &e));
    ds_model_destroy(m);
    return e;
}

static void test_trains(const char* moe, const char* extra, float factor) {
    ds_engine_t* e = engine_for(spec(moe), extra);
    float first, last = 0.0f, eval_loss = NAN;
    DLTensor out = f32_tensor(&eval_loss, 0, NULL);
    int i;
    if (!e) return;
    first = step_loss(e);
    CHECK(fabsf(first - logf((float)V)) < 0.7f); /* near uniform at init, plus coef * l_aux */
    for (i = 1; i < 40; ++i) last = step_loss(e);
    printf("moe {%s}%s: loss %.6f -> %.6f\n", moe, extra, first, last);
    CHECK(isfinite(last) && last < factor * first);
    EXPECT_OK(ds_engine_eval(e, 1));
    EXPECT_OK(ds_forward(e, inputs, 2, &out));
    CHECK(isfinite(eval_loss) && eval_loss < first);
    EXPECT_OK(ds_engine_eval(e, 0));
    ds_engine_destroy(e);
}

static void test_aux_loss_in_loss(void) {
    float with_aux, without;
    ds_engine_t* e = engine_for(spec("\"num_experts\": 4, \"aux_loss_coef\": 0.1"), "");
    if (!e) return;
    with_aux = step_loss(e);
    ds_engine_destroy(e);
    e = engine_for(spec("\"num_experts\": 4, \"aux_loss_coef\": 0.0"), "");
    if (!e) return;
    without = step_loss(e);
    ds_engine_destroy(e);
    printf("first loss with aux_loss_coef 0.1: %.6f, with 0: %.6f\n", with_aux, without);
    /* l_aux = E * sum_e mean(gate_e) * frac_e is 1 for a uniform gate, up to E at worst. */
    CHECK(with_aux - without > 0.09f && with_aux - without < 0.2f);
}

static void test_param_count(void) {
    ds_model_t* m = NULL;
    int64_t n = 0;
    const int64_t mlp = (4 * C * C + 4 * C) + (4 * C * C + C);
    const int64_t layer = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + mlp;
    /* every = 2: layer 1 of 2 is MoE: 4 experts, the gate C*4, the residual MLP and coefficient (2C + 2). */
    EXPECT_OK(ds_model_create(spec("\"num_experts\": 4, \"use_residual\": true"), &m));
    EXPECT_OK(ds_model_num_params(m, &n));
    CHECK(n == V * C + T * C + 2 * layer + 3 * mlp + C * 4 + mlp + 2 * C + 2 + 2 * C);
    ds_model_destroy(m);
}

/* DS_PARAM_EXPERT (DeepSpeed's is_moe_param, the "ep_size_1" optimizer
 * group): set on exactly the experts' parameters, by name; a host cannot
 * register its own expert parameters with it. */
static void test_expert_flags(void) {
    ds_engine_t* e = engine_for(spec("\"num_experts\": 4, \"use_residual\": true"), "");
    ds_engine_t* host = NULL;
    int64_t n = 0, i, experts = 0;
    float w[2] = {1.0f, 2.0f};
    int64_t shape[1] = {2};
    DLTensor t = make_tensor(w, 1, shape, kDLFloat, 32);
    EXPECT_OK(ds_engine_num_params(e, &n));
    for (i = 0; i < n; ++i) {
        ds_param_info_t info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        EXPECT_OK(ds_engine_param_info(e, i, &info));
        /* 4 experts x (c_fc, c_proj) x (weight, bias) in layer 1 (every = 2) */
        const int named = strstr(info.name, ".deepspeed_experts.") != NULL;
        CHECK(((info.flags & DS_PARAM_EXPERT) != 0) == named);
        CHECK((info.flags & DS_PARAM_TRAINABLE) != 0);
        experts += named;
    }
    CHECK(experts == 16);
    ds_engine_destroy(e);
    EXPECT_OK(ds_engine_create(config(""), NULL, &host));
    EXPECT_STATUS(DS_ERR_UNSUPPORTED, ds_engine_add_param(host, "w", &t, DS_PARAM_TRAINABLE | DS_PARAM_EXPERT),
                  "DS_PARAM_EXPERT");
    EXPECT_OK(ds_engine_add_param(host, "w", &t, DS_PARAM_TRAINABLE));
    ds_engine_destroy(host);
}

static void test_bad_specs(void) {
    ds_model_t* m = NULL;
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG, ds_model_create(spec("\"num_expert\": 4"), &m), "moe.num_expert: unknown key",
                  "num_experts");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG, ds_model_create(spec("\"k\": 1"), &m), "moe.num_experts: required");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG, ds_model_create(spec("\"num_experts\": 4, \"k\": 3"), &m), "moe.k");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG, ds_model_create(spec("\"num_experts\": 1, \"k\": 2"), &m), "moe.k");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG,
                  ds_model_create(spec("\"num_experts\": 4, \"noisy_gate_policy\": \"Gumbel\""), &m),
                  "moe.noisy_gate_policy: \"Gumbel\"");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG, ds_model_create(spec("\"num_experts\": 4, \"capacity_factor\": 0"), &m),
                  "moe.capacity_factor");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG, ds_model_create(spec("\"num_experts\": 4, \"every\": 3"), &m), "moe.every");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG, ds_model_create(spec("\"num_experts\": 4, \"drop_tokens\": 1"), &m),
                  "moe.drop_tokens");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG, ds_model_create(spec("\"num_experts\": 4, \"aux_loss_coef\": -1"), &m),
                  "moe.aux_loss_coef");
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG, ds_model_create(spec("\"num_experts\": 4, \"ep_size\": 3"), &m),
                  "moe.ep_size: 3 does not divide");
    CHECK(m == NULL);
    {
        ds_engine_t* e = NULL;
        EXPECT_OK(ds_model_create(spec("\"num_experts\": 4, \"ep_size\": 2"), &m));
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_create_with_model(config(""), m, NULL, &e),
                      "moe.ep_size = 2 does not divide the world size 1");
        CHECK(e == NULL);
        ds_model_destroy(m);
        m = NULL;
    }
}

/* The random options (RTS priorities, jitter) and dropout come from the
 * checkpointed stream: a resumed run repeats the losses bit for bit. */
static void test_checkpoint_resume(void) {
    const char* moe = "\"num_experts\": 4, \"noisy_gate_policy\": \"Jitter\", \"capacity_factor\": 0.5, "
                      "\"min_capacity\": 1";
    char dir[256], first[1024], other[1024];
    float want[3], got[3];
    int i;
    ds_engine_t* e;
    ds_engine_t* r;
    /* Another seed for the resumed engine: the checkpoint's weights and stream win. */
    const char* fmt = "{\"type\": \"gpt\", \"vocab_size\": 16, \"block_size\": 8, \"n_layer\": 2, "
                      "\"n_head\": 2, \"n_embd\": 16, \"dropout\": 0.1, \"seed\": %d, \"moe\": {%s}}";
    snprintf(first, sizeof first, fmt, 5, moe);
    snprintf(other, sizeof other, fmt, 77, moe);
    snprintf(dir, sizeof dir, "/tmp/ds_test_moe_model_%d", (int)getpid());
    e = engine_for(first, "");
    if (!e) return;
    for (i = 0; i < 3; ++i) step_loss(e);
    EXPECT_OK(ds_save_checkpoint(e, dir, "mid", NULL));
    for (i = 0; i < 3; ++i) want[i] = step_loss(e);
    ds_engine_destroy(e);
    r = engine_for(other, "");
    if (!r) return;
    EXPECT_OK(ds_load_checkpoint(r, dir, "mid", 0, NULL));
    for (i = 0; i < 3; ++i) got[i] = step_loss(r);
    printf("resume: %.7f %.7f %.7f vs %.7f %.7f %.7f\n", want[0], want[1], want[2], got[0], got[1], got[2]);
    CHECK(memcmp(want, got, sizeof want) == 0);
    ds_engine_destroy(r);
    {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
}

int main(void) {
    make_batch();
    test_param_count();
    test_expert_flags();
    test_bad_specs();
    test_aux_loss_in_loss();
    test_trains("\"num_experts\": 4, \"noisy_gate_policy\": \"Jitter\", \"min_capacity\": 2", "", 0.5f);
    test_trains("\"num_experts\": 4, \"k\": 2, \"use_residual\": true, \"capacity_factor\": 0.5", "", 0.5f);
    test_trains("\"num_experts\": 2, \"every\": 1, \"noisy_gate_policy\": \"RSample\", \"drop_tokens\": false",
                ", \"activation_checkpointing\": {\"number_checkpoints\": 2}", 0.5f);
    test_trains("\"num_experts\": 4, \"k\": 2", ", \"bf16\": {\"enabled\": true}", 0.6f);
    test_trains("\"num_experts\": 4, \"use_residual\": true",
                ", \"fp16\": {\"enabled\": true, \"initial_scale_power\": 12}", 0.6f);
    test_trains("\"num_experts\": 4, \"k\": 2", ", \"zero_optimization\": {\"stage\": 3}", 0.5f);
    test_checkpoint_resume();
    return ds_test_finish();
}
