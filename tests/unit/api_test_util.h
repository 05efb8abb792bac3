// Helpers for unit tests that drive the engine through the public C API: a
// contiguous fp32 CPU DLTensor over caller memory, and an engine handle that
// is destroyed with its scope.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "deepspeed_c.h"

namespace api_test {

inline DLTensor f32_tensor(float* data, int64_t* shape, int32_t ndim) {
    DLTensor t;
    std::memset(&t, 0, sizeof t);
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = ndim;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
    return t;
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
