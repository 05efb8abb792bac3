// Gradients of the attention core, CausalSelfAttention and the DeepSpeed
// transformer layer against central finite differences in float64 of a
// float64 reference forward built from the reference kernels (kernels/ref:
// attention, LayerNorm, GELU, dropout; the Linears written out here). The
// loss is L = sum(y * w) for a fixed random w, so dL/dy = w is what backward
// gets. Also: the memory options (attn_dropout_checkpoint, gelu_checkpoint,
// normalize_invertible) give bit-identical outputs and gradients while the
// activation meter's peak drops; parameter names; init_params; config checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "catch_error.h"
#include "nn/attention.h"
#include "nn/transformer_layer.h"
#include "nn_attention.h"
#include "nn_ops.h"

using namespace ds;
using namespace ds::nn;

namespace {

std::vector<double> randn_d(size_t n, unsigned seed, double sd = 1.0) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> nd(0.0, sd);
    std::vector<double> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0.0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

// Central differences of f at x: (f(x+h e_i) - f(x-h e_i)) / 2h for every i.
std::vector<double> finite_diff(std::vector<double>& x, const std::function<double()>& f, double h = 1e-5) {
    std::vector<double> g(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        const double keep = x[i];
        x[i] = keep + h;
        const double up = f();
        x[i] = keep - h;
        const double down = f();
        x[i] = keep;
        g[i] = (up - down) / (2.0 * h);
    }
    return g;
}

// Element-wise |got - want| <= rel*|want| + abs_frac*max|want|.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rel, double abs_frac,
                  const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double mx = 0.0;
    for (double w : want) mx = std::max(mx, std::fabs(w));
    ASSERT_GT(mx, 0.0) << what << ": the gradient is all zero (the check would prove nothing)";
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
        if (std::fabs(got[i] - want[i]) > rel * std::fabs(want[i]) + abs_frac * mx && ++bad <= 5)
            ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", finite differences " << want[i];
}

std::vector<double> to_d(const Tensor& t) {
    const float* p = t.data<float>();
    return std::vector<double>(p, p + t.numel());
}

Tensor tensor_from(const std::vector<double>& v, const Shape& s) {
    Tensor t = Tensor::empty(s, DType::F32, Device::cpu(), Allocator::process(), MemCategory::Buffers);
    for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = static_cast<float>(v[i]);
    return t;
}

// Gives every module of the tree an id (1, 2, ... depth first) and every
// parameter a zeroed gradient buffer.
void prepare(Module& root) {
    uint32_t next = 1;
    std::function<void(Module&)> walk = [&](Module& m) {
        m.set_id(next++);
        for (Module* c : m.children()) walk(*c);
    };
    walk(root);
    for (Param* p : all_params(root))
        p->grad = Tensor::zeros(p->shape, DType::F32, Device::cpu(), Allocator::process(), MemCategory::Grads);
}

// Adds normal(0, 0.3) noise to every parameter (after init_params: LayerNorm
// weights around 1, everything else around 0), so no gradient is trivially 0.
void randomize(Module& root, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 0.3f);
    for (Param* p : all_params(root))
        for (int64_t i = 0; i < p->value.numel(); ++i) p->value.data<float>()[i] += nd(rng);
}

// ---- the float64 reference forward ---------------------------------------

struct RefLinear {
    std::vector<double> w, b;  // b empty: no bias
    int64_t in, out;
};
RefLinear ref_of(Linear& l) {
    RefLinear r{to_d(l.weight().value), l.has_bias() ? to_d(l.bias().value) : std::vector<double>{}, l.in_features(),
                l.out_features()};
    return r;
}
std::vector<double> linear(const std::vector<double>& x, const RefLinear& l) {
    const int64_t rows = static_cast<int64_t>(x.size()) / l.in;
    std::vector<double> y(static_cast<size_t>(rows * l.out));
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < l.out; ++o) {
            double s = l.b.empty() ? 0.0 : l.b[static_cast<size_t>(o)];
            for (int64_t i = 0; i < l.in; ++i)
                s += x[static_cast<size_t>(r * l.in + i)] * l.w[static_cast<size_t>(o * l.in + i)];
            y[static_cast<size_t>(r * l.out + o)] = s;
        }
    return y;
}

struct RefLN {
    std::vector<double> g, b;
    double eps;
};
std::vector<double> layernorm(const std::vector<double>& x, const RefLN& ln) {
    const size_t dim = ln.g.size(), rows = x.size() / dim;
    std::vector<double> y(x.size()), mean(rows), rstd(rows);
    dsk_ref_layernorm_fwd(x.data(), ln.g.data(), ln.b.data(), y.data(), mean.data(), rstd.data(), rows, dim, ln.eps);
    return y;
}

struct DropKey {
    double p;
    dsk_dropout_key key;
};
std::vector<double> dropout(const std::vector<double>& x, const DropKey& d) {
    if (d.p == 0.0) return x;
    std::vector<double> y(x.size());
    dsk_ref_dropout_fwd(x.data(), y.data(), y.size(), d.p, &d.key);
    return y;
}

std::vector<double> add(const std::vector<double>& a, const std::vector<double>& b) {
    std::vector<double> y(a.size());
    for (size_t i = 0; i < a.size(); ++i) y[i] = a[i] + b[i];
    return y;
}

struct RefAttention {
    RefLinear c_attn, c_proj;
    dsk_attention_args args;  // batch/seq filled per call
    DropKey resid;
};
std::vector<double> attention(const std::vector<double>& x, const RefAttention& r) {
    const std::vector<double> qkv = linear(x, r.c_attn);
    std::vector<double> y(x.size());
    dsk_ref_attention_forward(qkv.data(), y.data(), nullptr, &r.args);
    return dropout(linear(y, r.c_proj), r.resid);
}

struct RefMlp {
    RefLinear c_fc, c_proj;
    DropKey drop;
};
std::vector<double> mlp(const std::vector<double>& x, const RefMlp& r) {
    std::vector<double> h = linear(x, r.c_fc), g(h.size());
    dsk_ref_gelu_fwd(h.data(), g.data(), h.size());
    return dropout(linear(g, r.c_proj), r.drop);
}

struct RefLayer {
    RefLN ln_1, ln_2;
    RefAttention attn;
    RefMlp mlp;
    bool pre;
};
std::vector<double> layer(const std::vector<double>& x, const RefLayer& r) {
    if (r.pre) {
        const auto x1 = add(x, attention(layernorm(x, r.ln_1), r.attn));
        return add(x1, mlp(layernorm(x1, r.ln_2), r.mlp));
    }
    const auto x1 = layernorm(add(x, attention(x, r.attn)), r.ln_1);
    return layernorm(add(x1, mlp(x1, r.mlp)), r.ln_2);
}

DropKey key_of(const Module& m, float p, const RunContext& ctx) {
    DropKey d{p, {}};
    d.key.seed = ctx.seed;
    d.key.stream = ctx.forward_index;
    d.key.module_id = m.id();
    return d;
}

RefAttention ref_of(CausalSelfAttention& a, int64_t B, int64_t T, float resid_p, const RunContext& ctx) {
    RefAttention r{ref_of(a.c_attn()), ref_of(a.c_proj()), {}, key_of(a.resid_dropout(), resid_p, ctx)};
    r.args.batch = B;
    r.args.seq = T;
    r.args.channels = a.n_embd();
    r.args.heads = a.n_head();
    r.args.causal = a.causal() ? 1 : 0;
    r.args.dropout_p = a.attn_pdrop();
    r.args.dropout_key.seed = ctx.seed;
    r.args.dropout_key.stream = ctx.forward_index;
    r.args.dropout_key.module_id = a.id();
    return r;
}

RefLayer ref_of(TransformerLayer& l, int64_t B, int64_t T, const RunContext& ctx) {
    const auto& c = l.config();
    RefLayer r;
    r.pre = c.pre_layer_norm;
    r.ln_1 = {to_d(l.ln_1().weight().value), to_d(l.ln_1().bias().value), c.layer_norm_eps};
    r.ln_2 = {to_d(l.ln_2().weight().value), to_d(l.ln_2().bias().value), c.layer_norm_eps};
    r.attn = ref_of(l.attn(), B, T, c.hidden_dropout_ratio, ctx);
    r.mlp = {ref_of(l.mlp().c_fc()), ref_of(l.mlp().c_proj()), key_of(l.mlp().dropout(), c.hidden_dropout_ratio, ctx)};
    return r;
}

// Every parameter vector of the reference, in the order all_params lists the
// module's parameters (so gradient i pairs with reference vector i).
std::vector<std::vector<double>*> ref_params(RefAttention& r) {
    std::vector<std::vector<double>*> v = {&r.c_attn.w};
    if (!r.c_attn.b.empty()) v.push_back(&r.c_attn.b);
    v.push_back(&r.c_proj.w);
    if (!r.c_proj.b.empty()) v.push_back(&r.c_proj.b);
    return v;
}
std::vector<std::vector<double>*> ref_params(RefLayer& r) {
    std::vector<std::vector<double>*> a = ref_params(r.attn);
    std::vector<std::vector<double>*> m = {&r.mlp.c_fc.w, &r.mlp.c_fc.b, &r.mlp.c_proj.w, &r.mlp.c_proj.b};
    std::vector<std::vector<double>*> v;
    auto cat = [&v](const std::vector<std::vector<double>*>& x) { v.insert(v.end(), x.begin(), x.end()); };
    if (r.pre) {
        cat({&r.ln_1.g, &r.ln_1.b});
        cat(a);
        cat({&r.ln_2.g, &r.ln_2.b});
        cat(m);
    } else {
        cat(a);
        cat({&r.ln_1.g, &r.ln_1.b});
        cat(m);
        cat({&r.ln_2.g, &r.ln_2.b});
    }
    return v;
}

// Runs module forward + backward(w) in float and checks dx and every
// parameter gradient against finite differences of `ref_forward` in double.
template <class Ref>
void check_gradients(Module& m, Ref& ref, const std::function<std::vector<double>(const std::vector<double>&)>& fwd,
                     const Shape& xs, RunContext& ctx, double rel, double abs_frac) {
    int64_t n = 1;
    for (int64_t d : xs) n *= d;
    std::vector<double> x = randn_d(static_cast<size_t>(n), 21);
    const std::vector<double> w = randn_d(static_cast<size_t>(n), 22);
    Tensor y = m.forward(tensor_from(x, xs), ctx);
    // The float forward agrees with the double reference.
    expect_close(to_d(y), fwd(x), 1e-4, 1e-5, "output");
    Tensor dx = m.backward(tensor_from(w, xs), ctx);
    auto loss = [&] { return dot(fwd(x), w); };
    expect_close(to_d(dx), finite_diff(x, loss), rel, abs_frac, "d input");
    const std::vector<Param*> ps = all_params(m);
    std::vector<std::vector<double>*> rp = ref_params(ref);
    ASSERT_EQ(ps.size(), rp.size());
    for (size_t i = 0; i < ps.size(); ++i)
        expect_close(to_d(ps[i]->grad), finite_diff(*rp[i], loss), rel, abs_frac, ps[i]->name);
}

TransformerLayerConfig small_config(bool pre, float p_attn, float p_hidden) {
    TransformerLayerConfig c;
    c.hidden_size = 8;
    c.intermediate_size = 12;
    c.heads = 2;
    c.attn_dropout_ratio = p_attn;
    c.hidden_dropout_ratio = p_hidden;
    c.num_hidden_layers = 2;
    c.layer_norm_eps = 1e-5f;
    c.pre_layer_norm = pre;
    return c;
}

}  // namespace

TEST(NnGradAttention, ReferenceBackwardMatchesFiniteDifferences) {
    for (int causal : {1, 0})
        for (float p : {0.0f, 0.4f}) {
            SCOPED_TRACE(::testing::Message() << "causal=" << causal << " p=" << p);
            dsk_attention_args a{};
            a.batch = 2;
            a.seq = 5;
            a.channels = 6;
            a.heads = 3;
            a.causal = causal;
            a.dropout_p = p;
            a.dropout_key.seed = 77;
            a.dropout_key.stream = 2;
            a.dropout_key.module_id = 5;
            std::vector<double> qkv = randn_d(2 * 5 * 18, 1), w = randn_d(2 * 5 * 6, 2), out(w.size()), dq(qkv.size());
            auto loss = [&] {
                dsk_ref_attention_forward(qkv.data(), out.data(), nullptr, &a);
                return dot(out, w);
            };
            dsk_ref_attention_backward(qkv.data(), w.data(), dq.data(), &a);
            expect_close(dq, finite_diff(qkv, loss), 1e-6, 1e-8, "dqkv (reference)");
            // And the float kernel's gradient, to float accuracy.
            std::vector<float> qf(qkv.begin(), qkv.end()), wf(w.begin(), w.end()), dqf(qkv.size());
            cpu_kernels().attention_backward(qf.data(), nullptr, wf.data(), dqf.data(), a);
            expect_close(std::vector<double>(dqf.begin(), dqf.end()), finite_diff(qkv, loss), 1e-4, 1e-5,
                         "dqkv (kernel)");
        }
}

TEST(NnGradAttention, CausalSelfAttentionMatchesFiniteDifferences) {
    for (float p : {0.0f, 0.3f})
        for (bool causal : {true, false}) {
            SCOPED_TRACE(::testing::Message() << "p=" << p << " causal=" << causal);
            CausalSelfAttention m(8, 2, p, p, true, causal);
            m.set_names("attn.");
            prepare(m);
            randomize(m, 3);
            RunContext ctx;
            ctx.seed = 1234;
            ctx.forward_index = 7;
            RefAttention ref = ref_of(m, 2, 5, p, ctx);
            check_gradients(
                m, ref, [&](const std::vector<double>& x) { return attention(x, ref); }, {2, 5, 8}, ctx, 1e-3, 1e-4);
        }
}

TEST(NnGradTransformer, LayerMatchesFiniteDifferences) {
    for (bool pre : {true, false})
        for (float p : {0.0f, 0.25f})
            for (bool memory_options : {false, true}) {
                SCOPED_TRACE(::testing::Message() << (pre ? "pre-LN" : "post-LN") << " p=" << p
                                                  << (memory_options ? " with the three memory options" : ""));
                TransformerLayerConfig c = small_config(pre, p, p);
                c.attn_dropout_checkpoint = c.gelu_checkpoint = c.normalize_invertible = memory_options;
                TransformerLayer l(c);
                l.set_names("h.0.");
                prepare(l);
                l.init_params(17);
                randomize(l, 4);
                RunContext ctx;
                ctx.seed = 99;
                ctx.forward_index = 3;
                RefLayer ref = ref_of(l, 2, 5, ctx);
                check_gradients(
                    l, ref, [&](const std::vector<double>& x) { return layer(x, ref); }, {2, 5, 8}, ctx, 1e-3, 1e-4);
            }
}

namespace {
struct PassResult {
    std::vector<float> y, dx;
    std::vector<std::vector<float>> grads;
    int64_t peak = 0;
};
// |a - b| <= 1e-5 * max|b| element-wise (a few float ulps of the tensor's scale).
void expect_same_to_rounding(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    float mx = 0.0f;
    for (float v : b) mx = std::max(mx, std::fabs(v));
    for (size_t i = 0; i < a.size(); ++i) ASSERT_LE(std::fabs(a[i] - b[i]), 1e-5f * mx) << what << "[" << i << "]";
}

PassResult run_pass(const TransformerLayerConfig& c, ds::DType matmul = ds::DType::F32) {
    TransformerLayer l(c);
    l.set_names("h.0.");
    prepare(l);
    l.init_params(17);
    randomize(l, 8);
    ActivationMeter meter;
    RunContext ctx;
    ctx.seed = 5;
    ctx.forward_index = 11;
    ctx.meter = &meter;
    ctx.matmul_dtype = matmul;
    const Shape xs = {2, 7, 8};
    const auto x = randn_d(2 * 7 * 8, 31), w = randn_d(2 * 7 * 8, 32);
    PassResult r;
    Tensor y = l.forward(tensor_from(x, xs), ctx);
    r.peak = meter.peak_bytes;
    Tensor dx = l.backward(tensor_from(w, xs), ctx);
    EXPECT_EQ(meter.live_bytes, 0) << "backward left saved activations counted";
    r.y.assign(y.data<float>(), y.data<float>() + y.numel());
    r.dx.assign(dx.data<float>(), dx.data<float>() + dx.numel());
    for (Param* p : all_params(l)) r.grads.emplace_back(p->grad.data<float>(), p->grad.data<float>() + p->grad.numel());
    return r;
}
}  // namespace

// Also with bf16 matmuls (the bf16 engine's mode): a recomputation must use
// the forward's kernels, or the gradients change.
TEST(NnGradTransformer, MemoryOptionsKeepTheNumbersAndSaveBytes) {
    for (ds::DType matmul : {ds::DType::F32, ds::DType::BF16}) {
        SCOPED_TRACE(matmul == ds::DType::BF16 ? "bf16 matmuls" : "fp32 matmuls");
        for (bool pre : {true, false}) {
            const TransformerLayerConfig base = small_config(pre, 0.2f, 0.1f);
            const PassResult want = run_pass(base, matmul);
            ASSERT_GT(want.peak, 0);
            for (int opt = 0; opt < 4; ++opt) {
                TransformerLayerConfig c = base;
                const char* name = opt == 0   ? "attn_dropout_checkpoint"
                                   : opt == 1 ? "gelu_checkpoint"
                                   : opt == 2 ? "normalize_invertible"
                                              : "all three";
                c.attn_dropout_checkpoint = opt == 0 || opt == 3;
                c.gelu_checkpoint = opt == 1 || opt == 3;
                c.normalize_invertible = opt == 2 || opt == 3;
                SCOPED_TRACE(::testing::Message() << (pre ? "pre-LN " : "post-LN ") << name);
                const PassResult got = run_pass(c, matmul);
                if (!c.normalize_invertible) {
                    EXPECT_EQ(got.y, want.y);
                    EXPECT_EQ(got.dx, want.dx);
                    EXPECT_EQ(got.grads, want.grads);
                } else {
                    // Forward is unchanged; backward recovers x̂ = (y - beta)/gamma
                    // from the output, which rounds differently from x̂ recomputed
                    // from the input: equal to float rounding, not bit for bit.
                    EXPECT_EQ(got.y, want.y);
                    expect_same_to_rounding(got.dx, want.dx, "dx");
                    ASSERT_EQ(got.grads.size(), want.grads.size());
                    for (size_t i = 0; i < got.grads.size(); ++i)
                        expect_same_to_rounding(got.grads[i], want.grads[i], "grad " + std::to_string(i));
                }
                EXPECT_LT(got.peak, want.peak);
            }
        }
    }
}

TEST(NnGradTransformer, AttentionOpCountIsScaledDotProductRule) {
    CausalSelfAttention m(12, 3, 0.0f, 0.0f, true);
    prepare(m);
    RunContext ctx;
    ctx.training = false;
    m.forward(tensor_from(randn_d(2 * 5 * 12, 1), {2, 5, 12}), ctx);
    // q [B, H, T, hd] = [2, 3, 5, 4]: numel(q)*T + B*H*T*T*hd = 2 * 600
    EXPECT_EQ(m.op_count().macs, 1200.0);
    EXPECT_EQ(m.op_count().flops, 2400.0);
}

TEST(NnTransformerLayer, ParameterNamesFollowTheScheme) {
    auto names = [](TransformerLayerConfig c) {
        TransformerLayer l(c);
        l.set_names("h.3.");
        std::vector<std::string> v;
        for (Param* p : all_params(l)) v.push_back(p->name);
        return v;
    };
    TransformerLayerConfig c = small_config(true, 0, 0);
    EXPECT_EQ(names(c),
              (std::vector<std::string>{"h.3.ln_1.weight", "h.3.ln_1.bias", "h.3.attn.c_attn.weight",
                                        "h.3.attn.c_attn.bias", "h.3.attn.c_proj.weight", "h.3.attn.c_proj.bias",
                                        "h.3.ln_2.weight", "h.3.ln_2.bias", "h.3.mlp.c_fc.weight", "h.3.mlp.c_fc.bias",
                                        "h.3.mlp.c_proj.weight", "h.3.mlp.c_proj.bias"}));
    c.naming = "deepspeed";
    // Pre-LN: the input LayerNorm is norm_*, the one before the MLP attn_n*.
    EXPECT_EQ(names(c), (std::vector<std::string>{"h.3.norm_w", "h.3.norm_b", "h.3.attn_qkvw", "h.3.attn_qkvb",
                                                  "h.3.attn_ow", "h.3.attn_ob", "h.3.attn_nw", "h.3.attn_nb",
                                                  "h.3.inter_w", "h.3.inter_b", "h.3.output_w", "h.3.output_b"}));
    c.pre_layer_norm = false;
    // Post-LN: attn_n* after the attention residual, norm_* at the output.
    EXPECT_EQ(names(c), (std::vector<std::string>{"h.3.attn_qkvw", "h.3.attn_qkvb", "h.3.attn_ow", "h.3.attn_ob",
                                                  "h.3.attn_nw", "h.3.attn_nb", "h.3.inter_w", "h.3.inter_b",
                                                  "h.3.output_w", "h.3.output_b", "h.3.norm_w", "h.3.norm_b"}));
}

TEST(NnTransformerLayer, InitParamsFollowsDeepSpeedAndIsSeeded) {
    TransformerLayerConfig c;
    c.hidden_size = 64;
    c.heads = 4;
    c.num_hidden_layers = 8;
    c.initializer_range = 0.05f;
    auto sample_std = [](const Param& p) {
        double s = 0.0, s2 = 0.0;
        const float* v = p.value.data<float>();
        for (int64_t i = 0; i < p.value.numel(); ++i) {
            s += v[i];
            s2 += static_cast<double>(v[i]) * v[i];
        }
        const double n = static_cast<double>(p.value.numel());
        EXPECT_NEAR(s / n, 0.0, 4.0 * std::sqrt(s2 / n) / std::sqrt(n)) << p.name;
        return std::sqrt(s2 / n);
    };
    for (bool adjust : {true, false}) {
        c.adjust_init_range = adjust;
        TransformerLayer l(c);
        l.init_params(42);
        const double out_std = adjust ? 0.05 / std::sqrt(16.0) : 0.05;
        EXPECT_NEAR(sample_std(l.attn().c_attn().weight()), 0.05, 0.05 * 0.03);
        EXPECT_NEAR(sample_std(l.mlp().c_fc().weight()), 0.05, 0.05 * 0.03);
        EXPECT_NEAR(sample_std(l.attn().c_proj().weight()), out_std, out_std * 0.05);
        EXPECT_NEAR(sample_std(l.mlp().c_proj().weight()), out_std, out_std * 0.03);
        for (Linear* lin : {&l.attn().c_attn(), &l.attn().c_proj(), &l.mlp().c_fc(), &l.mlp().c_proj()})
            for (int64_t i = 0; i < lin->bias().value.numel(); ++i) ASSERT_EQ(lin->bias().value.data<float>()[i], 0.0f);
        for (LayerNorm* ln : {&l.ln_1(), &l.ln_2()})
            for (int64_t i = 0; i < 64; ++i) {
                ASSERT_EQ(ln->weight().value.data<float>()[i], 1.0f);
                ASSERT_EQ(ln->bias().value.data<float>()[i], 0.0f);
            }
    }
    // Same seed, same values; another seed, other values.
    TransformerLayer a(c), b(c), d(c);
    a.init_params(7);
    b.init_params(7);
    d.init_params(8);
    for (size_t i = 0; i < all_params(a).size(); ++i) {
        const Param& pa = *all_params(a)[i];
        const Param& pb = *all_params(b)[i];
        ASSERT_EQ(0, std::memcmp(pa.value.data_ptr(), pb.value.data_ptr(), pa.value.nbytes())) << pa.name;
    }
    EXPECT_NE(0, std::memcmp(a.attn().c_attn().weight().value.data_ptr(), d.attn().c_attn().weight().value.data_ptr(),
                             a.attn().c_attn().weight().value.nbytes()));
}

TEST(NnTransformerLayer, BadConfigIsRefusedNamingTheField) {
    auto refused = [](const std::function<void(TransformerLayerConfig&)>& edit, const char* needle) {
        TransformerLayerConfig c = small_config(true, 0, 0);
        edit(c);
        const ds::Error e = catch_error([&] { TransformerLayer l(c); });
        EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT) << needle;
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    };
    refused([](auto& c) { c.hidden_size = 0; }, "hidden_size = 0");
    refused([](auto& c) { c.heads = 3; }, "hidden_size = 8 is not a multiple of heads = 3");
    refused([](auto& c) { c.attn_dropout_ratio = 1.0f; }, "attn_dropout_ratio = 1");
    refused([](auto& c) { c.hidden_dropout_ratio = -0.5f; }, "hidden_dropout_ratio = -0.5");
    refused([](auto& c) { c.layer_norm_eps = 0.0f; }, "layer_norm_eps = 0");
    refused([](auto& c) { c.initializer_range = NAN; }, "initializer_range = nan");
    refused([](auto& c) { c.num_hidden_layers = -1; }, "num_hidden_layers = -1");
    refused([](auto& c) { c.naming = "bert"; }, "naming = \"bert\"");
    // A wrong input shape is refused with the layer's name.
    TransformerLayer l(small_config(true, 0, 0));
    l.set_names("h.1.");
    RunContext ctx;
    const ds::Error e = catch_error([&] { l.forward(tensor_from(randn_d(10, 1), {2, 5}), ctx); });
    EXPECT_NE(std::string(e.what()).find("'h.1'"), std::string::npos) << e.what();
    const ds::Error e2 = catch_error([&] { l.backward(tensor_from(randn_d(80, 1), {2, 5, 8}), ctx); });
    EXPECT_EQ(e2.status(), DS_ERR_INVALID_STATE) << e2.what();
}
