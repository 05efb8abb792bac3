// Allocation-failure injection: failing the n-th allocation anywhere in
// create -> add_param -> init returns DS_ERR_OUT_OF_MEMORY, leaves *out NULL
// or the engine usable, and leaks nothing (run under ASan in the sanitizer
// build).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "api_test_util.h"
#include "core/allocator.h"
#include "deepspeed_c.h"

namespace {

DLTensor f32(float* data, int64_t* shape) { return api_test::f32_tensor(data, shape, 1); }

// Runs the whole set-up path; returns the first failing status (or DS_OK).
ds_status_t build_engine(const char* config) {
    std::vector<float> a(1000, 1.0f), b(17, 2.0f);
    int64_t sa = 1000, sb = 17;
    DLTensor ta = f32(a.data(), &sa), tb = f32(b.data(), &sb);
    ds_engine_t* e = nullptr;
    ds_status_t s = ds_engine_create(config, nullptr, &e);
    if (s != DS_OK) {
        EXPECT_EQ(e, nullptr);
        return s;
    }
    if (s == DS_OK) s = ds_engine_add_param(e, "a", &ta, DS_PARAM_TRAINABLE);
    if (s == DS_OK) s = ds_engine_add_param(e, "b", &tb, DS_PARAM_TRAINABLE);
    if (s == DS_OK) s = ds_engine_init(e);
    if (s != DS_OK) {
        // the engine stays usable for queries and is destroyed cleanly
        int32_t world = 0;
        EXPECT_EQ(ds_engine_world_size(e, &world), DS_OK);
    }
    ds_engine_destroy(e);
    return s;
}

class EngineOom : public ::testing::TestWithParam<const char*> {};

TEST_P(EngineOom, EveryAllocationFailureIsOutOfMemory) {
    const char* config = GetParam();
    int failures = 0;
    for (int64_t n = 1; n < 200; ++n) {
        ds::Allocator::set_fail_after(n);
        ds_status_t s = build_engine(config);
        ds::Allocator::set_fail_after(-1);
        if (s == DS_OK) break;  // n is past the last allocation of the path
        EXPECT_EQ(s, DS_ERR_OUT_OF_MEMORY) << "allocation " << n << ": " << ds_last_error();
        EXPECT_NE(std::string(ds_last_error()).find("bytes"), std::string::npos) << ds_last_error();
        ++failures;
    }
    EXPECT_GE(failures, 3);  // masters, grads and moments at least
    EXPECT_EQ(build_engine(config), DS_OK) << ds_last_error();
}

INSTANTIATE_TEST_SUITE_P(
    Precisions, EngineOom,
    ::testing::Values(
        "{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"AdamW\"}}",
        "{\"train_batch_size\": 1, \"fp16\": {\"enabled\": true}, \"optimizer\": {\"type\": \"Adam\"}}",
        "{\"train_batch_size\": 1, \"bf16\": {\"enabled\": true}, \"optimizer\": {\"type\": \"Lamb\"}}"));

}  // namespace
