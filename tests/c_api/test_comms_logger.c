/* The comms logger through the C ABI: ds_engine_comms_log_summary returns
 * DeepSpeed's log_summary table once comms_logger is enabled (the engine's
 * own agreement and reduction collectives are recorded), and is refused with
 * DS_ERR_INVALID_STATE when it is off. */
#include <string.h>

#include "check.h"
#include "tensor_util.h"

static void train_one_step(ds_engine_t* e) {
    float w[4] = {1.0f, 2.0f, 3.0f, 4.0f}, g[4] = {0.1f, 0.1f, 0.1f, 0.1f};
    int64_t shape[1] = {4};
    DLTensor t = f32_tensor(w, 1, shape);
    EXPECT_OK(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_init(e));
    t = f32_tensor(g, 1, shape);
    EXPECT_OK(ds_engine_accumulate_grad(e, "w", &t));
    EXPECT_OK(ds_backward(e, NULL));
    EXPECT_OK(ds_step(e, NULL));
}

int main(void) {
    ds_engine_t* e = NULL;
    const char* text = NULL;
    EXPECT_OK(ds_engine_create("{\"train_batch_size\": 1, \"comms_logger\": {\"enabled\": true},"
                               " \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.1}}}",
                               NULL, &e));
    train_one_step(e);
    EXPECT_OK(ds_engine_comms_log_summary(e, &text));
    CHECK(text != NULL && strncmp(text, "Comm. Op            Message Size        Count", 45) == 0);
    EXPECT_OK(ds_engine_comms_log_summary(e, NULL));
    ds_engine_destroy(e);

    e = NULL;
    EXPECT_OK(ds_engine_create("{\"train_batch_size\": 1}", NULL, &e));
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_engine_comms_log_summary(e, &text), "comms logger is off");
    ds_engine_destroy(e);
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_comms_log_summary(NULL, &text), NULL);
    return ds_test_finish();
}
