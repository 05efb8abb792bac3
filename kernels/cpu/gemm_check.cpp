// The matrix products' argument checks (gemm_check.h).
#include "gemm_check.h"

#include <algorithm>

#include "arg_check.h"

namespace ds::kernels::gemm {

namespace {

// a*b + c into *out; false on int64 overflow.
bool mul_add(int64_t a, int64_t b, int64_t c, int64_t* out) {
    int64_t t;
    return !__builtin_mul_overflow(a, b, &t) && !__builtin_add_overflow(t, c, out);
}

// Checks one operand: `rows` x `cols` stored with leading dimension ld, and
// the elements `batch` copies `stride` apart span. Returns DSK_OK or records why not.
int check_operand(const char* kernel, const char* name, const char* ld_name, const void* p, int64_t rows,
                  int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
    if (ld < std::max<int64_t>(1, cols))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: %s = %lld is less than max(1, %lld), the row length of %s",
                              kernel, ld_name, static_cast<long long>(ld), static_cast<long long>(cols), name);
    if (rows == 0 || cols == 0 || batch == 0) return DSK_OK;
    if (p == nullptr)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: %s is NULL (%lld x %lld)", kernel, name,
                              static_cast<long long>(rows), static_cast<long long>(cols));
    int64_t span, total;
    if (!mul_add(rows - 1, ld, cols, &span) || !mul_add(batch - 1, stride, span, &total))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: %s spans more than 2^63 elements", kernel, name);
    return DSK_OK;
}

}  // namespace

int check_gemm(const char* kernel, const Problem& p, int ta, int tb) {
    if (ta != 0 && ta != 1)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: trans_a = %d is not 0 or 1", kernel, ta);
    if (tb != 0 && tb != 1)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: trans_b = %d is not 0 or 1", kernel, tb);
    const struct { const char* name; int64_t v; } dims[] = {
        {"m", p.m}, {"n", p.n}, {"k", p.k}, {"batch", p.batch},
        {"stride_a", p.stride_a}, {"stride_b", p.stride_b}, {"stride_c", p.stride_c}};
    for (const auto& d : dims)
        if (d.v < 0)
            return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: %s = %lld is negative", kernel, d.name,
                                  static_cast<long long>(d.v));
    const int64_t ka = ta ? p.m : p.k, ra = ta ? p.k : p.m;
    const int64_t kb = tb ? p.k : p.n, rb = tb ? p.n : p.k;
    const int64_t nb = p.alpha == 0.0f ? 0 : p.batch;  // alpha 0: A and B are not read
    int s = check_operand(kernel, "a", "lda", p.a, ra, ka, p.lda, nb, p.stride_a);
    if (s == DSK_OK) s = check_operand(kernel, "b", "ldb", p.b, rb, kb, p.ldb, nb, p.stride_b);
    if (s == DSK_OK) s = check_operand(kernel, "c", "ldc", p.c, p.m, p.n, p.ldc, p.batch, p.stride_c);
    if (s != DSK_OK) return s;
    if (p.batch > 1 && p.m > 0 && p.n > 0 && p.stride_c < (p.m - 1) * p.ldc + p.n)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT,
                              "%s: stride_c = %lld makes the %lld C matrices overlap (each spans %lld elements)",
                              kernel, static_cast<long long>(p.stride_c), static_cast<long long>(p.batch),
                              static_cast<long long>((p.m - 1) * p.ldc + p.n));
    return DSK_OK;
}

int check_linear_fwd(const char* kernel, const void* x, const void* w, const char* w_name, const void* y,
                     int64_t rows, int64_t in, int64_t out) {
    if (rows < 0 || in < 0 || out < 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: negative size (rows %lld, in %lld, out %lld)", kernel,
                              static_cast<long long>(rows), static_cast<long long>(in), static_cast<long long>(out));
    const bool some = rows > 0 && out > 0;
    if ((some && y == nullptr) || (some && in > 0 && (x == nullptr || w == nullptr)))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: %s is NULL (rows %lld, in %lld, out %lld)", kernel,
                              y == nullptr ? "y" : x == nullptr ? "x" : w_name, static_cast<long long>(rows),
                              static_cast<long long>(in), static_cast<long long>(out));
    return DSK_OK;
}

int check_linear_bwd(const char* kernel, const void* dy, const void* x, const void* w, const void* dx,
                     const void* dw, int64_t rows, int64_t in, int64_t out) {
    if (rows < 0 || in < 0 || out < 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: negative size (rows %lld, in %lld, out %lld)", kernel,
                              static_cast<long long>(rows), static_cast<long long>(in), static_cast<long long>(out));
    int64_t sdy, sx, sw;
    if (__builtin_mul_overflow(rows, out, &sdy) || __builtin_mul_overflow(rows, in, &sx) ||
        __builtin_mul_overflow(out, in, &sw))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: rows %lld x in %lld x out %lld is too large", kernel,
                              static_cast<long long>(rows), static_cast<long long>(in), static_cast<long long>(out));
    const struct { const char* name; const void* p; int64_t n; } ptrs[] = {
        {"dy", dy, sdy}, {"x", x, sx}, {"w", w, sw}, {"dx", dx, sx}, {"dw", dw, sw}};
    for (const auto& q : ptrs)
        if (q.p == nullptr && q.n > 0)
            return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: %s is NULL (rows %lld, in %lld, out %lld)", kernel,
                                  q.name, static_cast<long long>(rows), static_cast<long long>(in),
                                  static_cast<long long>(out));
    return DSK_OK;
}

}  // namespace ds::kernels::gemm
