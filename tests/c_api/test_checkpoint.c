/* C API: checkpoints. Every documented status of ds_save_checkpoint,
 * ds_load_checkpoint and ds_save_16bit_model (NULL and bad arguments,
 * invalid handle, before init, mid-window saves, missing and foreign
 * checkpoints), plus the load flags' effect on counters and weights. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tensor_util.h"

static const char* kConfig =
    "{\"train_batch_size\": 4, \"gradient_accumulation_steps\": 2,"
    " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}},"
    " \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 10}}}";

static char root[64];

static float w0[6] = {1, 2, 3, 4, 5, 6};
static int64_t shape[2] = {2, 3};

static void micro_step(ds_engine_t* e, int do_backward, int do_step) {
    float g[6] = {0.5f, -0.25f, 1, 2, -1, 0.125f};
    DLTensor tg = f32_tensor(g, 2, shape);
    EXPECT_OK(ds_engine_accumulate_grad(e, "w", &tg));
    if (do_backward) EXPECT_OK(ds_backward(e, NULL));
    if (do_step) EXPECT_OK(ds_step(e, NULL));
}

static void window(ds_engine_t* e) {
    micro_step(e, 1, 1);
    micro_step(e, 1, 1);
}

static void get_w(ds_engine_t* e, float out[6]) {
    DLTensor t = f32_tensor(out, 2, shape);
    EXPECT_OK(ds_engine_get_full_fp32_param(e, "w", &t));
}

static int file_exists(const char* path) { return access(path, F_OK) == 0; }

static void path(char* out, const char* rel) { sprintf(out, "%s/%s", root, rel); }

static void test_statuses(void) {
    ds_engine_t* e = NULL;
    DLTensor tw = f32_tensor(w0, 2, shape);
    char dir[256], p[320];
    const char* client = NULL;
    path(dir, "ck");

    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_save_checkpoint(NULL, dir, NULL, NULL), "engine");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_load_checkpoint(NULL, dir, NULL, 0, NULL), "engine");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_save_16bit_model(NULL, dir, NULL), "engine");

    EXPECT_OK(ds_engine_create(kConfig, NULL, &e));
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_save_checkpoint(e, dir, NULL, NULL), "ds_engine_init");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_load_checkpoint(e, dir, NULL, 0, NULL), "ds_engine_init");
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_save_16bit_model(e, dir, NULL), "ds_engine_init");
    EXPECT_OK(ds_engine_add_param(e, "w", &tw, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_add_param(e, "frozen", &tw, 0));
    EXPECT_OK(ds_engine_init(e));

    /* arguments */
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_save_checkpoint(e, NULL, NULL, NULL), "save_dir");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_save_checkpoint(e, "", NULL, NULL), "save_dir");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_save_checkpoint(e, dir, "a/b", NULL), "'a/b'");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_save_checkpoint(e, dir, "latest", NULL), "reserved");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_save_checkpoint(e, dir, "", NULL), "tag");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_save_checkpoint(e, dir, NULL, "{\"a\": }"), "client_state_json",
                  "line 1");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_load_checkpoint(e, NULL, NULL, 0, NULL), "load_dir");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_load_checkpoint(e, "", NULL, 0, NULL), "load_dir");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_load_checkpoint(e, dir, NULL, 0x10u, NULL), "flags", "0x10");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_save_16bit_model(e, NULL, NULL), "save_dir");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_save_16bit_model(e, dir, "a/b.safetensors"), "plain file name");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_save_16bit_model(e, dir, ""), "plain file name");

    /* nothing saved yet */
    EXPECT_STATUS(DS_ERR_NOT_FOUND, ds_load_checkpoint(e, dir, NULL, 0, NULL), "does not exist");
    path(p, "");
    EXPECT_STATUS(DS_ERR_NOT_FOUND, ds_load_checkpoint(e, p, NULL, 0, NULL), "latest");
    EXPECT_STATUS(DS_ERR_NOT_FOUND, ds_load_checkpoint(e, p, "nope", 0, NULL), "nope");

    /* inside an accumulation window */
    micro_step(e, 0, 0); /* gradients accumulated, no backward yet */
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_save_checkpoint(e, dir, NULL, NULL), "'w' holds gradients");
    EXPECT_OK(ds_backward(e, NULL));
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_save_checkpoint(e, dir, NULL, NULL), "ds_backward was called");
    EXPECT_OK(ds_step(e, NULL)); /* micro-step 1 of 2 */
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_save_checkpoint(e, dir, NULL, NULL), "micro_steps = 1");
    micro_step(e, 1, 1);
    EXPECT_OK(ds_save_checkpoint(e, dir, NULL, NULL));
    sprintf(p, "%s/global_step1/manifest.json", dir);
    CHECK(file_exists(p));
    EXPECT_OK(ds_load_checkpoint(e, dir, NULL, 0, &client));
    CHECK(client != NULL && strcmp(client, "{}") == 0);

    /* a regular file where a directory must go */
    path(p, "plainfile");
    {
        FILE* f = fopen(p, "w");
        CHECK(f != NULL);
        if (f) fclose(f);
    }
    strcat(p, "/sub");
    EXPECT_STATUS(DS_ERR_IO, ds_save_checkpoint(e, p, NULL, NULL), "plainfile");
    EXPECT_STATUS(DS_ERR_IO, ds_save_16bit_model(e, p, NULL), "plainfile");

    EXPECT_OK(ds_save_16bit_model(e, dir, NULL));
    sprintf(p, "%s/model.safetensors", dir);
    CHECK(file_exists(p));
    EXPECT_OK(ds_save_16bit_model(e, dir, "w16.safetensors"));

    ds_engine_destroy(e);
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_save_checkpoint(e, dir, NULL, NULL), "engine");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_load_checkpoint(e, dir, NULL, 0, NULL), "engine");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_save_16bit_model(e, dir, NULL), "engine");
}

static void test_flags(void) {
    ds_engine_t* e = NULL;
    DLTensor tw = f32_tensor(w0, 2, shape);
    char dir[256];
    const char* client = NULL;
    float saved[6], later[6], now[6];
    int64_t steps = 0, micro = 0;
    double lr_saved = 0, lr = 0;
    path(dir, "flags");

    EXPECT_OK(ds_engine_create(kConfig, NULL, &e));
    EXPECT_OK(ds_engine_add_param(e, "w", &tw, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_init(e));
    window(e);
    window(e);
    get_w(e, saved);
    EXPECT_OK(ds_engine_set_lr(e, 0.0375)); /* an override persists through save/load */
    EXPECT_OK(ds_engine_get_lr(e, &lr_saved));
    EXPECT_OK(ds_save_checkpoint(e, dir, "best", "{\"epoch\": 2, \"tags\": [1, 2]}"));
    window(e);
    get_w(e, later);
    CHECK(memcmp(saved, later, sizeof saved) != 0);

    /* module only: weights back, counters and lr stay */
    EXPECT_OK(ds_load_checkpoint(e, dir, "best", DS_LOAD_MODULE_ONLY, &client));
    CHECK(client != NULL && strcmp(client, "{\"epoch\":2,\"tags\":[1,2]}") == 0);
    get_w(e, now);
    CHECK(memcmp(now, saved, sizeof now) == 0);
    EXPECT_OK(ds_engine_global_steps(e, &steps));
    CHECK(steps == 3);

    /* everything (latest names "best") */
    EXPECT_OK(ds_load_checkpoint(e, dir, NULL, 0, &client));
    EXPECT_OK(ds_engine_global_steps(e, &steps));
    EXPECT_OK(ds_engine_micro_steps(e, &micro));
    EXPECT_OK(ds_engine_get_lr(e, &lr));
    CHECK(steps == 2 && micro == 4);
    CHECK(lr == lr_saved && lr == 0.0375);

    /* no optimizer / no scheduler states */
    window(e);
    EXPECT_OK(ds_load_checkpoint(e, dir, NULL, DS_LOAD_NO_OPTIMIZER_STATES | DS_LOAD_NO_LR_SCHEDULER_STATES, NULL));
    EXPECT_OK(ds_engine_global_steps(e, &steps));
    CHECK(steps == 2);
    get_w(e, now);
    CHECK(memcmp(now, saved, sizeof now) == 0);
    EXPECT_OK(ds_load_checkpoint(e, dir, NULL, DS_LOAD_NON_STRICT, NULL));

    /* the client state pointer stays valid until the next call */
    EXPECT_OK(ds_load_checkpoint(e, dir, "best", 0, &client));
    CHECK(strstr(client, "\"epoch\":2") != NULL);
    ds_engine_destroy(e);
}

/* No optimizer, only frozen parameters: the checkpoint has no optimizer file. */
static void test_frozen_only(void) {
    ds_engine_t* e = NULL;
    DLTensor tw = f32_tensor(w0, 2, shape);
    char dir[256], p[320];
    float now[6];
    path(dir, "frozen");
    EXPECT_OK(ds_engine_create("{\"train_batch_size\": 1}", NULL, &e));
    EXPECT_OK(ds_engine_add_param(e, "w", &tw, 0));
    EXPECT_OK(ds_engine_init(e));
    EXPECT_OK(ds_save_checkpoint(e, dir, "t", NULL));
    sprintf(p, "%s/t/optim_rank0.safetensors", dir);
    CHECK(!file_exists(p));
    EXPECT_OK(ds_load_checkpoint(e, dir, NULL, 0, NULL));
    get_w(e, now);
    CHECK(memcmp(now, w0, sizeof now) == 0);
    ds_engine_destroy(e);
    /* An engine with an optimizer asks for state this checkpoint lacks. */
    EXPECT_OK(ds_engine_create(kConfig, NULL, &e));
    EXPECT_OK(ds_engine_add_param(e, "w", &tw, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_init(e));
    EXPECT_STATUS(DS_ERR_FORMAT, ds_load_checkpoint(e, dir, NULL, 0, NULL), "no optimizer state");
    EXPECT_STATUS(DS_ERR_FORMAT, ds_load_checkpoint(e, dir, NULL, DS_LOAD_NO_OPTIMIZER_STATES, NULL),
                  "lr_scheduler");
    EXPECT_OK(ds_load_checkpoint(e, dir, NULL, DS_LOAD_MODULE_ONLY, NULL));
    ds_engine_destroy(e);
}

int main(void) {
    char cmd[128];
    strcpy(root, "/tmp/ds_capi_ckpt_XXXXXX");
    if (!mkdtemp(root)) return 2;
    test_statuses();
    test_flags();
    test_frozen_only();
    sprintf(cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", root);
    return ds_test_finish();
}
