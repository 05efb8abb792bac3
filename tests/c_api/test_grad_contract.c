/* C API: the gradient hand-over contract from C99 — DeepSpeed's loss
 * multiplier (loss_scale / gradient_accumulation_steps) with
 * ds_engine_accumulate_grad_ex(..., DS_GRAD_PREDIVIDED), unknown flag bits,
 * and a column-major (strided) gradient. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "tensor_util.h"

static const char* kFp16 =
    "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_accumulation_steps\": 4,"
    " \"gradient_clipping\": 0,"
    " \"fp16\": {\"enabled\": true, \"initial_scale_power\": 10},"
    " \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 1.0}}}";

int main(void) {
    ds_engine_t* e = NULL;
    float w[6] = {0, 0, 0, 0, 0, 0}, out[6];
    /* logical 2 x 3 matrix [[1, 2, 3], [4, 5, 6]] stored column-major */
    float colmajor[6] = {1, 4, 2, 5, 3, 6};
    int64_t shape[2] = {2, 3}, strides[2] = {1, 2};
    DLTensor tw = f32_tensor(w, 2, shape), tg = f32_tensor(colmajor, 2, shape), tout = f32_tensor(out, 2, shape);
    float scale = 0, mult = 0;
    int i;

    EXPECT_OK(ds_engine_create(kFp16, NULL, &e));
    EXPECT_OK(ds_engine_add_param(e, "w", &tw, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_init(e));
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_loss_multiplier(e, NULL), "out");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_loss_multiplier(NULL, &mult), NULL);
    EXPECT_OK(ds_engine_loss_scale(e, &scale));
    EXPECT_OK(ds_engine_loss_multiplier(e, &mult));
    CHECK(scale == 1024.0f);
    CHECK(mult == 256.0f); /* 2^10 / 4 */

    tg.strides = strides;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_accumulate_grad_ex(e, "w", &tg, 0x10u), "flags");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_accumulate_grad_ex(e, NULL, &tg, 0), "name");
    /* predivided: added as it is; then the same gradient the old way: / 4 */
    EXPECT_OK(ds_engine_accumulate_grad_ex(e, "w", &tg, DS_GRAD_PREDIVIDED));
    EXPECT_OK(ds_engine_accumulate_grad(e, "w", &tg));
    EXPECT_OK(ds_engine_get_full_grad(e, "w", &tout));
    for (i = 0; i < 6; ++i) CHECK(out[i] == (float)(i + 1) * 1.25f);
    ds_engine_destroy(e);
    return ds_test_finish();
}
