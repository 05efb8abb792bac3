// The dense products on cuBLAS (dsk_cuda_gemm*, dsk_cuda_linear_*) on the
// device. fp32: against the float64 reference dsk_ref_gemm_f64 within a
// k-scaled bound, (k + 4) * 2^-23 * sum_l |alpha a_il b_lj| + 2^-23 |beta c|
// (fp32 sums of k terms in any order), and exactly where every product and
// partial sum is representable in fp32 (1 + j 2^-14 times 1 or 2): TF32,
// which keeps 10 fraction bits of each input, could not. bf16: against the CPU kernels (dsk_cpu_gemm_bf16 and
// the Linear twins) within the same bound on the bf16-rounded operands: both
// sum the same exact bf16 products in fp32, only the order differs. Every
// trans combination, padded leading dimensions, batches with a shared operand,
// k == 0 and alpha == 0 (C = beta C, NaN in C not propagated when beta == 0),
// bias present and absent, run-to-run bit equality, and a call through the
// kernel table on a stream of its own (the caller's device kept).
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "backend.h"
#include "gpu_test_util.h"
#include "nn_gemm.h"

using gput::DevBuf;
using gput::randv;
using gput::down;

namespace {

constexpr double kU = 1.0 / (1 << 23);  // fp32 epsilon

std::vector<float> bf16_round(const std::vector<float>& v) {
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = dsk_ref_bf16_to_f32(dsk_ref_f32_to_bf16(v[i]));
    return r;
}

std::vector<double> to_d(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }
std::vector<double> abs_d(const std::vector<float>& v) {
    std::vector<double> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = std::fabs(static_cast<double>(v[i]));
    return r;
}

int64_t span(int64_t rows, int64_t cols, int64_t ld) { return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols; }

// The float64 result and the error bound of one (row-major) product over
// the elements of C (gaps: want = the old value, bound 0).
struct Expect {
    std::vector<double> want, bound;
};
Expect expect(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const std::vector<float>& a, int64_t lda,
              const std::vector<float>& b, int64_t ldb, float beta, const std::vector<float>& c, int64_t ldc) {
    Expect e{to_d(c), std::vector<double>(c.size(), 0.0)};
    if (beta == 0.0f)
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) e.want[i * ldc + j] = 0.0;  // NaN there must not come through
    std::vector<double> mag(c.size(), 0.0);
    dsk_ref_gemm_f64(ta, tb, m, n, k, alpha, to_d(a).data(), lda, to_d(b).data(), ldb, beta, e.want.data(), ldc);
    dsk_ref_gemm_f64(ta, tb, m, n, k, std::fabs(alpha), abs_d(a).data(), lda, abs_d(b).data(), ldb, 0.0, mag.data(), ldc);
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            const size_t x = static_cast<size_t>(i * ldc + j);
            const double old = beta == 0.0f ? 0.0 : std::fabs(static_cast<double>(beta) * c[x]);
            e.bound[x] = (static_cast<double>(k) + 4) * kU * mag[x] + kU * old + 1e-30;
        }
    return e;
}

// Elements of got outside the bound (gaps must be untouched: bound 0, exact).
size_t misses(const std::vector<float>& got, const Expect& e) {
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double d = std::fabs(static_cast<double>(got[i]) - e.want[i]);
        if (std::isnan(e.want[i]) ? !std::isnan(got[i]) : !(d <= e.bound[i])) ++bad;
    }
    return bad;
}

void test_gemm_fp32() {
    for (int ta : {0, 1})
        for (int tb : {0, 1})
            for (int pad : {0, 5}) {
                const int64_t m = 67, n = 45, k = 301;
                const int64_t ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
                const int64_t lda = ca + pad, ldb = cb + 2 * pad, ldc = n + pad;
                const auto a = randv(span(ra, ca, lda), -1, 1, 10 + ta), b = randv(span(rb, cb, ldb), -1, 1, 20 + tb);
                for (float beta : {0.0f, 0.75f}) {
                    std::vector<float> c = randv(span(m, n, ldc), -1, 1, 30);
                    if (beta == 0.0f) c.assign(c.size(), std::numeric_limits<float>::quiet_NaN());
                    DevBuf da(a.data(), a.size() * 4), db(b.data(), b.size() * 4), dc(c.data(), c.size() * 4);
                    GPU_OK(dsk_cuda_gemm(ta, tb, m, n, k, 1.25f, da.as<float>(), lda, db.as<float>(), ldb, beta,
                                         dc.as<float>(), ldc, nullptr));
                    const auto got = down(dc, c.size());
                    const size_t bad = misses(got, expect(ta, tb, m, n, k, 1.25f, a, lda, b, ldb, beta, c, ldc));
                    GPU_CHECK(bad == 0, "gemm ta %d tb %d pad %d beta %g: %zu elements outside the fp32 bound", ta, tb,
                              pad, beta, bad);
                    // Run to run: the same bits.
                    DevBuf dc2(c.data(), c.size() * 4);
                    GPU_OK(dsk_cuda_gemm(ta, tb, m, n, k, 1.25f, da.as<float>(), lda, db.as<float>(), ldb, beta,
                                         dc2.as<float>(), ldc, nullptr));
                    const auto again = down(dc2, c.size());
                    size_t diff = 0;
                    for (size_t i = 0; i < got.size(); ++i) diff += std::memcmp(&got[i], &again[i], 4) != 0;
                    GPU_CHECK(diff == 0, "gemm not bitwise repeatable: %zu elements differ", diff);
                }
            }
    // A large product.
    const int64_t m = 512, n = 384, k = 2048;
    const auto a = randv(m * k, -1, 1, 41), b = randv(k * n, -1, 1, 42);
    std::vector<float> c(m * n, 0.0f);
    DevBuf da(a.data(), a.size() * 4), db(b.data(), b.size() * 4), dc(c.data(), c.size() * 4);
    GPU_OK(dsk_cuda_gemm(0, 0, m, n, k, 1.0f, da.as<float>(), k, db.as<float>(), n, 0.0f, dc.as<float>(), n, nullptr));
    const size_t bad = misses(down(dc, c.size()), expect(0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n));
    GPU_CHECK(bad == 0, "gemm 512x384x2048: %zu elements outside the fp32 bound", bad);
}

// No TF32: inputs 1 + j 2^-14 (j < 8) and 1 or 2, k = 256: every product and
// every partial sum is a multiple of 2^-14 below 2^10, exact in fp32 in any
// order, so the result must equal the float64 one exactly; TF32 would round
// each a to 1 (an error of ~0.05 per element).
void test_no_tf32() {
    const int64_t m = 256, n = 256, k = 256;
    std::vector<float> a(m * k), b(k * n), c(m * n, 0.0f);
    std::mt19937 r(7);
    for (auto& v : a) v = 1.0f + static_cast<float>(r() % 8) * (1.0f / 16384);
    for (auto& v : b) v = static_cast<float>(1 + r() % 2);
    DevBuf da(a.data(), a.size() * 4), db(b.data(), b.size() * 4), dc(c.data(), c.size() * 4);
    for (int ta : {0, 1}) {  // A read as stored, or as its transpose (both exact)
        GPU_OK(dsk_cuda_gemm(ta, 0, m, n, k, 1.0f, da.as<float>(), k, db.as<float>(), n, 0.0f, dc.as<float>(), n,
                             nullptr));
        const auto got = down(dc, c.size());
        std::vector<double> want(c.size(), 0.0);
        dsk_ref_gemm_f64(ta, 0, m, n, k, 1.0, to_d(a).data(), k, to_d(b).data(), n, 0.0, want.data(), n);
        size_t bad = 0;
        for (size_t i = 0; i < got.size(); ++i) bad += static_cast<double>(got[i]) != want[i];
        GPU_CHECK(bad == 0, "exact fp32 product ta %d: %zu elements inexact (TF32?)", ta, bad);
    }
}

void test_degenerate() {
    const int64_t m = 5, n = 7, ldc = 9;
    std::vector<float> c = randv(span(m, n, ldc), -1, 1, 50);
    const std::vector<float> a(64, 1.0f);
    DevBuf dc(c.data(), c.size() * 4), da(a.data(), a.size() * 4);
    // k == 0: C = beta C (A and B not read: NULL is fine).
    GPU_OK(dsk_cuda_gemm(0, 0, m, n, 0, 1.0f, nullptr, 1, nullptr, n, 0.5f, dc.as<float>(), ldc, nullptr));
    auto got = down(dc, c.size());
    size_t bad = 0;
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < ldc && i * ldc + j < static_cast<int64_t>(c.size()); ++j) {
            const size_t x = static_cast<size_t>(i * ldc + j);
            bad += got[x] != (j < n ? 0.5f * c[x] : c[x]);
        }
    GPU_CHECK(bad == 0, "k == 0, beta 0.5: %zu elements not beta*C (or a gap written)", bad);
    // alpha == 0 with beta == 0 over NaN: zeros.
    std::vector<float> nan(c.size(), std::numeric_limits<float>::quiet_NaN());
    DevBuf dn(nan.data(), nan.size() * 4);
    GPU_OK(dsk_cuda_gemm(1, 1, m, n, 3, 0.0f, nullptr, m, nullptr, 3, 0.0f, dn.as<float>(), ldc, nullptr));
    got = down(dn, nan.size());
    bad = 0;
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) bad += got[static_cast<size_t>(i * ldc + j)] != 0.0f;
    GPU_CHECK(bad == 0, "alpha 0, beta 0 over NaN: %zu elements not 0", bad);
    // m == 0: nothing happens.
    GPU_OK(dsk_cuda_gemm(0, 0, 0, n, 3, 1.0f, nullptr, 3, da.as<float>(), n, 0.0f, nullptr, n, nullptr));
}

void test_batched() {
    const int64_t m = 19, n = 23, k = 41, batch = 5;
    for (int ta : {0, 1})
        for (int tb : {0, 1}) {
            const int64_t ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
            const int64_t lda = ca + 1, ldb = cb + 3, ldc = n + 2;
            const int64_t sa = 0, sb = span(rb, cb, ldb) + 7, sc = span(m, n, ldc) + 4;  // A shared by every product
            const auto a = randv(span(ra, ca, lda), -2, 2, 60), b = randv((batch - 1) * sb + span(rb, cb, ldb), -2, 2, 61);
            const auto c = randv((batch - 1) * sc + span(m, n, ldc), -2, 2, 62);
            DevBuf da(a.data(), a.size() * 4), db(b.data(), b.size() * 4), dc(c.data(), c.size() * 4);
            GPU_OK(dsk_cuda_gemm_batched(ta, tb, m, n, k, -0.5f, da.as<float>(), lda, db.as<float>(), ldb, 1.0f,
                                         dc.as<float>(), ldc, batch, sa, sb, sc, nullptr));
            const auto got = down(dc, c.size());
            size_t bad = 0;
            for (int64_t i = 0; i < batch; ++i) {
                const std::vector<float> bi(b.begin() + i * sb, b.begin() + i * sb + span(rb, cb, ldb));
                const std::vector<float> ci(c.begin() + i * sc, c.begin() + i * sc + span(m, n, ldc));
                const std::vector<float> gi(got.begin() + i * sc, got.begin() + i * sc + span(m, n, ldc));
                bad += misses(gi, expect(ta, tb, m, n, k, -0.5f, a, lda, bi, ldb, 1.0f, ci, ldc));
            }
            for (int64_t i = 0; i + 1 < batch; ++i)  // the gaps between the C matrices are untouched
                for (int64_t x = span(m, n, ldc); x < sc; ++x) bad += got[i * sc + x] != c[i * sc + x];
            GPU_CHECK(bad == 0, "gemm_batched ta %d tb %d: %zu elements wrong", ta, tb, bad);
        }
}

// Linear forward (fp32) against the reference; bias and no bias; in == 0 (y = bias).
void test_linear_fwd() {
    const int64_t rows = 33, in = 130, out = 47;
    const auto x = randv(rows * in, -1, 1, 70), w = randv(out * in, -1, 1, 71), bias = randv(out, -1, 1, 72);
    DevBuf dx(x.data(), x.size() * 4), dw(w.data(), w.size() * 4), dbias(bias.data(), bias.size() * 4);
    std::vector<float> y(rows * out, 0.0f);
    DevBuf dy(y.data(), y.size() * 4);
    for (bool with_bias : {false, true}) {
        GPU_OK(dsk_cuda_linear_fwd(dx.as<float>(), dw.as<float>(), with_bias ? dbias.as<float>() : nullptr,
                                   dy.as<float>(), rows, in, out, nullptr));
        Expect e = expect(0, 1, rows, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
        if (with_bias)
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t j = 0; j < out; ++j) {
                    e.want[r * out + j] += bias[j];
                    e.bound[r * out + j] += kU * std::fabs(e.want[r * out + j]);
                }
        const size_t bad = misses(down(dy, y.size()), e);
        GPU_CHECK(bad == 0, "linear_fwd bias %d: %zu elements outside the bound", with_bias, bad);
    }
    GPU_OK(dsk_cuda_linear_fwd(dx.as<float>(), dw.as<float>(), dbias.as<float>(), dy.as<float>(), rows, 0, out, nullptr));
    const auto got = down(dy, y.size());
    size_t bad = 0;
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < out; ++j) bad += got[r * out + j] != bias[j];
    GPU_CHECK(bad == 0, "linear_fwd in == 0: %zu elements not the bias", bad);
}

// bf16 products: against the CPU kernel and the float64 product of the rounded operands.
void test_gemm_bf16() {
    for (int ta : {0, 1})
        for (int tb : {0, 1}) {
            const int64_t m = 41, n = 29, k = 517;
            const int64_t ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
            const int64_t lda = ca + 3, ldb = cb, ldc = n + 1;
            const auto a = randv(span(ra, ca, lda), -3, 3, 80 + ta), b = randv(span(rb, cb, ldb), -3, 3, 90 + tb);
            const auto c = randv(span(m, n, ldc), -1, 1, 99);
            DevBuf da(a.data(), a.size() * 4), db(b.data(), b.size() * 4), dc(c.data(), c.size() * 4);
            GPU_OK(dsk_cuda_gemm_bf16(ta, tb, m, n, k, 0.5f, da.as<float>(), lda, db.as<float>(), ldb, 0.25f,
                                      dc.as<float>(), ldc, nullptr));
            const auto got = down(dc, c.size());
            const Expect e = expect(ta, tb, m, n, k, 0.5f, bf16_round(a), lda, bf16_round(b), ldb, 0.25f, c, ldc);
            GPU_CHECK(misses(got, e) == 0, "gemm_bf16 ta %d tb %d vs float64 of bf16 operands: %zu misses", ta, tb,
                      misses(got, e));
            std::vector<float> cpu = c;
            GPU_OK(dsk_cpu_gemm_bf16(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 0.25f, cpu.data(), ldc));
            Expect ec = e;  // the CPU's fp32 result, same bound doubled (two fp32 orders)
            for (size_t i = 0; i < cpu.size(); ++i) ec.want[i] = cpu[i], ec.bound[i] *= 2;
            GPU_CHECK(misses(got, ec) == 0, "gemm_bf16 ta %d tb %d vs dsk_cpu_gemm_bf16: %zu misses", ta, tb,
                      misses(got, ec));
        }
}

// Within 2x the fp32 bound of k terms of magnitude mag (the same exact bf16 products, two orders).
size_t far_apart(const std::vector<float>& g, const std::vector<float>& c, const std::vector<double>& mag, int64_t k) {
    size_t bad = 0;
    for (size_t i = 0; i < g.size(); ++i)
        bad += !(std::fabs(static_cast<double>(g[i]) - c[i]) <= 2 * (k + 4) * kU * mag[i] + kU * std::fabs(c[i]) + 1e-30);
    return bad;
}

// |A| |B|^T-style magnitudes for the bounds: sum_l |x_il w_jl| etc. via the reference.
std::vector<double> mag(int ta, int tb, int64_t m, int64_t n, int64_t k, const std::vector<float>& a, int64_t lda,
                        const std::vector<float>& b, int64_t ldb) {
    std::vector<double> r(static_cast<size_t>(m * n), 0.0);
    dsk_ref_gemm_f64(ta, tb, m, n, k, 1.0, abs_d(a).data(), lda, abs_d(b).data(), ldb, 0.0, r.data(), n);
    return r;
}

void test_linear_bf16() {
    const int64_t rows = 70, in = 96, out = 53;
    const auto x = randv(rows * in, -2, 2, 100), w = randv(out * in, -1, 1, 101), bias = randv(out, -1, 1, 102);
    const auto dy = randv(rows * out, -1, 1, 103), dw0 = randv(out * in, -1, 1, 104), db0 = randv(out, -1, 1, 105);
    std::vector<uint16_t> w16(w.size());
    GPU_OK(dsk_f32_to_bf16(w.data(), w16.data(), w.size()));
    DevBuf dx(x.data(), x.size() * 4), dwt(w.data(), w.size() * 4), dw16(w16.data(), w16.size() * 2),
        dbias(bias.data(), bias.size() * 4), ddy(dy.data(), dy.size() * 4);
    const auto xr = bf16_round(x), wr = bf16_round(w), dyr = bf16_round(dy);
    for (bool in_place : {false, true}) {
        // forward
        std::vector<float> y(rows * out), ycpu(rows * out);
        DevBuf dyo(y.data(), y.size() * 4);
        if (in_place) {
            GPU_OK(dsk_cuda_linear_fwd_bf16w(dx.as<float>(), dw16.as<uint16_t>(), dbias.as<float>(), dyo.as<float>(),
                                             rows, in, out, nullptr));
            GPU_OK(dsk_cpu_linear_fwd_bf16w(x.data(), w16.data(), bias.data(), ycpu.data(), rows, in, out));
        } else {
            GPU_OK(dsk_cuda_linear_fwd_bf16(dx.as<float>(), dwt.as<float>(), dbias.as<float>(), dyo.as<float>(), rows,
                                            in, out, nullptr));
            GPU_OK(dsk_cpu_linear_fwd_bf16(x.data(), w.data(), bias.data(), ycpu.data(), rows, in, out));
        }
        y = down(dyo, y.size());
        size_t bad = far_apart(y, ycpu, mag(0, 1, rows, out, in, xr, in, wr, in), in);
        GPU_CHECK(bad == 0, "linear_fwd_bf16%s vs CPU: %zu elements apart", in_place ? "w" : "", bad);
        // backward: dx overwritten, dw and db accumulated
        std::vector<float> gdx(rows * in, 7.0f), gdw = dw0, gdb = db0, cdx(rows * in), cdw = dw0, cdb = db0;
        DevBuf ddx(gdx.data(), gdx.size() * 4), ddw(gdw.data(), gdw.size() * 4), ddb(gdb.data(), gdb.size() * 4);
        if (in_place) {
            GPU_OK(dsk_cuda_linear_bwd_bf16w(ddy.as<float>(), dx.as<float>(), dw16.as<uint16_t>(), ddx.as<float>(),
                                             ddw.as<float>(), ddb.as<float>(), rows, in, out, nullptr));
            GPU_OK(dsk_cpu_linear_bwd_bf16w(dy.data(), x.data(), w16.data(), cdx.data(), cdw.data(), cdb.data(), rows,
                                            in, out));
        } else {
            GPU_OK(dsk_cuda_linear_bwd_bf16(ddy.as<float>(), dx.as<float>(), dwt.as<float>(), ddx.as<float>(),
                                            ddw.as<float>(), ddb.as<float>(), rows, in, out, nullptr));
            GPU_OK(dsk_cpu_linear_bwd_bf16(dy.data(), x.data(), w.data(), cdx.data(), cdw.data(), cdb.data(), rows, in,
                                           out));
        }
        gdx = down(ddx, gdx.size()), gdw = down(ddw, gdw.size()), gdb = down(ddb, gdb.size());
        bad = far_apart(gdx, cdx, mag(0, 0, rows, in, out, dyr, out, wr, in), out);
        GPU_CHECK(bad == 0, "linear_bwd_bf16%s dx vs CPU: %zu elements apart", in_place ? "w" : "", bad);
        std::vector<double> mw = mag(1, 0, out, in, rows, dyr, out, xr, in);
        for (size_t i = 0; i < mw.size(); ++i) mw[i] += std::fabs(dw0[i]);
        bad = far_apart(gdw, cdw, mw, rows);
        GPU_CHECK(bad == 0, "linear_bwd_bf16%s dw vs CPU: %zu elements apart", in_place ? "w" : "", bad);
        std::vector<double> mb(out, 0.0);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < out; ++j) mb[j] += std::fabs(dy[r * out + j]);
        for (int64_t j = 0; j < out; ++j) mb[j] += std::fabs(db0[j]);
        bad = far_apart(gdb, cdb, mb, rows);
        GPU_CHECK(bad == 0, "linear_bwd_bf16%s db vs CPU: %zu elements apart", in_place ? "w" : "", bad);
    }
}

// Through the kernel table, on a stream of its own; the caller's device is unchanged.
void test_table() {
    cudaStream_t st;
    gput::cuda_ok(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
    const dsk_backend* t = dsk_backend_cuda(st);
    GPU_CHECK(t != nullptr && t->gemm != nullptr && t->linear_bwd_bf16w != nullptr, "table entries missing");
    const int64_t m = 16, n = 24, k = 40;
    const auto a = randv(m * k, -1, 1, 110), b = randv(n * k, -1, 1, 111);
    std::vector<float> c(m * n, 0.0f);
    DevBuf da(a.data(), a.size() * 4), db(b.data(), b.size() * 4), dc(c.data(), c.size() * 4);
    int before = -1, after = -2;
    cudaGetDevice(&before);
    GPU_OK(t->gemm(t, 0, 1, m, n, k, 1.0f, da.as<float>(), k, db.as<float>(), k, 0.0f, dc.as<float>(), n));
    cudaGetDevice(&after);
    GPU_CHECK(before == after, "current device changed: %d -> %d", before, after);
    gput::cuda_ok(cudaStreamSynchronize(st), "cudaStreamSynchronize");
    const size_t bad = misses(down(dc, c.size()), expect(0, 1, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n));
    GPU_CHECK(bad == 0, "gemm through the table: %zu elements outside the bound", bad);
    cudaStreamDestroy(st);
}

}  // namespace

int main() {
    if (const int rc = gput::require_device()) return rc;
    test_gemm_fp32();
    test_no_tf32();
    test_degenerate();
    test_batched();
    test_linear_fwd();
    test_gemm_bf16();
    test_linear_bf16();
    test_table();
    return gput::finish("gpu gemm");
}
