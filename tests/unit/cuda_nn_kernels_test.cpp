// The per-thread code of the CUDA embedding, LayerNorm-from-output and MSE
// kernels, run on the host for every (block, thread) of the grids the entry
// points launch (and of smaller grids, so that the grid-stride loops wrap):
//  * embedding forward: equal to dsk_cpu_embedding_fwd / dsk_ref bit for bit;
//    the id check finds the CPU's bad_index;
//  * embedding backward: the tokens stably sorted by id (std::stable_sort:
//    the device's CUB radix sort is stable), then the run threads: equal to
//    dsk_cpu_embedding_bwd and dsk_ref_embedding_bwd BIT FOR BIT (the same
//    float adds in token order), with many repeated ids and a dweight that
//    already holds values (it accumulates);
//  * LayerNorm backward from the output (lno_emulate: the device's threads
//    and its tree order): vs dsk_ref_layernorm_bwd in float64 within the
//    CPU kernel's tolerances (dx 2e-4 + 1e-4 rel; dgamma 1e-4*sqrt(rows) +
//    1e-4 rel; dbeta 1e-5*rows + 1e-6 rel) and vs dsk_cpu_layernorm_bwd_from_output
//    (another float summation order: the same bounds); the zero-gamma check;
//  * MSE: the forward's reduction (red_emulate of mse_term, the device's
//    order) vs dsk_ref_mse_fwd and dsk_cpu_mse_fwd within 1e-12 relative (both
//    double, different orders); the backward's element equal to
//    dsk_cpu_mse_bwd bit for bit;
//  * MoE rows (elem/moe_rows.h): the gather and scatter-add elements equal
//    the CPU kernels bit for bit; the device's row dot (lanes and shuffle
//    tree, moe_dot_emulate) within fp32 summation error of float64;
//  * MoE Jitter (elem/moe_jitter.h): every element of the CUDA kernel equals
//    dsk_cpu_moe_jitter bit for bit (both ways), its factors those of
//    dsk_moe_uniform.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "elem/embedding.h"
#include "elem/layernorm_out.h"
#include "elem/moe_jitter.h"
#include "elem/moe_rows.h"
#include "elem/mse.h"
#include "elem/reduce_plan.h"
#include "nn_embedding.h"
#include "nn_moe.h"
#include "nn_ops.h"

using namespace ds::kernels;

namespace {

std::vector<float> randv(size_t n, float lo, float hi, uint32_t seed) {
    std::mt19937 r(seed);
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = u(r);
    return v;
}

// ids (I32 or I64 storage) drawn from [0, num), skewed towards small ids so that runs are long.
std::vector<int64_t> rand_ids(size_t n, int64_t num, uint32_t seed) {
    std::mt19937 r(seed);
    std::vector<int64_t> v(n);
    for (auto& x : v) {
        const int64_t a = static_cast<int64_t>(r() % static_cast<uint32_t>(num));
        x = r() % 3 == 0 ? a % 4 % num : a;
    }
    return v;
}

struct Ids {
    std::vector<int32_t> i32;
    std::vector<int64_t> i64;
    int dtype;
    const void* data() const { return dtype == DSK_I32 ? static_cast<const void*>(i32.data()) : i64.data(); }
};

Ids make_ids(const std::vector<int64_t>& v, int dtype) {
    Ids ids{{}, v, dtype};
    for (int64_t x : v) ids.i32.push_back(static_cast<int32_t>(x));
    return ids;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

TEST(CudaNnKernelsEmbedding, ForwardThreadsEqualCpuBitwise) {
    for (int dt : {DSK_I32, DSK_I64})
        for (size_t n : {size_t{1}, size_t{7}, size_t{300}})
            for (size_t dim : {size_t{1}, size_t{33}, size_t{300}}) {
                const int64_t num = 50;
                const std::vector<float> w = randv(num * dim, -1, 1, 1);
                const Ids ids = make_ids(rand_ids(n, num, 2), dt);
                std::vector<float> cpu(n * dim, -7.0f), ref(n * dim, -8.0f);
                int64_t bad = 5;
                ASSERT_EQ(dsk_cpu_embedding_fwd(w.data(), num, static_cast<int64_t>(dim), ids.data(), dt,
                                                static_cast<int64_t>(n), cpu.data(), &bad),
                          DSK_OK);
                dsk_ref_embedding_fwd(w.data(), static_cast<int64_t>(dim), ids.data(), dt, static_cast<int64_t>(n),
                                      ref.data());
                // The entry's grid, and a small one (strides wrap).
                for (unsigned blocks : {emb_rows_grid(n), 3u})
                    for (unsigned threads : {emb_threads(dim), 32u}) {
                        std::vector<float> out(n * dim, -9.0f);
                        const EmbFwdArgs a{w.data(), ids.data(), dt, n, dim, out.data()};
                        for (unsigned b = 0; b < blocks; ++b)
                            for (unsigned t = 0; t < threads; ++t) emb_fwd_thread(a, b, t, blocks, threads);
                        EXPECT_TRUE(same_bits(out, cpu)) << "n " << n << " dim " << dim << " grid " << blocks;
                        EXPECT_TRUE(same_bits(out, ref));
                    }
            }
    EXPECT_EQ(emb_threads(1), 32u);
    EXPECT_EQ(emb_threads(33), 64u);
    EXPECT_EQ(emb_threads(5000), kEmbThreads);
    EXPECT_EQ(emb_rows_grid(size_t{1} << 20), kEmbMaxGrid);
}

TEST(CudaNnKernelsEmbedding, IdCheckFindsTheCpusFirstBadIndex) {
    for (int dt : {DSK_I32, DSK_I64}) {
        std::vector<int64_t> v = rand_ids(100, 10, 3);
        v[41] = 10;  // first bad
        v[70] = -1;
        v[90] = int64_t{1} << 40;  // I32 storage: 0 after truncation, fine either way
        const Ids ids = make_ids(v, dt);
        int64_t cpu_bad = -5;
        float w[10] = {}, out[100] = {};
        EXPECT_EQ(dsk_cpu_embedding_fwd(w, 10, 1, ids.data(), dt, 100, out, &cpu_bad), DSK_ERR_INVALID_ARGUMENT);
        size_t first = SIZE_MAX;
        std::vector<uint32_t> keys(100), vals(100);
        for (size_t i = 0; i < 100; ++i)
            if (!emb_key_elem(ids.data(), dt, 10, i, keys.data(), vals.data())) first = std::min(first, i);
        EXPECT_EQ(static_cast<int64_t>(first), cpu_bad);
        for (size_t i = 0; i < 100; ++i)
            if (v[i] >= 0 && v[i] < 10) {
                EXPECT_EQ(keys[i], static_cast<uint32_t>(v[i]));
                EXPECT_EQ(vals[i], i);
            }
        EXPECT_FALSE(emb_key_elem(ids.data(), dt, 10, 70, nullptr, nullptr));  // check only
        EXPECT_TRUE(emb_key_elem(ids.data(), dt, 10, 0, nullptr, nullptr));
    }
}

TEST(CudaNnKernelsEmbedding, BackwardRunsEqualCpuBitwise) {
    for (int dt : {DSK_I32, DSK_I64})
        for (size_t n : {size_t{1}, size_t{9}, size_t{1000}})
            for (size_t dim : {size_t{1}, size_t{40}, size_t{260}})
                for (int64_t num : {int64_t{1}, int64_t{5}, int64_t{300}}) {
                    const std::vector<float> dy = randv(n * dim, -1, 1, 4), w0 = randv(num * dim, -3, 3, 5);
                    const Ids ids = make_ids(rand_ids(n, num, 6), dt);
                    std::vector<float> cpu = w0, ref = w0;
                    int64_t bad = 5;
                    ASSERT_EQ(dsk_cpu_embedding_bwd(dy.data(), ids.data(), dt, static_cast<int64_t>(n), num,
                                                    static_cast<int64_t>(dim), cpu.data(), &bad),
                              DSK_OK);
                    EXPECT_EQ(bad, -1);
                    dsk_ref_embedding_bwd(dy.data(), ids.data(), dt, static_cast<int64_t>(n),
                                          static_cast<int64_t>(dim), ref.data());
                    // The device's sort input (emb_key_elem) and a stable sort by id.
                    std::vector<uint32_t> keys(n), vals(n);
                    for (size_t i = 0; i < n; ++i) ASSERT_TRUE(emb_key_elem(ids.data(), dt, num, i, keys.data(), vals.data()));
                    std::vector<uint32_t> order(n);
                    std::iota(order.begin(), order.end(), 0u);
                    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
                    std::vector<uint32_t> skeys(n), stok(n);
                    for (size_t k = 0; k < n; ++k) {
                        skeys[k] = keys[order[k]];
                        stok[k] = vals[order[k]];
                    }
                    for (unsigned gy : {emb_rows_grid(n), 2u})
                        for (unsigned threads : {emb_threads(dim), 32u}) {
                            std::vector<float> dw = w0;
                            const EmbBwdArgs a{dy.data(), skeys.data(), stok.data(), n, dim, dw.data()};
                            const unsigned gx = static_cast<unsigned>((dim + threads - 1) / threads);
                            for (unsigned bx = 0; bx < gx; ++bx)
                                for (unsigned by = 0; by < gy; ++by)
                                    for (unsigned t = 0; t < threads; ++t) emb_bwd_thread(a, bx, by, t, gy, threads);
                            EXPECT_TRUE(same_bits(dw, cpu)) << "n " << n << " dim " << dim << " num " << num;
                            EXPECT_TRUE(same_bits(dw, ref));
                        }
                }
}

// max |a - b| / (atol + rtol*|b|): <= 1 passes.
double worst(const float* a, const double* b, size_t n, double atol, double rtol) {
    double w = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double e = std::fabs(static_cast<double>(a[i]) - b[i]) / (atol + rtol * std::fabs(b[i]));
        if (!(e <= w)) w = e;
    }
    return w;
}

TEST(CudaNnKernelsLayerNormFromOutput, EmulatedDeviceMatchesReferenceAndCpu) {
    for (size_t rows : {size_t{1}, size_t{7}, size_t{300}, size_t{600}})
        for (size_t dim : {size_t{1}, size_t{33}, size_t{768}, size_t{1030}})
            for (bool affine : {true, false}) {
                const size_t n = rows * dim;
                const std::vector<float> x = randv(n, -2, 5, 7), dy = randv(n, -1, 1, 10);
                std::vector<float> gm = randv(dim, 0.5f, 1.5f, 8), bt = randv(dim, -1, 1, 9);
                for (size_t j = 1; j < dim; j += 3) gm[j] = -gm[j];  // negative weights too
                const float* g = affine ? gm.data() : nullptr;
                const float* b = affine ? bt.data() : nullptr;
                std::vector<float> y(n), mean(rows), rstd(rows);
                ASSERT_EQ(dsk_cpu_layernorm_fwd(x.data(), g, b, y.data(), mean.data(), rstd.data(), rows, dim, 1e-5f),
                          DSK_OK);
                // Emulated device call; dgamma/dbeta start non-zero (they accumulate).
                std::vector<float> dx(n), inv(dim), part(2 * lno_groups(rows) * dim), dg(dim, 0.25f), db(dim, -0.5f);
                lno_emulate(LnoArgs{dy.data(), y.data(), rstd.data(), g, b, nullptr, dx.data(), dim}, rows, inv.data(),
                            part.data(), dg.data(), db.data());
                // Reference from the input (the same math), in double.
                std::vector<double> xd(x.begin(), x.end()), dyd(dy.begin(), dy.end()), gd(gm.begin(), gm.end()),
                    md(mean.begin(), mean.end()), rd(rstd.begin(), rstd.end()), dxr(n), dgr(dim, 0.25), dbr(dim, -0.5);
                dsk_ref_layernorm_bwd(dyd.data(), xd.data(), md.data(), rd.data(), affine ? gd.data() : nullptr,
                                      dxr.data(), dgr.data(), dbr.data(), rows, dim);
                std::vector<float> cdx(n), cdg(dim, 0.25f), cdb(dim, -0.5f);
                ASSERT_EQ(dsk_cpu_layernorm_bwd_from_output(dy.data(), y.data(), rstd.data(), g, b, cdx.data(),
                                                            cdg.data(), cdb.data(), rows, dim),
                          DSK_OK);
                const double gtol = 1e-4 * std::sqrt(static_cast<double>(rows));
                if (dim > 1) {  // dim 1: dx is 0 up to rounding of xhat, no relative scale
                    EXPECT_LE(worst(dx.data(), dxr.data(), n, 2e-4, 1e-4), 1.0) << rows << " x " << dim << " " << affine;
                    const std::vector<double> cdxd(cdx.begin(), cdx.end());
                    EXPECT_LE(worst(dx.data(), cdxd.data(), n, 2e-4, 1e-4), 1.0);
                }
                EXPECT_LE(worst(dg.data(), dgr.data(), dim, gtol, 1e-4), 1.0) << rows << " x " << dim;
                EXPECT_LE(worst(db.data(), dbr.data(), dim, 1e-5 * rows, 1e-6), 1.0) << rows << " x " << dim;
                const std::vector<double> cdgd(cdg.begin(), cdg.end()), cdbd(cdb.begin(), cdb.end());
                EXPECT_LE(worst(dg.data(), cdgd.data(), dim, gtol, 1e-4), 1.0);
                EXPECT_LE(worst(db.data(), cdbd.data(), dim, 1e-5 * rows, 1e-6), 1.0);
                // dx may alias dy: the same result in place.
                std::vector<float> io = dy, dg2(dim, 0.25f), db2(dim, -0.5f);
                lno_emulate(LnoArgs{io.data(), y.data(), rstd.data(), g, b, nullptr, io.data(), dim}, rows, inv.data(),
                            part.data(), dg2.data(), db2.data());
                EXPECT_TRUE(same_bits(io, dx));
                EXPECT_TRUE(same_bits(dg2, dg));
            }
}

TEST(CudaNnKernelsLayerNormFromOutput, ZeroGammaIsFoundAtItsIndex) {
    const float gamma[5] = {1.0f, -2.0f, 0.0f, 4.0f, -0.0f};
    float inv[5] = {};
    size_t first = SIZE_MAX;
    for (size_t j = 0; j < 5; ++j)
        if (!lno_inv_gamma(gamma, inv, j)) first = std::min(first, j);
    EXPECT_EQ(first, 2u);
    EXPECT_EQ(inv[1], -0.5f);
    EXPECT_FALSE(lno_inv_gamma(gamma, inv, 4));  // -0 too
    float dy[5] = {}, y[5] = {}, rstd[1] = {1.0f}, dx[5], dg[5] = {}, db[5] = {};
    EXPECT_EQ(dsk_cpu_layernorm_bwd_from_output(dy, y, rstd, gamma, gamma, dx, dg, db, 1, 5),
              DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("gamma[2] = 0"), std::string::npos) << dsk_last_error();
}

TEST(CudaNnKernelsMse, ReductionAndGradientMatchCpu) {
    for (size_t n : {size_t{1}, size_t{255}, size_t{1025}, size_t{100003}, size_t{1} << 21}) {
        const std::vector<float> p = randv(n, -3, 3, 11), t = randv(n, -3, 3, 12);
        const double dev = red_emulate(n, [&](size_t i) { return mse_term(p.data(), t.data(), i); });
        const std::vector<double> pd(p.begin(), p.end()), td(t.begin(), t.end());
        const double ref = dsk_ref_mse_fwd(pd.data(), td.data(), n);
        double cpu = -1.0;
        ASSERT_EQ(dsk_cpu_mse_fwd(p.data(), t.data(), n, &cpu), DSK_OK);
        EXPECT_NEAR(dev, ref, 1e-12 * ref) << n;
        EXPECT_NEAR(dev, cpu, 1e-12 * ref) << n;
        const float scale = 2.0f / static_cast<float>(n);
        std::vector<float> g(n), gc(n);
        for (size_t i = 0; i < n; ++i) g[i] = mse_grad_elem(p[i], t[i], scale);
        ASSERT_EQ(dsk_cpu_mse_bwd(p.data(), t.data(), n, scale, gc.data()), DSK_OK);
        EXPECT_TRUE(same_bits(g, gc)) << n;
    }
}

// The MoE row kernels' device code on the host: every element of the CUDA
// gather and scatter-add equals the CPU kernel (bitwise; C and row counts
// around the grid's sizes), and the device's row dot (32 lanes and the
// shuffle tree, moe_dot_emulate) is within fp32 summation error of float64,
// as is the CPU's c-ascending dot.
TEST(CudaNnKernelsMoeRows, ElementsEqualCpuAndDotWithinFp32Error) {
    for (int64_t C : {int64_t{1}, int64_t{31}, int64_t{33}, int64_t{1024}}) {
        const int64_t S = 40, n = 17;
        const std::vector<float> table = randv(size_t(S * C), -1, 1, 5), rows = randv(size_t(n * C), -1, 1, 6),
                                 scale = randv(size_t(n), 0, 1, 7);
        std::vector<int32_t> idx(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) idx[size_t(j)] = static_cast<int32_t>((j * 7 + 3) % S);  // distinct
        for (const float* sc : {static_cast<const float*>(nullptr), scale.data()}) {
            std::vector<float> dev(size_t(n * C)), cpu(dev.size());
            for (size_t i = 0; i < dev.size(); ++i) moe_gather_elem(table.data(), size_t(C), idx.data(), sc, i, dev.data());
            ASSERT_EQ(dsk_cpu_moe_rows_gather(table.data(), S, C, idx.data(), sc, n, cpu.data()), DSK_OK);
            EXPECT_TRUE(same_bits(dev, cpu)) << C;
            std::vector<float> dacc = table, cacc = table;
            // The device's threads in reverse order: distinct indices make the order irrelevant.
            for (size_t i = size_t(n * C); i-- > 0;)
                moe_scatter_add_elem(rows.data(), size_t(C), idx.data(), sc, i, dacc.data());
            ASSERT_EQ(dsk_cpu_moe_rows_scatter_add(rows.data(), n, C, idx.data(), sc, S, cacc.data()), DSK_OK);
            EXPECT_TRUE(same_bits(dacc, cacc)) << C;
        }
        std::vector<float> cpu_dot(static_cast<size_t>(n));
        ASSERT_EQ(dsk_cpu_moe_rows_dot(table.data(), S, C, idx.data(), rows.data(), n, cpu_dot.data()), DSK_OK);
        for (int64_t j = 0; j < n; ++j) {
            const float* x = table.data() + idx[size_t(j)] * C;
            const float* y = rows.data() + j * C;
            double ref = 0.0, mag = 0.0;
            for (int64_t c = 0; c < C; ++c) {
                ref += double(x[c]) * y[c];
                mag += std::fabs(double(x[c]) * y[c]);
            }
            const double tol = double(C) * std::ldexp(1.0, -23) * mag + 1e-30;
            EXPECT_NEAR(moe_dot_emulate(x, y, C), ref, tol) << "device order, C " << C << " row " << j;
            EXPECT_NEAR(cpu_dot[size_t(j)], ref, tol) << "CPU, C " << C << " row " << j;
        }
    }
}

// The Jitter kernel's device threads on the host (one per element, in
// reverse order: each writes only its own element), over sizes around the
// Philox block and the grid: the CPU kernel's values bit for bit, the
// factors 0.99f + 0.02f * dsk_moe_uniform (the gating's published draws).
TEST(CudaNnKernelsMoeJitter, ElementsEqualCpuAndTheDraws) {
    dsk_dropout_key key{};
    key.seed = 99;
    key.stream = 7;
    key.module_id = 3;
    key.offset = 5;
    const DropoutStream st = dropout_stream(key);
    for (size_t n : {size_t{1}, size_t{3}, size_t{257}, size_t{70001}}) {
        const std::vector<float> src = randv(n, -2, 2, 8), acc0 = randv(n, -1, 1, 9);
        for (int accumulate : {0, 1}) {
            std::vector<float> dev = acc0, cpu = acc0;
            for (size_t i = n; i-- > 0;) moe_jitter_elem(src.data(), st, key.offset, 24, accumulate, i, dev.data());
            ASSERT_EQ(dsk_cpu_moe_jitter(src.data(), int64_t(n), &key, 24, accumulate, cpu.data()), DSK_OK);
            EXPECT_TRUE(same_bits(dev, cpu)) << n << " accumulate " << accumulate;
        }
        for (size_t i = 0; i < n; ++i)
            ASSERT_EQ(moe_jitter_factor(st, key.offset, 24 + i), 0.99f + 0.02f * dsk_moe_uniform(&key, 24 + i)) << i;
    }
}

}  // namespace
