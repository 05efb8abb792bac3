/* Parameter listing (ds_engine_num_params / ds_engine_param_info): order of
 * ds_engine_add_param, names, shapes, working dtype, flags and numel, before
 * and after ds_engine_init, at every ZeRO stage and with bf16; bad indices. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "tensor_util.h"

static void check_listing(const char* config, uint8_t code, uint8_t bits) {
    ds_engine_t* e = NULL;
    float a[6] = {0}, b[1] = {0}, c[24] = {0};
    int64_t sa[2] = {2, 3}, sc[3] = {2, 3, 4};
    DLTensor ta = f32_tensor(a, 2, sa), tb = f32_tensor(b, 0, NULL), tc = f32_tensor(c, 3, sc);
    const char* names[3] = {"layer.weight", "scale", "zz.frozen"};
    const int64_t numels[3] = {6, 1, 24};
    const int32_t ndims[3] = {2, 0, 3};
    const int64_t* shapes[3] = {sa, NULL, sc};
    const uint32_t flags[3] = {DS_PARAM_TRAINABLE, DS_PARAM_TRAINABLE, 0};
    int64_t n = -1;
    int round, i, d;

    EXPECT_OK(ds_engine_create(config, NULL, &e));
    EXPECT_OK(ds_engine_num_params(e, &n));
    CHECK(n == 0);
    EXPECT_OK(ds_engine_add_param(e, names[0], &ta, flags[0]));
    EXPECT_OK(ds_engine_add_param(e, names[1], &tb, flags[1]));
    EXPECT_OK(ds_engine_add_param(e, names[2], &tc, flags[2]));
    for (round = 0; round < 2; ++round) {
        if (round == 1) EXPECT_OK(ds_engine_init(e));
        EXPECT_OK(ds_engine_num_params(e, &n));
        CHECK(n == 3);
        for (i = 0; i < 3; ++i) {
            ds_param_info_t p;
            memset(&p, 0xFF, sizeof p);
            p.struct_size = sizeof p;
            EXPECT_OK(ds_engine_param_info(e, i, &p));
            CHECK(strcmp(p.name, names[i]) == 0);
            CHECK(p.ndim == ndims[i] && p.numel == numels[i] && p.flags == flags[i]);
            CHECK(p.dtype.code == code && p.dtype.bits == bits && p.dtype.lanes == 1);
            CHECK(p.reserved0 == 0);
            if (ndims[i] == 0) CHECK(p.shape == NULL);
            for (d = 0; d < ndims[i]; ++d) CHECK(p.shape && p.shape[d] == shapes[i][d]);
        }
    }
    {
        ds_param_info_t p;
        p.struct_size = sizeof p;
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_param_info(e, 3, &p), "index = 3", "3 parameters");
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_param_info(e, -1, &p), "index = -1");
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_param_info(e, 0, NULL), "out");
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_num_params(e, NULL), "out");
    }
    ds_engine_destroy(e);
    {
        ds_param_info_t p;
        p.struct_size = sizeof p;
        EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_param_info(e, 0, &p), "engine");
        EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_num_params(NULL, &n), "engine");
    }
}

int main(void) {
    static const char* stages[] = {
        "{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0.1}}}",
        "{\"train_batch_size\": 1, \"zero_optimization\": {\"stage\": 1}, \"optimizer\": {\"type\": \"Adam\"}}",
        "{\"train_batch_size\": 1, \"zero_optimization\": {\"stage\": 2}, \"optimizer\": {\"type\": \"Adam\"}}",
        "{\"train_batch_size\": 1, \"zero_optimization\": {\"stage\": 3, \"stage3_param_persistence_threshold\": 0},"
        " \"optimizer\": {\"type\": \"Adam\"}}",
    };
    size_t i;
    for (i = 0; i < sizeof stages / sizeof stages[0]; ++i) check_listing(stages[i], kDLFloat, 32);
    check_listing("{\"train_batch_size\": 1, \"bf16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 3},"
                  " \"optimizer\": {\"type\": \"Adam\"}}",
                  kDLBfloat, 16);
    check_listing("{\"train_batch_size\": 1, \"fp16\": {\"enabled\": true}, \"optimizer\": {\"type\": \"Adam\"}}",
                  kDLFloat, 16);
    return ds_test_finish();
}
