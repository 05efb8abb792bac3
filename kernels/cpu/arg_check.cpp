// ArgCheck and the thread-local message behind dsk_last_error().
#include "arg_check.h"

#include <cstdarg>
#include <cstdio>

namespace {

thread_local char g_last_error[512] = "";

void vrecord(const char* fmt, va_list ap) { std::vsnprintf(g_last_error, sizeof g_last_error, fmt, ap); }

}  // namespace

namespace ds::kernels {

int set_last_error(int status, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vrecord(fmt, ap);
    va_end(ap);
    return status;
}

void ArgCheck::fail(const char* fmt, ...) {
    status_ = DSK_ERR_INVALID_ARGUMENT;
    va_list ap;
    va_start(ap, fmt);
    vrecord(fmt, ap);
    va_end(ap);
}

ArgCheck& ArgCheck::dtype(const char* arg, int dtype) {
    if (!failed() && dtype != DSK_F32 && dtype != DSK_F16 && dtype != DSK_BF16)
        fail("%s: %s = %d is not DSK_F32, DSK_F16 or DSK_BF16", kernel_, arg, dtype);
    return *this;
}

ArgCheck& ArgCheck::ptr(const char* arg, const void* p, size_t n) {
    if (!failed() && p == nullptr && n != 0) fail("%s: %s is NULL (n = %zu)", kernel_, arg, n);
    return *this;
}

ArgCheck& ArgCheck::w16(const void* w16, int w_dtype) {
    if (!failed() && w16 != nullptr && w_dtype != DSK_F16 && w_dtype != DSK_BF16)
        fail("%s: w_dtype = %d is not DSK_F16 or DSK_BF16 (w16 is not NULL)", kernel_, w_dtype);
    return *this;
}

ArgCheck& ArgCheck::hparams(const void* h) {
    if (!failed() && h == nullptr) fail("%s: h (hyper-parameters) is NULL", kernel_);
    return *this;
}

}  // namespace ds::kernels

extern "C" const char* dsk_last_error(void) noexcept { return g_last_error; }
