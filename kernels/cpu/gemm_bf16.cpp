// dsk_cpu_gemm_bf16 / dsk_cpu_linear_fwd_bf16 (kernels/nn_gemm.h): the fp32
// operands are rounded to bf16 into per-thread buffers, then one oneDNN bf16
// matmul (fp32 accumulation and output) runs. Where none exists natively
// (no oneDNN, another engine chosen, an AVX2-only CPU: oneDNN would only
// offer its scalar reference), the rounded values are widened back to fp32
// and the fp32 GEMM runs on them: the same products, the same accumulation
// type, so every machine computes the same function.
#include <algorithm>
#include <cstdint>
#include <mutex>
#include <initializer_list>
#include <new>
#include <vector>

#include <omp.h>

#include "arg_check.h"
#include "gemm_check.h"
#include "gemm_engines.h"
#include "nn_gemm.h"

namespace {

using ds::kernels::set_last_error;
namespace gemm = ds::kernels::gemm;

// Per-thread buffers for the rounded operands, kept between calls while
// small; larger ones are released after each call (release_large) so that
// an occasional big product (a GPT's lm_head) does not hold its operands'
// copies, untracked by the engine's accounting, for the rest of the run.
thread_local std::vector<uint16_t> t_a16, t_b16, t_c16;
thread_local std::vector<float> t_a32, t_b32, t_c32;

constexpr size_t kKeepBytes = size_t{1} << 20;

template <class T>
void release_if_large(std::vector<T>& v) {
    if (v.capacity() * sizeof(T) > kKeepBytes) std::vector<T>().swap(v);
}

void release_large() {
    release_if_large(t_a16), release_if_large(t_b16), release_if_large(t_c16);
    release_if_large(t_a32), release_if_large(t_b32), release_if_large(t_c32);
}

// Linear backward runs over blocks of rows when dy is larger than this
// (elements): its bf16 copy, the largest operand (a GPT's logits gradient),
// then exists one block at a time. dW sums the blocks' products in order.
constexpr int64_t kBwdBlockElems = int64_t{1} << 20;

bool native() {
    static std::once_flag once;
    static bool ok = false;
    std::call_once(once, [] { ok = gemm::onednn_bf16_native(); });
    return ok && dsk_cpu_gemm_engine_id() == DSK_GEMM_ENGINE_ONEDNN;
}

// Elements a rows x cols operand with leading dimension ld spans; -1 when a
// size is negative, ld is too small or the span overflows (the fp32 GEMM
// then reports the argument by name).
int64_t span(int64_t rows, int64_t cols, int64_t ld) {
    if (rows < 0 || cols < 0 || ld < std::max<int64_t>(1, cols)) return -1;
    if (rows == 0 || cols == 0) return 0;
    int64_t t, s;
    if (__builtin_mul_overflow(rows - 1, ld, &t) || __builtin_add_overflow(t, cols, &s)) return -1;
    return s;
}

// One fp32 array to round into a bf16 buffer.
struct ToRound {
    const float* src;
    int64_t n;
    std::vector<uint16_t>* dst;
};

// Column sums of a [rows, cols] fp32 array added into acc (double), each
// column's rows in order: Linear's bias gradient, summed in the pass that
// rounds dy (as dsk_cpu_bias_grad sums, so the result is the same bit for bit).
struct ColumnSums {
    const float* src = nullptr;
    int64_t rows = 0, cols = 0;
    double* acc = nullptr;
};

// Rounds every array in `jobs` to bf16 in one OpenMP region (not one per
// array: each region ends in a barrier, which costs most on a busy machine).
// The arrays are treated as one concatenated range split evenly by thread;
// `sums` (optional) is computed in the same region, by blocks of columns.
int round_all(std::initializer_list<ToRound> jobs, const ColumnSums& sums = {}) {
    int64_t total = 0;
    for (const ToRound& j : jobs) {
        j.dst->resize(static_cast<size_t>(j.n));
        total += j.n;
    }
    int status = DSK_OK;
    constexpr int64_t kCols = 256;
    const int64_t col_blocks = sums.acc != nullptr ? (sums.cols + kCols - 1) / kCols : 0;
#pragma omp parallel if (total >= 65536)
    {
#pragma omp for schedule(static) nowait
        for (int64_t blk = 0; blk < col_blocks; ++blk) {
            const int64_t j0 = blk * kCols, j1 = std::min(sums.cols, j0 + kCols);
            for (int64_t r = 0; r < sums.rows; ++r) {
                const float* row = sums.src + r * sums.cols;
                for (int64_t j = j0; j < j1; ++j) sums.acc[j] += row[j];
            }
        }
        const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t lo = total * t / nt, hi = total * (t + 1) / nt;
        int64_t start = 0;
        int mine = DSK_OK;
        for (const ToRound& j : jobs) {
            const int64_t a = std::max(lo, start), b = std::min(hi, start + j.n);
            if (a < b && mine == DSK_OK)
                mine = dsk_cpu_convert(j.src + (a - start), DSK_F32, j.dst->data() + (a - start), DSK_BF16,
                                       static_cast<size_t>(b - a));
            start += j.n;
        }
        if (mine != DSK_OK) {
#pragma omp critical(dsk_round_all)
            status = mine;
        }
    }
    return status;
}

// bf16 values widened back to fp32 (the fallback's operands).
int widen(const uint16_t* b16, size_t n, std::vector<float>* f32) {
    f32->resize(n);
    return dsk_cpu_convert(b16, DSK_BF16, f32->data(), DSK_F32, n);
}
int widen(const std::vector<uint16_t>& b16, std::vector<float>* f32) { return widen(b16.data(), b16.size(), f32); }

int out_of_memory(const char* kernel) {
    return set_last_error(DSK_ERR_OUT_OF_MEMORY, "%s: out of memory for the bf16 copies of the operands", kernel);
}

// One product (bias nullable: linear only). sa, sb: the elements A and B
// span. b16: B already in bf16 (p.b unused), else p.b is rounded.
int run_products(const char* kernel, const gemm::Problem& p, int64_t sa, int64_t sb, const float* bias,
                 const uint16_t* b16);

int run(const char* kernel, const gemm::Problem& p, int64_t sa, int64_t sb, const float* bias,
        const uint16_t* b16 = nullptr) {
    const int s = run_products(kernel, p, sa, sb, bias, b16);
    release_large();
    return s;
}

int run_products(const char* kernel, const gemm::Problem& p, int64_t sa, int64_t sb, const float* bias,
                 const uint16_t* b16) {
    try {
        if (b16 != nullptr) {
            if (int s = round_all({{p.a, sa, &t_a16}}); s != DSK_OK) return s;
        } else if (int s = round_all({{p.a, sa, &t_a16}, {p.b, sb, &t_b16}}); s != DSK_OK) {
            return s;
        }
        const uint16_t* bb = b16 != nullptr ? b16 : t_b16.data();
        if (native()) {
            const int s = gemm::onednn_gemm_bf16(p, t_a16.data(), bb, bias);
            if (s >= 0) return s;  // else: refused for this layout, fall back
        }
        if (int s = widen(t_a16, &t_a32); s != DSK_OK) return s;
        if (int s = widen(bb, static_cast<size_t>(sb), &t_b32); s != DSK_OK) return s;
        if (bias != nullptr) return dsk_cpu_linear_fwd(t_a32.data(), t_b32.data(), bias, p.c, p.m, p.k, p.n);
        return dsk_cpu_gemm(p.trans_a, p.trans_b, p.m, p.n, p.k, p.alpha, t_a32.data(), p.lda, t_b32.data(), p.ldb,
                            p.beta, p.c, p.ldc);
    } catch (const std::bad_alloc&) {
        return out_of_memory(kernel);
    }
}

// dx[rows, in] = dy w and dw[out, in] += dy^T x for one block of rows; w is
// rounded on the first block only and kept in t_c16, unless it came in bf16
// (w16: read in place).
// db_acc (nullable): the bias gradient's column sums, added in the rounding pass.
int linear_bwd_rows(const float* dy, const float* x, const float* w, const uint16_t* w16, float* dx, float* dw,
                    double* db_acc, int64_t rows, int64_t in, int64_t out, bool first) {
    const bool round_w = first && w16 == nullptr;
    const ColumnSums sums{dy, rows, out, db_acc};
    if (round_w) {
        if (int s = round_all({{dy, rows * out, &t_a16}, {x, rows * in, &t_b16}, {w, out * in, &t_c16}}, sums);
            s != DSK_OK)
            return s;
    } else if (int s = round_all({{dy, rows * out, &t_a16}, {x, rows * in, &t_b16}}, sums); s != DSK_OK) {
        return s;
    }
    gemm::Problem pdx;  // dx[rows, in] = dy[rows, out] w[out, in]
    pdx.m = rows, pdx.n = in, pdx.k = out, pdx.lda = out, pdx.ldb = in, pdx.ldc = in, pdx.c = dx;
    gemm::Problem pdw;  // dw[out, in] += dy^T x
    pdw.trans_a = true, pdw.m = out, pdw.n = in, pdw.k = rows, pdw.lda = out, pdw.ldb = in, pdw.ldc = in;
    pdw.beta = 1.0f, pdw.c = dw;
    const uint16_t* wb = w16 != nullptr ? w16 : t_c16.data();
    if (native()) {
        int s = gemm::onednn_gemm_bf16(pdx, t_a16.data(), wb, nullptr);
        if (s == DSK_OK) s = gemm::onednn_gemm_bf16(pdw, t_a16.data(), t_b16.data(), nullptr);
        if (s >= 0) return s;  // -1: refused for this layout, fall back
    }
    if (int s = widen(t_a16, &t_a32); s != DSK_OK) return s;
    if (int s = widen(t_b16, &t_b32); s != DSK_OK) return s;
    if (first || t_c32.size() != static_cast<size_t>(out * in))
        if (int s = widen(wb, static_cast<size_t>(out * in), &t_c32); s != DSK_OK) return s;
    if (int s = dsk_cpu_gemm(0, 0, rows, in, out, 1.0f, t_a32.data(), out, t_c32.data(), in, 0.0f, dx, in))
        return s;
    return dsk_cpu_gemm(1, 0, out, in, rows, 1.0f, t_a32.data(), out, t_b32.data(), in, 1.0f, dw, in);
}

}  // namespace

extern "C" int dsk_cpu_gemm_bf16(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                                 int64_t ldc) noexcept {
    const int64_t sa = trans_a ? span(k, m, lda) : span(m, k, lda);
    const int64_t sb = trans_b ? span(n, k, ldb) : span(k, n, ldb);
    const bool ok_trans = (trans_a == 0 || trans_a == 1) && (trans_b == 0 || trans_b == 1);
    // Bad arguments, degenerate sizes and alpha 0 (A, B not read): the fp32
    // GEMM checks and handles them, naming the argument.
    if (!ok_trans || sa < 0 || sb < 0 || n < 0 || m == 0 || n == 0 || k == 0 || alpha == 0.0f ||
        (sa > 0 && a == nullptr) || (sb > 0 && b == nullptr) || c == nullptr || ldc < std::max<int64_t>(1, n))
        return dsk_cpu_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    gemm::Problem p;
    p.trans_a = trans_a != 0, p.trans_b = trans_b != 0;
    p.m = m, p.n = n, p.k = k, p.alpha = alpha, p.beta = beta;
    p.a = a, p.lda = lda, p.b = b, p.ldb = ldb, p.c = c, p.ldc = ldc;
    return run("dsk_gemm_bf16", p, sa, sb, nullptr);
}

namespace {

// Linear forward with bf16 products; exactly one of w (fp32, rounded here)
// and w16 (bf16, read in place) is given.
int linear_fwd(const char* kn, const float* x, const float* w, const uint16_t* w16, const float* bias, float* y,
               int64_t rows, int64_t in, int64_t out) {
    // Bad arguments and degenerate sizes: the fp32 kernel's checks and cases
    // (it reads no weight there, so w16 may stand in for w).
    if (rows <= 0 || in <= 0 || out <= 0 || x == nullptr || (w == nullptr && w16 == nullptr) || y == nullptr)
        return dsk_cpu_linear_fwd(x, w != nullptr ? w : reinterpret_cast<const float*>(w16), bias, y, rows, in, out);
    int64_t sx, sw;
    if (__builtin_mul_overflow(rows, in, &sx) || __builtin_mul_overflow(out, in, &sw))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: rows %lld x in %lld x out %lld is too large", kn,
                              static_cast<long long>(rows), static_cast<long long>(in), static_cast<long long>(out));
    gemm::Problem p;  // y = x w^T, w [out, in]
    p.trans_b = true;
    p.m = rows, p.n = out, p.k = in, p.a = x, p.lda = in, p.b = w, p.ldb = in, p.c = y, p.ldc = out;
    return run(kn, p, sx, sw, bias, w16);
}

int linear_bwd(const char* kn, const float* dy, const float* x, const float* w, const uint16_t* w16, float* dx,
               float* dw, float* db, int64_t rows, int64_t in, int64_t out) {
    const void* wp = w16 != nullptr ? static_cast<const void*>(w16) : static_cast<const void*>(w);
    if (int s = gemm::check_linear_bwd(kn, dy, x, wp, dx, dw, rows, in, out); s != DSK_OK) return s;
    const int64_t sx = rows * in;  // within int64: checked
    if (rows == 0 || in == 0 || out == 0) {
        if (sx > 0) std::fill(dx, dx + sx, 0.0f);  // dx = dy w with out == 0: zeros
        return DSK_OK;                              // dw and db gain nothing
    }
    const int64_t block = std::max<int64_t>(1, kBwdBlockElems / out);
    int s = DSK_OK;
    try {
        // db's column sums run in the pass that rounds dy (one parallel region
        // fewer per call), across the row blocks, and land in db at the end.
        std::vector<double> db_acc(db != nullptr ? static_cast<size_t>(out) : 0, 0.0);
        for (int64_t r0 = 0; r0 < rows && s == DSK_OK; r0 += block) {
            const int64_t r = std::min(block, rows - r0);
            s = linear_bwd_rows(dy + r0 * out, x + r0 * in, w, w16, dx + r0 * in, dw,
                                db != nullptr ? db_acc.data() : nullptr, r, in, out, r0 == 0);
        }
        if (s == DSK_OK && db != nullptr)
            for (int64_t j = 0; j < out; ++j) db[j] += static_cast<float>(db_acc[static_cast<size_t>(j)]);
    } catch (const std::bad_alloc&) {
        s = out_of_memory(kn);
    }
    release_large();
    return s;
}

}  // namespace

extern "C" int dsk_cpu_linear_fwd_bf16(const float* x, const float* w, const float* bias, float* y, int64_t rows,
                                       int64_t in, int64_t out) noexcept {
    return linear_fwd("dsk_linear_fwd_bf16", x, w, nullptr, bias, y, rows, in, out);
}

extern "C" int dsk_cpu_linear_fwd_bf16w(const float* x, const uint16_t* w16, const float* bias, float* y,
                                        int64_t rows, int64_t in, int64_t out) noexcept {
    if (w16 == nullptr && rows > 0 && in > 0 && out > 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "dsk_linear_fwd_bf16w: w16 is NULL (rows %lld, in %lld, out %lld)",
                              static_cast<long long>(rows), static_cast<long long>(in), static_cast<long long>(out));
    return linear_fwd("dsk_linear_fwd_bf16w", x, nullptr, w16, bias, y, rows, in, out);
}

extern "C" int dsk_cpu_linear_bwd_bf16(const float* dy, const float* x, const float* w, float* dx, float* dw,
                                       float* db, int64_t rows, int64_t in, int64_t out) noexcept {
    return linear_bwd("dsk_linear_bwd_bf16", dy, x, w, nullptr, dx, dw, db, rows, in, out);
}

extern "C" int dsk_cpu_linear_bwd_bf16w(const float* dy, const float* x, const uint16_t* w16, float* dx, float* dw,
                                        float* db, int64_t rows, int64_t in, int64_t out) noexcept {
    return linear_bwd("dsk_linear_bwd_bf16w", dy, x, nullptr, w16, dx, dw, db, rows, in, out);
}

extern "C" int dsk_cpu_gemm_bf16_native(void) noexcept { return native() ? 1 : 0; }
