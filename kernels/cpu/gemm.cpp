// dsk_cpu_gemm and friends (kernels/nn_gemm.h): argument checks, the
// degenerate cases, and the choice of engine (gemm_engines.h), made once.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "arg_check.h"
#include "gemm_check.h"
#include "gemm_engines.h"
#include "nn_gemm.h"

namespace {

using ds::kernels::set_last_error;
namespace gemm = ds::kernels::gemm;

// ---- engine choice -------------------------------------------------------

struct Engines {
    bool onednn = false, openblas = false;
    std::string onednn_name, openblas_name;  // the engine's name, or why it is unavailable
    std::string reference_name = "reference";
};

Engines g_engines;
std::once_flag g_once, g_openblas_once;
std::atomic<int> g_engine{DSK_GEMM_ENGINE_REFERENCE};

const char* engine_key(int e) {
    return e == DSK_GEMM_ENGINE_ONEDNN ? "onednn" : e == DSK_GEMM_ENGINE_OPENBLAS ? "openblas" : "reference";
}

// OpenBLAS is loaded only when it may run (no oneDNN, or asked for): loading
// it starts its thread pool.
bool openblas_ready() {
    std::call_once(g_openblas_once,
                   [] { g_engines.openblas = ds::kernels::gemm::openblas_init(&g_engines.openblas_name); });
    return g_engines.openblas;
}

void init_engines() {
    Engines& g = g_engines;
    g.onednn = gemm::onednn_init(&g.onednn_name);
    const char* want = std::getenv("DS_GEMM_ENGINE");
    if (want != nullptr && *want == '\0') want = nullptr;
    if (g.onednn && (want == nullptr || std::strcmp(want, "openblas") != 0))
        g.openblas_name = "not loaded (oneDNN runs)";
    else
        openblas_ready();
    int pick = g.onednn ? DSK_GEMM_ENGINE_ONEDNN : g.openblas ? DSK_GEMM_ENGINE_OPENBLAS : DSK_GEMM_ENGINE_REFERENCE;
    std::string note;
    if (want != nullptr) {
        int e = -1;
        for (int i : {DSK_GEMM_ENGINE_REFERENCE, DSK_GEMM_ENGINE_OPENBLAS, DSK_GEMM_ENGINE_ONEDNN})
            if (std::strcmp(want, engine_key(i)) == 0) e = i;
        const bool ok = e == DSK_GEMM_ENGINE_REFERENCE || (e == DSK_GEMM_ENGINE_ONEDNN && g.onednn) ||
                        (e == DSK_GEMM_ENGINE_OPENBLAS && g.openblas);
        if (ok)
            pick = e;
        else
            note = std::string("DS_GEMM_ENGINE=") + want + " ignored: " +
                   (e < 0 ? "not onednn, openblas or reference" : "not available here");
    }
    if (pick == DSK_GEMM_ENGINE_REFERENCE && !(g.onednn || g.openblas)) {
        // Say why nothing faster runs.
        g.reference_name = "reference (oneDNN: " + g.onednn_name + "; OpenBLAS: " + g.openblas_name + ")";
    }
    if (!note.empty()) {
        std::string& n = pick == DSK_GEMM_ENGINE_ONEDNN     ? g.onednn_name
                         : pick == DSK_GEMM_ENGINE_OPENBLAS ? g.openblas_name
                                                            : g.reference_name;
        n += " [" + note + "]";
    }
    g_engine.store(pick);
}

int engine() {
    std::call_once(g_once, init_engines);
    return g_engine.load(std::memory_order_relaxed);
}

// C = beta * C (beta 0: C is not read).
void scale_c(const gemm::Problem& p) {
    for (int64_t i = 0; i < p.batch; ++i) {
        float* c = p.c + i * p.stride_c;
        for (int64_t r = 0; r < p.m; ++r) {
            float* row = c + r * p.ldc;
            if (p.beta == 0.0f)
                std::fill(row, row + p.n, 0.0f);
            else if (p.beta != 1.0f)
                for (int64_t j = 0; j < p.n; ++j) row[j] *= p.beta;
        }
    }
}

int run(const char* kernel, const gemm::Problem& p, int ta, int tb) {
    if (int s = gemm::check_gemm(kernel, p, ta, tb); s != DSK_OK) return s;
    if (p.m == 0 || p.n == 0 || p.batch == 0) return DSK_OK;
    if (p.k == 0 || p.alpha == 0.0f) {
        scale_c(p);
        return DSK_OK;
    }
    try {
        const int e = engine();
        int s = -1;
        if (e == DSK_GEMM_ENGINE_ONEDNN) s = gemm::onednn_gemm(p);
        else if (e == DSK_GEMM_ENGINE_OPENBLAS) s = gemm::openblas_gemm(p);
        if (s >= 0) return s;
        gemm::blocked_gemm(p);  // the reference engine, or a layout the engine refused
        return DSK_OK;
    } catch (const std::bad_alloc&) {  // a scratch buffer
        return set_last_error(DSK_ERR_OUT_OF_MEMORY, "%s: out of memory for the GEMM's scratch", kernel);
    } catch (const std::exception& ex) {
        return set_last_error(DSK_ERR_ENGINE, "%s: %s", kernel, ex.what());
    }
}

}  // namespace

namespace {
int gemm_entry(const char* kernel, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
               int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c) {
    gemm::Problem p;
    p.trans_a = trans_a != 0;
    p.trans_b = trans_b != 0;
    p.m = m, p.n = n, p.k = k, p.alpha = alpha, p.beta = beta;
    p.a = a, p.lda = lda, p.b = b, p.ldb = ldb, p.c = c, p.ldc = ldc;
    p.batch = batch, p.stride_a = stride_a, p.stride_b = stride_b, p.stride_c = stride_c;
    return run(kernel, p, trans_a, trans_b);
}
}  // namespace

extern "C" int dsk_cpu_gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                            int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) noexcept {
    return gemm_entry("dsk_gemm", trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 1, 0, 0, 0);
}

extern "C" int dsk_cpu_gemm_batched(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                                    int64_t ldc, int64_t batch, int64_t stride_a, int64_t stride_b,
                                    int64_t stride_c) noexcept {
    return gemm_entry("dsk_gemm_batched", trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, batch,
                      stride_a, stride_b, stride_c);
}

namespace {
int linear_fwd(const char* kernel, bool pack, const float* x, const float* w, const float* bias, float* y,
               int64_t rows, int64_t in, int64_t out) {
    if (int s = gemm::check_linear_fwd(kernel, x, w, "w", y, rows, in, out); s != DSK_OK) return s;
    if (rows > 0 && in > 0 && out > 0 && engine() == DSK_GEMM_ENGINE_ONEDNN) {
        try {
            const int s = gemm::onednn_linear_fwd(x, w, bias, y, rows, in, out, pack);
            if (s >= 0) return s;
        } catch (const std::bad_alloc&) {
            return set_last_error(DSK_ERR_OUT_OF_MEMORY, "%s: out of memory for the packed weights", kernel);
        } catch (const std::exception& ex) {
            return set_last_error(DSK_ERR_ENGINE, "%s: %s", kernel, ex.what());
        }
    }
    // y = x w^T (checked by the GEMM, with names of its own), then + bias.
    gemm::Problem p;
    p.trans_b = true;
    p.m = rows, p.n = out, p.k = in, p.a = x, p.lda = std::max<int64_t>(in, 1), p.b = w,
    p.ldb = std::max<int64_t>(in, 1), p.c = y, p.ldc = std::max<int64_t>(out, 1);
    if (int s = run(kernel, p, 0, 1); s != DSK_OK) return s;
    if (bias != nullptr && rows > 0 && out > 0) {
#pragma omp parallel for schedule(static) if (rows * out >= 65536)
        for (int64_t r = 0; r < rows; ++r) {
            float* yr = y + r * out;
            for (int64_t j = 0; j < out; ++j) yr[j] += bias[j];
        }
    }
    return DSK_OK;
}
}  // namespace

extern "C" int dsk_cpu_linear_fwd(const float* x, const float* w, const float* bias, float* y, int64_t rows,
                                  int64_t in, int64_t out) noexcept {
    return linear_fwd("dsk_linear_fwd", false, x, w, bias, y, rows, in, out);
}

extern "C" int dsk_cpu_linear_fwd_packed(const float* x, const float* w, const float* bias, float* y, int64_t rows,
                                         int64_t in, int64_t out) noexcept {
    return linear_fwd("dsk_linear_fwd_packed", true, x, w, bias, y, rows, in, out);
}

extern "C" int dsk_cpu_bias_grad(const float* dy, float* db, int64_t rows, int64_t out) noexcept {
    const char* kernel = "dsk_bias_grad";
    if (rows < 0 || out < 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: negative size (rows %lld, out %lld)", kernel,
                              static_cast<long long>(rows), static_cast<long long>(out));
    if (out > 0 && db == nullptr) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: db is NULL (out = %lld)", kernel, static_cast<long long>(out));
    if (rows > 0 && out > 0 && dy == nullptr)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: dy is NULL (%lld x %lld)", kernel,
                              static_cast<long long>(rows), static_cast<long long>(out));
    // Each thread owns a block of columns and walks the rows in order, so the
    // sums do not depend on the thread count.
    constexpr int64_t kCols = 256;
    const int64_t blocks = (out + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (rows * out >= 65536)
    for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t j0 = blk * kCols, j1 = std::min(out, j0 + kCols);
        double acc[kCols] = {};
        for (int64_t r = 0; r < rows; ++r) {
            const float* row = dy + r * out;
            for (int64_t j = j0; j < j1; ++j) acc[j - j0] += row[j];
        }
        for (int64_t j = j0; j < j1; ++j) db[j] += static_cast<float>(acc[j - j0]);
    }
    return DSK_OK;
}

extern "C" const char* dsk_cpu_gemm_engine(void) noexcept {
    const int e = engine();
    return e == DSK_GEMM_ENGINE_ONEDNN     ? g_engines.onednn_name.c_str()
           : e == DSK_GEMM_ENGINE_OPENBLAS ? g_engines.openblas_name.c_str()
                                           : g_engines.reference_name.c_str();
}

extern "C" int dsk_cpu_gemm_engine_id(void) noexcept { return engine(); }

extern "C" int dsk_cpu_gemm_set_engine(int e) noexcept {
    engine();
    if (e == DSK_GEMM_ENGINE_ONEDNN && !g_engines.onednn)
        return set_last_error(DSK_ERR_UNSUPPORTED, "dsk_gemm_set_engine: oneDNN is not available (%s)",
                              g_engines.onednn_name.c_str());
    if (e == DSK_GEMM_ENGINE_OPENBLAS && !openblas_ready())
        return set_last_error(DSK_ERR_UNSUPPORTED, "dsk_gemm_set_engine: OpenBLAS is not available (%s)",
                              g_engines.openblas_name.c_str());
    if (e != DSK_GEMM_ENGINE_ONEDNN && e != DSK_GEMM_ENGINE_OPENBLAS && e != DSK_GEMM_ENGINE_REFERENCE)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT,
                              "dsk_gemm_set_engine: engine = %d is not DSK_GEMM_ENGINE_REFERENCE, _OPENBLAS or _ONEDNN", e);
    g_engine.store(e);
    return DSK_OK;
}
