// Argument checks shared by the kernel dispatchers (baseline code only).
// Failures throw ds::Error(DS_ERR_INVALID_ARGUMENT) naming kernel and argument.
#pragma once

#include <cstddef>

#include "core/error.h"
#include "kernels.h"

namespace {

inline void check_dtype(const char* kernel, const char* arg, int dtype) {
    DS_CHECK(dtype == DSK_F32 || dtype == DSK_F16 || dtype == DSK_BF16, DS_ERR_INVALID_ARGUMENT,
             "%s: %s = %d is not DSK_F32, DSK_F16 or DSK_BF16", kernel, arg, dtype);
}

inline void check_ptr(const char* kernel, const char* arg, const void* p, size_t n) {
    DS_CHECK(p != nullptr || n == 0, DS_ERR_INVALID_ARGUMENT, "%s: %s is NULL (n = %zu)", kernel, arg, n);
}

// Optional 16-bit copy of the updated weights: NULL, or F16/BF16.
inline void check_w16(const char* kernel, const void* w16, int w_dtype) {
    DS_CHECK(w16 == nullptr || w_dtype == DSK_F16 || w_dtype == DSK_BF16, DS_ERR_INVALID_ARGUMENT,
             "%s: w_dtype = %d is not DSK_F16 or DSK_BF16 (w16 is not NULL)", kernel, w_dtype);
}

inline void check_hparams(const char* kernel, const void* h) {
    DS_CHECK(h != nullptr, DS_ERR_INVALID_ARGUMENT, "%s: h (hyper-parameters) is NULL", kernel);
}

}  // namespace
