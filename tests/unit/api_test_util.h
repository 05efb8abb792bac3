// Helpers for unit tests that drive the engine through the public C API: a
// contiguous CPU DLTensor over caller memory (any dtype, or fp32), and an
// engine handle that is destroyed with its scope.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>

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
