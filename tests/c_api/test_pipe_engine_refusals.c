/* The pipeline engine's C calls on a world of one (the training itself needs
 * several ranks: tests/mpi/test_pipe_engine.cpp). An engine that is not a
 * pipeline stage refuses ds_train_batch, ds_eval_batch and
 * ds_engine_pipe_info with DS_ERR_INVALID_STATE naming the pipeline -- also
 * for a ds_pipe_info_t whose struct_size is too small, since the stage check
 * comes first (DS_ERR_ABI_MISMATCH is only reachable on a stage) -- and stays
 * usable; a GPT spec asking for two stages is refused by
 * ds_engine_create_with_model naming pipeline.stages, leaving *out NULL; a
 * bad pipeline object is refused by ds_model_create naming its key; one
 * stage makes a plain engine. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "tensor_util.h"

#define MB 2  /* train_micro_batch_size_per_gpu */
#define GAS 2 /* gradient_accumulation_steps */
#define T 8

static const char* kConfig =
    "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2, "
    "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}}}";

static const char* spec(const char* extra) {
    static char buf[512];
    snprintf(buf, sizeof buf,
             "{\"type\": \"gpt\", \"vocab_size\": 16, \"block_size\": 8, \"n_layer\": 2, \"n_head\": 2, "
             "\"n_embd\": 16, \"seed\": 3%s}",
             extra);
    return buf;
}

static int32_t ids[GAS * MB * T], targets[GAS * MB * T];
static int64_t batch_shape[2] = {GAS * MB, T};
static int64_t micro_shape[2] = {MB, T};

static ds_engine_t* engine_for(const char* model_spec) {
    ds_model_t* m = NULL;
    ds_engine_t* e = NULL;
    EXPECT_OK(ds_model_create(model_spec, &m));
    if (m) EXPECT_OK(ds_engine_create_with_model(kConfig, m, NULL, &e));
    ds_model_destroy(m); /* the engine keeps it */
    return e;
}

static void plain_engine_refuses(void) {
    ds_engine_t* e = engine_for(spec(""));
    DLTensor in = make_tensor(ids, 2, batch_shape, kDLInt, 32);
    DLTensor tg = make_tensor(targets, 2, batch_shape, kDLInt, 32);
    DLTensor micro[2];
    ds_step_info_t info;
    ds_pipe_info_t pi;
    float loss = 0.0f;
    int64_t steps = -1;
    if (!e) return;

    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_train_batch(e, &in, &tg, &loss, &info), "ds_train_batch",
                  "not a pipeline stage");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_train_batch(e, NULL, NULL, NULL, NULL), "not a pipeline stage");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_eval_batch(e, &in, &tg, &loss), "ds_eval_batch",
                  "not a pipeline stage");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_eval_batch(e, NULL, NULL, NULL), "not a pipeline stage");

    memset(&pi, 0, sizeof pi);
    pi.struct_size = DS_PIPE_INFO_SIZE_V0;
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_engine_pipe_info(e, &pi), "ds_engine_pipe_info",
                  "not a pipeline stage");
    /* A truncated struct: still the stage refusal (ABI_MISMATCH needs a stage). */
    pi.struct_size = DS_PIPE_INFO_SIZE_V0 - 8;
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_engine_pipe_info(e, &pi), "not a pipeline stage");
    CHECK(pi.struct_size == DS_PIPE_INFO_SIZE_V0 - 8);
    pi.struct_size = 0;
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_engine_pipe_info(e, &pi), "not a pipeline stage");

    /* No handle: DS_ERR_INVALID_HANDLE, as every engine call. */
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_train_batch(NULL, &in, &tg, &loss, &info), "engine");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_eval_batch(NULL, &in, &tg, &loss), "engine");
    pi.struct_size = DS_PIPE_INFO_SIZE_V0;
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_pipe_info(NULL, &pi), "engine");

    /* The refusals changed nothing: one micro-step through ds_forward trains. */
    micro[0] = make_tensor(ids, 2, micro_shape, kDLInt, 32);
    micro[1] = make_tensor(targets, 2, micro_shape, kDLInt, 32);
    {
        DLTensor out = f32_tensor(&loss, 0, NULL);
        loss = NAN;
        EXPECT_OK(ds_forward(e, micro, 2, &out));
        CHECK(isfinite(loss) && loss > 0.0f);
    }
    EXPECT_OK(ds_backward(e, NULL));
    EXPECT_OK(ds_step(e, &info));
    CHECK(info.stepped == 0); /* micro-step 1 of GAS */
    EXPECT_OK(ds_engine_micro_steps(e, &steps));
    CHECK(steps == 1);
    ds_engine_destroy(e);
}

static void two_stages_on_one_rank(void) {
    ds_model_t* m = NULL;
    ds_engine_t* e = (ds_engine_t*)1;
    EXPECT_OK(ds_model_create(spec(", \"pipeline\": {\"stages\": 2, \"partition_method\": \"parameters\"}"), &m));
    if (!m) return;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_create_with_model(kConfig, m, NULL, &e), "pipeline.stages",
                  "does not divide the world size 1");
    CHECK(e == NULL);
    ds_model_destroy(m);
}

/* The spec's pipeline object is parsed strictly by ds_model_create, naming the key. */
static void bad_pipeline_objects(void) {
    ds_model_t* m = (ds_model_t*)1;
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG, ds_model_create(spec(", \"pipeline\": {\"stagez\": 2}"), &m),
                  "pipeline.stagez", "unknown key");
    CHECK(m == NULL);
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG, ds_model_create(spec(", \"pipeline\": {\"stages\": 0}"), &m),
                  "pipeline.stages");
    CHECK(m == NULL);
    EXPECT_STATUS(DS_ERR_INVALID_CONFIG, ds_model_create(spec(", \"pipeline\": 3"), &m), "pipeline");
    CHECK(m == NULL);
}

/* One stage is no pipeline: the engine is a plain one and refuses the batch calls. */
static void one_stage_is_a_plain_engine(void) {
    ds_engine_t* e = engine_for(spec(", \"pipeline\": {\"stages\": 1}"));
    ds_pipe_info_t pi;
    if (!e) return;
    memset(&pi, 0, sizeof pi);
    pi.struct_size = sizeof pi;
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_train_batch(e, NULL, NULL, NULL, NULL), "pipeline.stages > 1");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_engine_pipe_info(e, &pi), "not a pipeline stage");
    ds_engine_destroy(e);
}

int main(void) {
    int i;
    for (i = 0; i < GAS * MB * T; ++i) {
        ids[i] = (int32_t)((i * 7 + 3) % 16);
        targets[i] = (int32_t)((i * 5 + 1) % 16);
    }
    plain_engine_refuses();
    two_stages_on_one_rank();
    bad_pipeline_objects();
    one_stage_is_a_plain_engine();
    return ds_test_finish();
}
