// LayerNorm's backward from its output (nn_ops.h: xhat = (y - beta)/gamma,
// normalize_invertible): the per-thread code of kernels/cuda/layernorm_out.cu,
// which the host tests run for every (row, thread) with the very same
// reduction order (lno_emulate below).
//
// dx: one block of kLnoThreads per row. Thread t sums g = dy*gamma and
// g*xhat over j = t, t + kLnoThreads, ... (lno_thread_sums); the block adds
// the threads' sums by a pairwise tree in shared memory (lno_tree_step for
// w = kLnoThreads/2 .. 1: s[t] += s[t + w]); then thread t writes its dx
// elements (lno_dx_thread). Unlike block_reduce.cuh's warp shuffles, this
// tree is reproduced on the host operation for operation.
// dgamma/dbeta: column sums over fixed groups of kLnoColRows rows
// (lno_col_partial), then the groups in order (lno_col_total), as
// layernorm.cu's ordinary backward. Everything is float, as on the CPU, whose
// summation order differs (results agree within the CPU kernel's tolerances).
// xhat uses 1/gamma computed once per call (lno_inv_gamma), as the CPU does.
#pragma once

#include <cstddef>

#include "hd.h"

namespace ds::kernels {

constexpr unsigned kLnoThreads = 256;  // a power of 2 (the tree)
constexpr size_t kLnoColRows = 256;    // rows per dgamma/dbeta group

struct LnoArgs {
    const float* dy;
    const float* y;
    const float* rstd;
    const float* gamma;      // NULL: no affine (then xhat = y)
    const float* beta;
    const float* inv_gamma;  // 1/gamma (with gamma)
    float* dx;
    size_t dim;
};

// 1/gamma[j]; false when gamma[j] == 0 (xhat cannot be recovered).
DSK_HD inline bool lno_inv_gamma(const float* gamma, float* inv, size_t j) {
    if (gamma[j] == 0.0f) return false;
    inv[j] = 1.0f / gamma[j];
    return true;
}

DSK_HD inline float lno_xhat(const LnoArgs& a, const float* yr, size_t j) {
    return a.gamma ? (yr[j] - a.beta[j]) * a.inv_gamma[j] : yr[j];
}

// Thread t's partial sums of g and g*xhat over row r.
DSK_HD inline void lno_thread_sums(const LnoArgs& a, size_t r, unsigned t, float* sg, float* sgx) {
    const float* dyr = a.dy + r * a.dim;
    const float* yr = a.y + r * a.dim;
    float s = 0.0f, sx = 0.0f;
    for (size_t j = t; j < a.dim; j += kLnoThreads) {
        const float h = lno_xhat(a, yr, j);
        const float g = a.gamma ? dyr[j] * a.gamma[j] : dyr[j];
        s += g;
        sx += g * h;
    }
    *sg = s;
    *sgx = sx;
}

// One level of the block's tree (thread t, width w).
DSK_HD inline void lno_tree_step(float* s0, float* s1, unsigned t, unsigned w) {
    if (t < w) {
        s0[t] += s0[t + w];
        s1[t] += s1[t + w];
    }
}

// Thread t's dx elements of row r, from the row's means of g and g*xhat.
// dx may alias dy: each element is read and written by the same thread.
DSK_HD inline void lno_dx_thread(const LnoArgs& a, size_t r, unsigned t, float mg, float mgx) {
    const float* dyr = a.dy + r * a.dim;
    const float* yr = a.y + r * a.dim;
    float* dxr = a.dx + r * a.dim;
    const float rs = a.rstd[r];
    for (size_t j = t; j < a.dim; j += kLnoThreads) {
        const float h = lno_xhat(a, yr, j);
        const float g = a.gamma ? dyr[j] * a.gamma[j] : dyr[j];
        dxr[j] = rs * (g - mg - h * mgx);
    }
}

DSK_HD inline size_t lno_groups(size_t rows) { return (rows + kLnoColRows - 1) / kLnoColRows; }

// Column j of group grp: sums of dy*xhat and dy over its rows, in row order.
DSK_HD inline void lno_col_partial(const LnoArgs& a, size_t rows, size_t grp, size_t j, float* part_g,
                                   float* part_b) {
    const size_t r0 = grp * kLnoColRows;
    const size_t r1 = r0 + kLnoColRows < rows ? r0 + kLnoColRows : rows;
    float ag = 0.0f, ab = 0.0f;
    for (size_t r = r0; r < r1; ++r) {
        const float d = a.dy[r * a.dim + j];
        ag += d * lno_xhat(a, a.y + r * a.dim, j);
        ab += d;
    }
    part_g[grp * a.dim + j] = ag;
    part_b[grp * a.dim + j] = ab;
}

// The groups of column j in order, added into dgamma/dbeta.
DSK_HD inline void lno_col_total(const float* part_g, const float* part_b, size_t groups, size_t dim, size_t j,
                                 float* dgamma, float* dbeta) {
    float g = 0.0f, b = 0.0f;
    for (size_t k = 0; k < groups; ++k) {
        g += part_g[k * dim + j];
        b += part_b[k * dim + j];
    }
    dgamma[j] += g;
    dbeta[j] += b;
}

// Host emulation of the whole device call after its checks (gamma has no
// zero): the same functions in the same order. inv_gamma: dim floats of
// scratch; part: 2*lno_groups(rows)*dim floats (with dgamma).
inline void lno_emulate(LnoArgs a, size_t rows, float* inv_gamma, float* part, float* dgamma, float* dbeta) {
    if (a.gamma) {
        for (size_t j = 0; j < a.dim; ++j) lno_inv_gamma(a.gamma, inv_gamma, j);
        a.inv_gamma = inv_gamma;
    }
    if (dgamma) {  // first, as on the device (dx may alias dy)
        const size_t groups = lno_groups(rows);
        for (size_t g = 0; g < groups; ++g)
            for (size_t j = 0; j < a.dim; ++j) lno_col_partial(a, rows, g, j, part, part + groups * a.dim);
        for (size_t j = 0; j < a.dim; ++j) lno_col_total(part, part + groups * a.dim, groups, a.dim, j, dgamma, dbeta);
    }
    const float inv_dim = 1.0f / static_cast<float>(a.dim);
    float s0[kLnoThreads], s1[kLnoThreads];
    for (size_t r = 0; r < rows; ++r) {
        for (unsigned t = 0; t < kLnoThreads; ++t) lno_thread_sums(a, r, t, &s0[t], &s1[t]);
        for (unsigned w = kLnoThreads / 2; w > 0; w /= 2)
            for (unsigned t = 0; t < kLnoThreads; ++t) lno_tree_step(s0, s1, t, w);
        const float mg = s0[0] * inv_dim, mgx = s1[0] * inv_dim;
        for (unsigned t = 0; t < kLnoThreads; ++t) lno_dx_thread(a, r, t, mg, mgx);
    }
}

}  // namespace ds::kernels
