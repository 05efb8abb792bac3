/* C API test for the host-tensor collectives (ds_comm_all_reduce,
 * _all_gather_into_tensor, _reduce_scatter_tensor, _all_to_all_single,
 * _broadcast, _barrier) in a world of one (no mpirun): a world of one's
 * reduction, gather and exchange are copies, checked element by element for
 * fp32, bf16 and int64; every documented argument error is named and leaves
 * the communicator usable; a destroyed handle is DS_ERR_INVALID_HANDLE.
 * Values on 2-4 ranks: tests/mpi/test_comm_tensor_collectives.cpp. */
#include <stdint.h>

#include "check.h"

static DLTensor view(void* data, DLDataType dt, int64_t* shape, int32_t ndim) {
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.device.device_type = kDLCPU;
    t.ndim = ndim;
    t.dtype = dt;
    t.shape = shape;
    return t;
}

static void test_copies(ds_comm_t* w) {
    DLDataType f32 = {kDLFloat, 32, 1}, bf16 = {kDLBfloat, 16, 1}, i64 = {kDLInt, 64, 1};
    float x[6] = {1.5f, -2.0f, 3.25f, 4.0f, 0.0f, -7.5f}, out[6];
    uint16_t hx[6] = {0x3FC0, 0xC000, 0x4050, 0x4080, 0x0000, 0xC0F0}, hout[6];
    int64_t ix[6] = {1, -2, 3, 4, 5, 1LL << 40}, iout[6];
    int64_t n6[1] = {6}, n23[2] = {2, 3};
    int32_t op, i;
    for (op = DS_REDUCE_SUM; op <= DS_REDUCE_MAX; ++op) {
        DLTensor t = view(x, f32, n23, 2), h = view(hx, bf16, n6, 1), k = view(ix, i64, n6, 1);
        EXPECT_OK(ds_comm_all_reduce(w, &t, op));
        EXPECT_OK(ds_comm_all_reduce(w, &h, op));
        if (op != DS_REDUCE_AVG) EXPECT_OK(ds_comm_all_reduce(w, &k, op));
        CHECK(x[0] == 1.5f && x[5] == -7.5f && hx[2] == 0x4050 && hx[5] == 0xC0F0 && ix[5] == (1LL << 40));
    }
    {
        DLTensor o = view(out, f32, n6, 1), in = view(x, f32, n23, 2);
        memset(out, 0, sizeof out);
        EXPECT_OK(ds_comm_all_gather_into_tensor(w, &o, &in));
        for (i = 0; i < 6; ++i) CHECK(out[i] == x[i]);
        memset(out, 0, sizeof out);
        EXPECT_OK(ds_comm_reduce_scatter_tensor(w, &o, &in, DS_REDUCE_SUM));
        for (i = 0; i < 6; ++i) CHECK(out[i] == x[i]);
        memset(out, 0, sizeof out);
        EXPECT_OK(ds_comm_all_to_all_single(w, &o, &in));
        for (i = 0; i < 6; ++i) CHECK(out[i] == x[i]);
    }
    {
        DLTensor o = view(hout, bf16, n6, 1), in = view(hx, bf16, n6, 1);
        EXPECT_OK(ds_comm_all_to_all_single(w, &o, &in));
        for (i = 0; i < 6; ++i) CHECK(hout[i] == hx[i]);
    }
    {
        DLTensor o = view(iout, i64, n6, 1), in = view(ix, i64, n6, 1);
        EXPECT_OK(ds_comm_all_gather_into_tensor(w, &o, &in));
        for (i = 0; i < 6; ++i) CHECK(iout[i] == ix[i]);
        EXPECT_OK(ds_comm_broadcast(w, &o, 0));
        CHECK(iout[5] == (1LL << 40));
    }
    EXPECT_OK(ds_comm_barrier(w));
}

static void test_errors(ds_comm_t* w) {
    DLDataType f32 = {kDLFloat, 32, 1}, i32 = {kDLInt, 32, 1};
    float x[8] = {0}, y[8] = {0};
    int32_t k[8] = {0};
    int64_t n8[1] = {8}, n5[1] = {5}, n4[1] = {4}, stride2[1] = {2};
    DLTensor t = view(x, f32, n8, 1), five = view(y, f32, n5, 1), ints = view(k, i32, n8, 1);
    DLTensor strided = view(x, f32, n4, 1);
    DLTensor gpu = view(x, f32, n8, 1);
    strided.strides = stride2;
    gpu.device.device_type = kDLCUDA;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_all_reduce(w, &t, 3), "op = 3");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_all_reduce(w, &t, -1), "op = -1");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_all_reduce(w, NULL, DS_REDUCE_SUM), "tensor");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_all_reduce(w, &ints, DS_REDUCE_AVG), "avg");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_all_reduce(w, &strided, DS_REDUCE_SUM), "contiguous");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_all_reduce(w, &gpu, DS_REDUCE_SUM), "tensor: is on cuda:0, but the");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_all_gather_into_tensor(w, &five, &t), "output has 5 elements");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_all_gather_into_tensor(w, &ints, &t),
                  "output is int32 but input is fp32");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_all_gather_into_tensor(w, &t, NULL), "input");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_reduce_scatter_tensor(w, &t, &five, DS_REDUCE_SUM), "input has 5");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_reduce_scatter_tensor(w, &t, &t, 9), "op = 9");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_all_to_all_single(w, &five, &t), "output has 5 elements");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_broadcast(w, &t, 1), "src = 1");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_comm_broadcast(w, &t, -1), "src = -1");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_comm_barrier(NULL), "comm");
    /* still usable */
    x[3] = 2.5f;
    EXPECT_OK(ds_comm_all_reduce(w, &t, DS_REDUCE_MAX));
    CHECK(x[3] == 2.5f);
}

int main(void) {
    ds_comm_t* w = NULL;
    ds_comm_t* dead = NULL;
    int64_t n1[1] = {1};
    float one = 1.0f;
    DLDataType f32 = {kDLFloat, 32, 1};
    DLTensor t = view(&one, f32, n1, 1);
    EXPECT_OK(ds_comm_create_world(NULL, &w));
    test_copies(w);
    test_errors(w);
    EXPECT_OK(ds_comm_create_world(NULL, &dead));
    ds_comm_destroy(dead);
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_comm_all_reduce(dead, &t, DS_REDUCE_SUM), NULL);
    EXPECT_OK(ds_comm_finalize(w));
    EXPECT_STATUS(DS_ERR_INVALID_STATE, ds_comm_all_reduce(w, &t, DS_REDUCE_SUM), "finalized");
    ds_comm_destroy(w);
    return ds_test_finish();
}
