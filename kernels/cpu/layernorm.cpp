// dsk_cpu_layernorm_fwd / _bwd / _bwd_from_output (nn_ops.h): rows split over
// threads; the parameter gradients are summed per chunk of rows into private
// buffers and added into dgamma/dbeta in chunk order (deterministic).
#include <cstring>
#include <memory>
#include <new>

#include "arg_check.h"
#include "nn_ops_isa.h"
#include "row_chunks.h"

namespace {

using ds::kernels::set_last_error;

int check_rows(const char* kernel, size_t rows, size_t dim) {
    if (rows != 0 && dim == 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: dim = 0 with rows = %zu", kernel, rows);
    return DSK_OK;
}

// The shared backward: validates, then runs the rows with per-chunk partials.
int layernorm_bwd(const char* kernel, const ds::kernels::LnBwdArgs& a, float* dgamma, float* dbeta,
                  size_t rows) {
    const size_t dim = a.dim;
    const size_t n = rows * dim;
    ds::kernels::ArgCheck k(kernel);
    if (k.ptr("dy", a.dy, n).ptr("rstd", a.rstd, rows).ptr("dx", a.dx, n).failed()) return k.status();
    if (a.from_output ? k.ptr("y", a.y, n).failed() : k.ptr("x", a.x, n).ptr("mean", a.mean, rows).failed())
        return k.status();
    if (int s = check_rows(kernel, rows, dim)) return s;
    if (a.from_output && (a.gamma == nullptr) != (a.beta == nullptr))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: gamma and beta must be both set or both NULL",
                              kernel);
    if ((dgamma == nullptr) != (dbeta == nullptr))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: dgamma and dbeta must be both set or both NULL",
                              kernel);
    if (a.gamma != nullptr && dgamma == nullptr && n != 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: dgamma/dbeta are NULL but gamma is set (affine)",
                              kernel);
    if (n == 0) return DSK_OK;
    const int chunks = row_chunk_count(rows, dim);
    std::unique_ptr<float[]> part;
    if (dgamma != nullptr) {
        part.reset(new (std::nothrow) float[2 * dim * static_cast<size_t>(chunks)]());
        if (!part)
            return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: cannot allocate %zu bytes of partial sums",
                                  kernel, 2 * dim * static_cast<size_t>(chunks) * sizeof(float));
    }
    const auto& ops = ds::kernels::nn_isa_ops();
    float* p = part.get();
    run_row_chunks(rows, chunks, [&](size_t r0, size_t r1, int c) {
        float* dgp = p != nullptr ? p + 2 * dim * static_cast<size_t>(c) : nullptr;
        ops.ln_bwd(a, r0, r1, dgp, dgp != nullptr ? dgp + dim : nullptr);
    });
    if (p != nullptr) {
        for (int c = 0; c < chunks; ++c) {
            const float* dgp = p + 2 * dim * static_cast<size_t>(c);
            for (size_t j = 0; j < dim; ++j) {
                dgamma[j] += dgp[j];
                dbeta[j] += dgp[dim + j];
            }
        }
    }
    return DSK_OK;
}

}  // namespace

extern "C" int dsk_cpu_layernorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                                     float* rstd, size_t rows, size_t dim, float eps) noexcept {
    const char* kernel = "dsk_layernorm_fwd";
    const size_t n = rows * dim;
    ds::kernels::ArgCheck k(kernel);
    if (k.ptr("x", x, n).ptr("y", y, n).failed()) return k.status();
    if (int s = check_rows(kernel, rows, dim)) return s;
    if ((gamma == nullptr) != (beta == nullptr))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: gamma and beta must be both set or both NULL",
                              kernel);
    if (!(eps >= 0.0f))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: eps = %g must be >= 0", kernel,
                              static_cast<double>(eps));
    if (n == 0) return DSK_OK;
    const ds::kernels::LnFwdArgs a{x, gamma, beta, y, mean, rstd, dim, eps};
    const auto& ops = ds::kernels::nn_isa_ops();
    run_row_chunks(rows, row_chunk_count(rows, dim), [&](size_t r0, size_t r1, int) { ops.ln_fwd(a, r0, r1); });
    return DSK_OK;
}

extern "C" int dsk_cpu_layernorm_bwd(const float* dy, const float* x, const float* mean, const float* rstd,
                                     const float* gamma, float* dx, float* dgamma, float* dbeta, size_t rows,
                                     size_t dim) noexcept {
    ds::kernels::LnBwdArgs a{};
    a.dy = dy;
    a.x = x;
    a.mean = mean;
    a.rstd = rstd;
    a.gamma = gamma;
    a.from_output = false;
    a.dx = dx;
    a.dim = dim;
    return layernorm_bwd("dsk_layernorm_bwd", a, dgamma, dbeta, rows);
}

extern "C" int dsk_cpu_layernorm_bwd_from_output(const float* dy, const float* y, const float* rstd,
                                                 const float* gamma, const float* beta, float* dx, float* dgamma,
                                                 float* dbeta, size_t rows, size_t dim) noexcept {
    const char* kernel = "dsk_layernorm_bwd_from_output";
    ds::kernels::LnBwdArgs a{};
    a.dy = dy;
    a.y = y;
    a.rstd = rstd;
    a.gamma = gamma;
    a.beta = beta;
    a.from_output = true;
    a.dx = dx;
    a.dim = dim;
    std::unique_ptr<float[]> inv;
    if (gamma != nullptr && beta != nullptr && rows != 0 && dim != 0) {
        inv.reset(new (std::nothrow) float[dim]);
        if (!inv)
            return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: cannot allocate %zu bytes for 1/gamma", kernel,
                                  dim * sizeof(float));
        for (size_t j = 0; j < dim; ++j) {
            if (gamma[j] == 0.0f)
                return set_last_error(DSK_ERR_INVALID_ARGUMENT,
                                      "%s: gamma[%zu] = 0: the input cannot be recovered from the output "
                                      "(normalize_invertible needs non-zero LayerNorm weights)",
                                      kernel, j);
            inv[j] = 1.0f / gamma[j];
        }
        a.inv_gamma = inv.get();
    }
    return layernorm_bwd(kernel, a, dgamma, dbeta, rows);
}
