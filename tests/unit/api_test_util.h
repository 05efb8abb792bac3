// Helpers for unit tests that drive the engine through the public C API: a
// contiguous CPU DLTensor over caller memory (any dtype, or fp32), every
// parameter's full fp32 values or gradients read into host vectors, and an
// engine handle that is destroyed with its scope.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "deepspeed_c.h"

namespace api_test {

inline DLTensor cpu_tensor(void* data, int64_t* shape, int32_t ndim, DLDataType dtype) {
    DLTensor t;
    std::memset(&t, 0, sizeof t);
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = ndim;
    t.dtype = dtype;
    t.shape = shape;
    return t;
}

inline DLTensor f32_tensor(float* data, int64_t* shape, int32_t ndim) {
    return cpu_tensor(data, shape, ndim, {kDLFloat, 32, 1});
}

// A full-tensor getter of the C API: ds_engine_get_full_fp32_param or
// ds_engine_get_full_grad.
using FullGetter = ds_status_t (*)(ds_engine_t*, const char*, DLTensor*);

// Every parameter of `e` read by `get` as fp32 of its full shape, in
// registration order (a failed read is a test failure, its vector left zero).
inline std::vector<std::vector<float>> every_param(ds_engine_t* e, FullGetter get) {
    std::vector<std::vector<float>> out;
    int64_t n = 0;
    EXPECT_EQ(ds_engine_num_params(e, &n), DS_OK) << ds_last_error();
    for (int64_t p = 0; p < n; ++p) {
        ds_param_info_t info{};
        info.struct_size = sizeof info;
        EXPECT_EQ(ds_engine_param_info(e, p, &info), DS_OK) << ds_last_error();
        std::vector<float> v(static_cast<size_t>(info.numel));
        std::vector<int64_t> shape(info.shape, info.shape + info.ndim);
        DLTensor t = f32_tensor(v.data(), shape.data(), info.ndim);
        EXPECT_EQ(get(e, info.name, &t), DS_OK) << info.name << ": " << ds_last_error();
        out.push_back(std::move(v));
    }
    return out;
}

// Every parameter's fp32 master weights (DeepSpeed's safe_get_full_fp32_param).
inline std::vector<std::vector<float>> fp32_masters(ds_engine_t* e) {
    return every_param(e, ds_engine_get_full_fp32_param);
}

// Every parameter's full fp32 gradient (safe_get_full_grad).
inline std::vector<std::vector<float>> full_grads(ds_engine_t* e) { return every_param(e, ds_engine_get_full_grad); }

// ds_engine_create(json) on construction (a failure is a test failure, `e`
// stays NULL), ds_engine_destroy on scope exit.
struct ScopedEngine {
    ds_engine_t* e = nullptr;
    explicit ScopedEngine(const std::string& json) {
        ds_status_t s = ds_engine_create(json.c_str(), nullptr, &e);
        EXPECT_EQ(s, DS_OK) << ds_last_error();
    }
    ~ScopedEngine() { ds_engine_destroy(e); }
    ScopedEngine(const ScopedEngine&) = delete;
    ScopedEngine& operator=(const ScopedEngine&) = delete;
};

}  // namespace api_test
