// Shared by the tensor-parallel tests (tests/unit/nn_tp_layers_test.cpp in a
// world of one, tests/mpi/test_tp_layers.cpp on 2-4 ranks): the same
// initialised TransformerLayer built twice, one copy sharded, both run on the
// same input and output gradient; the sharded run must equal the unsharded
// one (outputs, input gradient, each local parameter gradient the matching
// block of the unsplit gradient). The column/row-parallel linears alone are
// checked against a float64 formula of the unsplit product.
//
// "Within tol" is |got - want| <= tol * (|want| + max|want|): relative per
// element, with the tensor's largest magnitude as the floor for elements near
// zero (the all-reduce sums partial products in another order).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "nn/tp_group.h"
#include "nn/tp_linear.h"
#include "nn/tp_transformer.h"
#include "nn/transformer_layer.h"

namespace tp_test {

using namespace ds;
using namespace ds::nn;

constexpr int64_t kB = 2, kT = 8;

// hidden, heads, attention-probability dropout; hidden dropout 0.1, pre-LN, causal.
inline TransformerLayerConfig layer_config(int64_t hidden, int64_t heads, float attn_dropout) {
    TransformerLayerConfig c;
    c.hidden_size = hidden;
    c.heads = heads;
    c.attn_dropout_ratio = attn_dropout;
    c.hidden_dropout_ratio = 0.1f;
    c.num_hidden_layers = 2;
    c.pre_layer_norm = true;
    c.causal = true;
    return c;
}

inline Tensor host(const Shape& s) {
    return Tensor::zeros(s, DType::F32, Device::cpu(), Allocator::process(), MemCategory::Buffers);
}

// normal(0, sd) values from a seeded generator: the same on every rank.
inline Tensor randn(const Shape& s, unsigned seed, float sd = 1.0f) {
    Tensor t = host(s);
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, sd);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = nd(rng);
    return t;
}

// Every module an id (1, 2, ... depth first), as a model numbers them.
inline void assign_ids(Module& root) {
    uint32_t next = 1;
    std::function<void(Module&)> walk = [&](Module& m) {
        m.set_id(next++);
        for (Module* c : m.children()) walk(*c);
    };
    walk(root);
}

inline void bind_zero_grads(Module& root) {
    for (Param* p : all_params(root))
        p->grad = Tensor::zeros(p->shape, DType::F32, Device::cpu(), Allocator::process(), MemCategory::Grads);
}

// init_params, then normal(0, 0.1) noise on every parameter (biases and
// LayerNorms then matter in every gradient), the same for the same seed.
inline void init_layer(TransformerLayer& layer, unsigned seed) {
    layer.init_params(seed);
    std::mt19937 rng(seed + 1);
    std::normal_distribution<float> nd(0.0f, 0.1f);
    for (Param* p : all_params(layer))
        for (int64_t i = 0; i < p->value.numel(); ++i) p->value.data<float>()[i] += nd(rng);
}

inline void expect_within(const float* got, const float* want, int64_t n, double tol, const std::string& what) {
    double mx = 0.0;
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, std::fabs(static_cast<double>(want[i])));
    ASSERT_GT(mx, 0.0) << what << ": the reference is all zero (the check would prove nothing)";
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double g = got[i], w = want[i];
        if (!(std::fabs(g - w) <= tol * (std::fabs(w) + mx)) && ++bad <= 5)
            ADD_FAILURE() << what << "[" << i << "]: got " << g << ", want " << w;
    }
}

inline void expect_within(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    expect_within(got.data<float>(), want.data<float>(), got.numel(), tol, what);
}

// Rows of `full` ([out, ...] or [out]) that a column-parallel rank keeps:
// out is `blocks` blocks, each cut into `size` pieces; piece `rank` of each.
inline Tensor column_block(const Tensor& full, int64_t blocks, int rank, int size) {
    const int64_t out = full.shape()[0], width = full.numel() / out;
    const int64_t block = out / blocks, piece = block / size;
    Shape s = full.shape();
    s[0] = blocks * piece;
    Tensor t = host(s);
    for (int64_t k = 0; k < blocks; ++k)
        for (int64_t i = 0; i < piece; ++i)
            for (int64_t j = 0; j < width; ++j)
                t.data<float>()[(k * piece + i) * width + j] =
                    full.data<float>()[(k * block + rank * piece + i) * width + j];
    return t;
}

// Columns of `full` [out, in] that a row-parallel rank keeps.
inline Tensor row_block(const Tensor& full, int rank, int size) {
    const int64_t out = full.shape()[0], in = full.shape()[1], piece = in / size;
    Tensor t = host({out, piece});
    for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < piece; ++i)
            t.data<float>()[o * piece + i] = full.data<float>()[o * in + rank * piece + i];
    return t;
}

struct LayerRun {
    Tensor y, dx;
};

inline LayerRun run(TransformerLayer& layer, const Tensor& x, const Tensor& dy, const RunContext& base) {
    RunContext ctx = base;
    LayerRun r;
    r.y = layer.forward(x, ctx);
    r.dx = layer.backward(dy, ctx);
    return r;
}

// The unsharded layer and its sharded twin over (c, rank, size), run on the
// same x and dy; every comparison the brief asks for. Returns the sharded
// layer's replicated parameters' gradients (in tp_param_split order) for the
// caller's cross-rank check.
inline std::vector<Tensor> check_sharded_equals_unsharded(const TransformerLayerConfig& cfg, comm::Communicator* c,
                                                          int rank, int size, const std::string& what) {
    const unsigned seed = 17;
    TransformerLayer full(cfg), tp(cfg);
    full.set_names("h.0.");
    tp.set_names("h.0.");
    init_layer(full, seed);
    init_layer(tp, seed);
    assign_ids(full);
    assign_ids(tp);
    shard_transformer_layer(tp, c, rank, size);
    bind_zero_grads(full);
    bind_zero_grads(tp);

    const int64_t C = cfg.hidden_size;
    const Tensor x = randn({kB, kT, C}, 5), dy = randn({kB, kT, C}, 6);
    RunContext ctx;
    ctx.training = true;
    ctx.seed = 1234;
    ctx.forward_index = 7;
    const LayerRun want = run(full, x, dy, ctx);
    const LayerRun got = run(tp, x, dy, ctx);
    const double tol = 1e-5;
    expect_within(got.y, want.y, tol, what + ": output");
    expect_within(got.dx, want.dx, tol, what + ": input gradient");

    // Split parameters: this rank's block of the unsplit gradient.
    struct Pair {
        Linear& full;
        Linear& tp;
        int64_t blocks;  // column-parallel: blocks of the output features; 0: row-parallel
    };
    const Pair pairs[] = {{full.attn().c_attn(), tp.attn().c_attn(), 3},
                          {full.attn().c_proj(), tp.attn().c_proj(), 0},
                          {full.mlp().c_fc(), tp.mlp().c_fc(), 1},
                          {full.mlp().c_proj(), tp.mlp().c_proj(), 0}};
    for (const Pair& p : pairs) {
        const std::string n = what + ": " + p.tp.weight().name;
        EXPECT_EQ(p.tp.weight().name, p.full.weight().name);
        if (p.blocks > 0) {
            expect_within(p.tp.weight().grad, column_block(p.full.weight().grad, p.blocks, rank, size), tol, n);
            expect_within(p.tp.bias().grad, column_block(p.full.bias().grad, p.blocks, rank, size), tol,
                          n + " (bias)");
        } else {
            expect_within(p.tp.weight().grad, row_block(p.full.weight().grad, rank, size), tol, n);
            expect_within(p.tp.bias().grad, p.full.bias().grad, tol, n + " (bias, replicated)");
        }
    }
    // Replicated parameters: the unsplit gradient, whole.
    std::map<std::string, Param*> full_by_name;
    for (Param* p : all_params(full)) full_by_name[p->name] = p;
    std::vector<Tensor> replicated;
    for (Param* p : tp_param_split(tp).replicated) {
        Param* f = full_by_name.count(p->name) ? full_by_name[p->name] : nullptr;
        EXPECT_NE(f, nullptr) << what << ": " << p->name << " is not a parameter of the unsplit layer";
        if (f == nullptr) continue;
        expect_within(p->grad, f->grad, tol, what + ": " + p->name + " (replicated)");
        replicated.push_back(p->grad);
    }
    return replicated;
}

// Column- and row-parallel linears of rank `rank` of `size`, built directly
// (weights set from a global [out, in] matrix known to every rank), against
// float64 formulas of the unsplit product: forward output, input gradient
// (after the column layer's all-reduce), weight and bias gradients.
inline void check_parallel_linears(const TpGroup& g, const std::string& what) {
    const int64_t rows = 7, in_local = 6, out_local = 5, in = in_local * g.size, out = out_local * g.size;
    const Tensor W = randn({out, in}, 21, 0.5f), b = randn({out}, 22), x = randn({rows, in}, 23),
                 dy = randn({rows, out}, 24);
    auto w = [&](int64_t o, int64_t i) { return static_cast<double>(W.data<float>()[o * in + i]); };
    auto X = [&](int64_t r, int64_t i) { return static_cast<double>(x.data<float>()[r * in + i]); };
    auto DY = [&](int64_t r, int64_t o) { return static_cast<double>(dy.data<float>()[r * out + o]); };
    const double tol = 1e-5;
    RunContext ctx;
    ctx.training = true;

    {  // Column-parallel: output features [rank * out_local, (rank + 1) * out_local).
        const int64_t o0 = g.rank * out_local;
        ColumnParallelLinear col(in, out_local, true, g);
        col.set_name("col");
        for (int64_t o = 0; o < out_local; ++o) {
            for (int64_t i = 0; i < in; ++i)
                col.weight().value.data<float>()[o * in + i] = W.data<float>()[(o0 + o) * in + i];
            col.bias().value.data<float>()[o] = b.data<float>()[o0 + o];
        }
        bind_zero_grads(col);
        Tensor dy_local = host({rows, out_local});
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t o = 0; o < out_local; ++o)
                dy_local.data<float>()[r * out_local + o] = dy.data<float>()[r * out + o0 + o];
        const Tensor y = col.forward(x, ctx);
        const Tensor dx = col.backward(dy_local, ctx);
        std::vector<float> y_ref(rows * out_local), dx_ref(rows * in), dw_ref(out_local * in), db_ref(out_local);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t o = 0; o < out_local; ++o) {
                double s = b.data<float>()[o0 + o];
                for (int64_t i = 0; i < in; ++i) s += X(r, i) * w(o0 + o, i);
                y_ref[r * out_local + o] = static_cast<float>(s);
            }
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t i = 0; i < in; ++i) {
                double s = 0.0;  // the whole dy against the whole weight: what the all-reduce must give
                for (int64_t o = 0; o < out; ++o) s += DY(r, o) * w(o, i);
                dx_ref[r * in + i] = static_cast<float>(s);
            }
        for (int64_t o = 0; o < out_local; ++o) {
            double sb = 0.0;
            for (int64_t r = 0; r < rows; ++r) sb += DY(r, o0 + o);
            db_ref[o] = static_cast<float>(sb);
            for (int64_t i = 0; i < in; ++i) {
                double s = 0.0;
                for (int64_t r = 0; r < rows; ++r) s += DY(r, o0 + o) * X(r, i);
                dw_ref[o * in + i] = static_cast<float>(s);
            }
        }
        expect_within(y.data<float>(), y_ref.data(), y.numel(), tol, what + ": column output");
        expect_within(dx.data<float>(), dx_ref.data(), dx.numel(), tol, what + ": column input gradient");
        expect_within(col.weight().grad.data<float>(), dw_ref.data(), out_local * in, tol, what + ": column dW");
        expect_within(col.bias().grad.data<float>(), db_ref.data(), out_local, tol, what + ": column db");
    }
    {  // Row-parallel: input features [rank * in_local, (rank + 1) * in_local).
        const int64_t i0 = g.rank * in_local;
        RowParallelLinear row(in_local, out, true, g);
        row.set_name("row");
        for (int64_t o = 0; o < out; ++o) {
            for (int64_t i = 0; i < in_local; ++i)
                row.weight().value.data<float>()[o * in_local + i] = W.data<float>()[o * in + i0 + i];
            row.bias().value.data<float>()[o] = b.data<float>()[o];
        }
        bind_zero_grads(row);
        Tensor x_local = host({rows, in_local});
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t i = 0; i < in_local; ++i)
                x_local.data<float>()[r * in_local + i] = x.data<float>()[r * in + i0 + i];
        const Tensor y = row.forward(x_local, ctx);
        const Tensor dx = row.backward(dy, ctx);
        std::vector<float> y_ref(rows * out), dx_ref(rows * in_local), dw_ref(out * in_local), db_ref(out);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t o = 0; o < out; ++o) {
                double s = b.data<float>()[o];  // the bias once, on the whole product
                for (int64_t i = 0; i < in; ++i) s += X(r, i) * w(o, i);
                y_ref[r * out + o] = static_cast<float>(s);
            }
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t i = 0; i < in_local; ++i) {
                double s = 0.0;
                for (int64_t o = 0; o < out; ++o) s += DY(r, o) * w(o, i0 + i);
                dx_ref[r * in_local + i] = static_cast<float>(s);
            }
        for (int64_t o = 0; o < out; ++o) {
            double sb = 0.0;
            for (int64_t r = 0; r < rows; ++r) sb += DY(r, o);
            db_ref[o] = static_cast<float>(sb);
            for (int64_t i = 0; i < in_local; ++i) {
                double s = 0.0;
                for (int64_t r = 0; r < rows; ++r) s += DY(r, o) * X(r, i0 + i);
                dw_ref[o * in_local + i] = static_cast<float>(s);
            }
        }
        expect_within(y.data<float>(), y_ref.data(), y.numel(), tol, what + ": row output");
        expect_within(dx.data<float>(), dx_ref.data(), dx.numel(), tol, what + ": row input gradient");
        expect_within(row.weight().grad.data<float>(), dw_ref.data(), out * in_local, tol, what + ": row dW");
        expect_within(row.bias().grad.data<float>(), db_ref.data(), out, tol, what + ": row db");
    }
}

}  // namespace tp_test
