// ds::Error — the one exception type used inside the library. The C ABI shim
// (src/api) turns it into a status code plus ds_last_error() text; nothing
// below src/api returns status codes by hand.
#pragma once

#include <exception>
#include <string>

#include "deepspeed_c.h"  // status codes only

namespace ds {

class Error : public std::exception {
public:
    Error(ds_status_t status, std::string message)
        : status_(status), message_(std::move(message)) {}
    ds_status_t status() const noexcept { return status_; }
    const char* what() const noexcept override { return message_.c_str(); }

private:
    ds_status_t status_;
    std::string message_;
};

// printf-style message formatting.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Throw ds::Error(status, formatted message).
[[noreturn]] void fail(ds_status_t status, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

}  // namespace ds

// DS_CHECK(cond, status, fmt, ...): throw ds::Error when cond is false.
#define DS_CHECK(cond, status, ...)          \
    do {                                     \
        if (!(cond)) ::ds::fail((status), __VA_ARGS__); \
    } while (0)
