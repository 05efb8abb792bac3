/* C API: ds_engine_memory_report. Every documented status, and exact byte
 * counts for a one-rank engine against the layout's arithmetic: two
 * parameters of 7 and 12 elements make a flat buffer of 19 elements padded
 * to 20 (a multiple of 2 x world size), so with Adam
 *   fp16: params = 2*20 (fp16 working) + 4*20 (fp32 master), grads = 2*20,
 *         optimizer_state = 2 * 4*20 (exp_avg, exp_avg_sq);
 *   fp32: params = 4*20 (the master is the working copy), grads = 4*20,
 *         optimizer_state = 2 * 4*20;
 * buffers = 0 (stage 0 has no reduction buckets). */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "tensor_util.h"

static const char* kFp16 =
    "{\"train_batch_size\": 2, \"fp16\": {\"enabled\": true},"
    " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}}}";
static const char* kFp32 =
    "{\"train_batch_size\": 2, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}}}";

static void test_misuse(void) {
    ds_engine_t* e = NULL;
    ds_memory_report_t r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_memory_report(NULL, &r), "engine");
    EXPECT_OK(ds_engine_create(kFp32, NULL, &e));
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_engine_memory_report(e, NULL), "out");
    r.struct_size = sizeof r - 1;
    EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_engine_memory_report(e, &r), "struct_size");
    r.struct_size = 0;
    EXPECT_STATUS(DS_ERR_ABI_MISMATCH, ds_engine_memory_report(e, &r), "struct_size");
    /* a larger (newer) struct is accepted (its unknown tail zeroed); before any
       parameter nothing is held */
    {
        struct { ds_memory_report_t r; int64_t future[2]; } big;
        memset(&big, 0xAB, sizeof big);
        big.r.struct_size = sizeof big;
        EXPECT_OK(ds_engine_memory_report(e, &big.r));
        r = big.r;
        CHECK(big.future[0] == 0 && big.future[1] == 0);
    }
    CHECK(r.params_bytes == 0 && r.grads_bytes == 0 && r.optimizer_state_bytes == 0 && r.buffers_bytes == 0);
    CHECK(r.total_bytes == 0 && r.peak_total_bytes == 0);
    ds_engine_destroy(e);
    r.struct_size = sizeof r;
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_engine_memory_report(e, &r), "engine");
}

static void run_counts(const char* config, int64_t working_elem_bytes) {
    ds_engine_t* e = NULL;
    ds_memory_report_t r;
    float a[7] = {0}, b[12] = {0};
    int64_t sa[1] = {7}, sb[1] = {12};
    DLTensor ta = f32_tensor(a, 1, sa), tb = f32_tensor(b, 1, sb);
    const int64_t padded = 20;
    const int64_t working = working_elem_bytes == 4 ? 0 : working_elem_bytes * padded;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    EXPECT_OK(ds_engine_create(config, NULL, &e));
    EXPECT_OK(ds_engine_add_param(e, "a", &ta, DS_PARAM_TRAINABLE));
    EXPECT_OK(ds_engine_add_param(e, "b", &tb, DS_PARAM_TRAINABLE));
    /* registered, not laid out: one fp32 copy of each parameter */
    EXPECT_OK(ds_engine_memory_report(e, &r));
    CHECK(r.params_bytes == 4 * 19 && r.grads_bytes == 0 && r.optimizer_state_bytes == 0);
    CHECK(r.buffers_bytes == 0 && r.total_bytes == 4 * 19);
    EXPECT_OK(ds_engine_init(e));
    EXPECT_OK(ds_engine_memory_report(e, &r));
    CHECK(r.params_bytes == working + 4 * padded);
    CHECK(r.grads_bytes == working_elem_bytes * padded);
    CHECK(r.optimizer_state_bytes == 2 * 4 * padded);
    CHECK(r.buffers_bytes == 0);
    CHECK(r.total_bytes == r.params_bytes + r.grads_bytes + r.optimizer_state_bytes + r.buffers_bytes);
    /* the registration copies lived alongside the flat buffers for a while */
    CHECK(r.peak_total_bytes >= r.total_bytes && r.peak_total_bytes <= r.total_bytes + 4 * 19 + 2 * 19);
    ds_engine_destroy(e);
}

int main(void) {
    test_misuse();
    run_counts(kFp16, 2);
    run_counts(kFp32, 4);
    return ds_test_finish();
}
