#include "core/error.h"

#include <cstdarg>
#include <cstdio>
#include <vector>

namespace ds {

static std::string vformat(const char* fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = std::vsnprintf(nullptr, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return fmt;
    std::string out(static_cast<size_t>(n), '\0');
    std::vsnprintf(&out[0], out.size() + 1, fmt, ap);
    return out;
}

std::string format(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string s = vformat(fmt, ap);
    va_end(ap);
    return s;
}

void fail(ds_status_t status, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string s = vformat(fmt, ap);
    va_end(ap);
    throw Error(status, std::move(s));
}

}  // namespace ds
