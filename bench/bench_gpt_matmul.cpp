// bench_gpt_matmul — the matrix products of one GPT training step (the shapes
// in gpt_matmul_shapes.h), timed standalone through the library's GEMM
// kernels, and the same shapes through raw oneDNN matmul primitives with the
// B operand in the layout oneDNN prefers (packed once, outside the timing):
// the peak this machine's oneDNN reaches on each shape. Interleaved rep by rep.
//
//   OMP_NUM_THREADS=2 bench_gpt_matmul [--layers 6 --heads 6 --embd 384 --vocab 8192
//                                       --batch 8 --seq 128] [--min-ms 150]
//
// The library's side is what the layers call, through the host kernel table
// (dsk_backend_cpu()): a Linear's forward is linear_fwd (one matmul reading the weights as stored, bias fused;
// a per-call reorder into oneDNN's packed layout measured slower, docs/PERFORMANCE.md "Linear / GEMM"),
// its input and weight gradients and the
// attention products are gemm / gemm_batched.
// Prints one line per shape and
//   RESULT matmul ours_ms_per_step=<sum of count x median> peak_ms_per_step=<same, oneDNN>
//          ours_gflops=<..> peak_gflops=<..> ours_over_peak=<peak time / our time>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "gpt_matmul_shapes.h"
#include "backend.h"
#include "nn_gemm.h"

namespace {

using bench::GemmShape;
using dnnl::memory;

struct Buffers {
    std::vector<float> a, b, c, bias;
};

Buffers make_buffers(const GemmShape& s) {
    Buffers x;
    std::mt19937 g(7);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    x.a.resize(size_t(s.batch * s.m * s.k));
    x.b.resize(size_t(s.batch * s.k * s.n));
    x.c.assign(size_t(s.batch * s.m * s.n), 0.f);
    x.bias.resize(size_t(s.n));
    for (float& v : x.a) v = u(g);
    for (float& v : x.b) v = u(g);
    for (float& v : x.bias) v = u(g);
    return x;
}

// The call the layer makes for this shape, through the host kernel table (the
// table every layer reaches its kernels through). Linear forwards ("fwd" in
// the name) are linear_fwd with the bias, like nn::Linear; B is then the
// weight [out, in] = [n, k]. Its backward is gemm (dX, then dW with beta 1).
int ours(const dsk_backend* kt, const GemmShape& s, Buffers& x) {
    const int64_t lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
    if (s.what.size() > 4 && s.what.compare(s.what.size() - 4, 4, " fwd") == 0)
        return kt->linear_fwd(kt, x.a.data(), x.b.data(), x.bias.data(), x.c.data(), s.m, s.k, s.n);
    if (s.batch == 1)
        return kt->gemm(kt, s.trans_a, s.trans_b, s.m, s.n, s.k, 1.f, x.a.data(), lda, x.b.data(), ldb, s.beta,
                        x.c.data(), s.n);
    return kt->gemm_batched(kt, s.trans_a, s.trans_b, s.m, s.n, s.k, 1.f, x.a.data(), lda, x.b.data(), ldb,
                            s.beta, x.c.data(), s.n, s.batch, s.m * s.k, s.k * s.n, s.m * s.n);
}

// Raw oneDNN: A plain (transposed by its strides when trans_a), B in the
// primitive's preferred layout (reordered once here), C plain, beta 1 as a
// sum post-op. Batched shapes are 3-D matmuls.
struct Peak {
    dnnl::matmul prim;
    memory a, b, c;
};

Peak make_peak(const dnnl::engine& eng, dnnl::stream& st, const GemmShape& s, Buffers& x) {
    using tag = memory::format_tag;
    using dt = memory::data_type;
    const bool b3 = s.batch > 1;
    const memory::dims ad = b3 ? memory::dims{s.batch, s.m, s.k} : memory::dims{s.m, s.k};
    const memory::dims bd = b3 ? memory::dims{s.batch, s.k, s.n} : memory::dims{s.k, s.n};
    const memory::dims cd = b3 ? memory::dims{s.batch, s.m, s.n} : memory::dims{s.m, s.n};
    const tag plain = b3 ? tag::abc : tag::ab, trans = b3 ? tag::acb : tag::ba;
    memory::desc a_md(ad, dt::f32, s.trans_a ? trans : plain);
    memory::desc b_plain(bd, dt::f32, s.trans_b ? trans : plain);
    memory::desc b_any(bd, dt::f32, tag::any);
    memory::desc c_md(cd, dt::f32, plain);
    dnnl::primitive_attr attr;
    if (s.beta != 0.f) {
        dnnl::post_ops po;
        po.append_sum(s.beta);
        attr.set_post_ops(po);
    }
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, c_md), attr, eng);
    Peak p{dnnl::matmul(pd), memory(a_md, eng, x.a.data()), memory(pd.weights_desc(), eng),
           memory(c_md, eng, x.c.data())};
    memory src(b_plain, eng, x.b.data());
    dnnl::reorder(src, p.b).execute(st, src, p.b);
    st.wait();
    return p;
}

void run_peak(Peak& p, dnnl::stream& st) {
    p.prim.execute(st, {{DNNL_ARG_SRC, p.a}, {DNNL_ARG_WEIGHTS, p.b}, {DNNL_ARG_DST, p.c}});
    st.wait();
}

int parse(int argc, char** argv, bench::GptDims& d, double& min_ms) {
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) {
            std::fprintf(stderr, "bench_gpt_matmul: argument %s needs a value\n", argv[i]);
            return 0;
        }
        const std::string k = argv[i];
        char* end = nullptr;
        const double v = std::strtod(argv[i + 1], &end);
        if (!*argv[i + 1] || *end || v <= 0) {
            std::fprintf(stderr, "bench_gpt_matmul: %s %s: expected a positive number\n", argv[i], argv[i + 1]);
            return 0;
        }
        if (k == "--layers") d.layers = int64_t(v);
        else if (k == "--heads") d.heads = int64_t(v);
        else if (k == "--embd") d.embd = int64_t(v);
        else if (k == "--vocab") d.vocab = int64_t(v);
        else if (k == "--batch") d.batch = int64_t(v);
        else if (k == "--seq") d.seq = int64_t(v);
        else if (k == "--min-ms") min_ms = v;
        else {
            std::fprintf(stderr, "bench_gpt_matmul: unknown argument %s\n", argv[i]);
            return 0;
        }
    }
    if (d.embd % d.heads) {
        std::fprintf(stderr, "bench_gpt_matmul: --heads %lld does not divide --embd %lld\n", (long long)d.heads,
                     (long long)d.embd);
        return 0;
    }
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    bench::GptDims d{6, 6, 384, 8192, 8, 128};
    double min_ms = 150;
    if (!parse(argc, argv, d, min_ms)) return 2;
    const dsk_backend* kt = dsk_backend_cpu();
    if (!kt->gemm || !kt->gemm_batched || !kt->linear_fwd) {
        std::fprintf(stderr, "bench_gpt_matmul: the host kernel table has no gemm/gemm_batched/linear_fwd\n");
        return 1;
    }
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream st(eng);
    const dnnl_version_t* ver = dnnl_version();
    std::printf("gemm engine (ours): %s | raw oneDNN %d.%d.%d (isa %d)\n", dsk_cpu_gemm_engine(), ver->major,
                ver->minor, ver->patch, int(dnnl_get_effective_cpu_isa()));
    std::printf("%-18s %5s %6s %6s %6s %5s | %9s %9s | %9s %9s | %6s\n", "product", "calls", "M", "N", "K", "batch",
                "ours ms", "GFLOPS", "peak ms", "GFLOPS", "ratio");
    double ours_total = 0, peak_total = 0, flops_total = 0;
    for (const GemmShape& s : bench::gpt_step_gemms(d)) {
        Buffers x = make_buffers(s), y = make_buffers(s);
        Peak p = make_peak(eng, st, s, y);
        for (int w = 0; w < 2; w++) {  // warm up: primitive creation, caches
            if (ours(kt, s, x) != DSK_OK) {
                std::fprintf(stderr, "bench_gpt_matmul: %s: %s\n", s.what.c_str(), dsk_last_error());
                return 1;
            }
            run_peak(p, st);
        }
        std::vector<double> to, tp;
        double spent = 0;
        while (to.size() < 5 || (spent < min_ms && to.size() < 200)) {
            auto t0 = bench::Clock::now();
            ours(kt, s, x);
            const double a = bench::ms_since(t0);
            t0 = bench::Clock::now();
            run_peak(p, st);
            const double b = bench::ms_since(t0);
            to.push_back(a);
            tp.push_back(b);
            spent += a + b;
        }
        const double mo = bench::median(to), mp = bench::median(tp);
        std::printf("%-18s %5d %6lld %6lld %6lld %5lld | %9.3f %9.1f | %9.3f %9.1f | %6.2f\n", s.what.c_str(),
                    s.count, (long long)s.m, (long long)s.n, (long long)s.k, (long long)s.batch, mo,
                    s.flops() / mo * 1e-6, mp, s.flops() / mp * 1e-6, mp / mo);
        ours_total += s.count * mo;
        peak_total += s.count * mp;
        flops_total += s.count * s.flops();
    }
    std::printf("RESULT matmul ours_ms_per_step=%.1f peak_ms_per_step=%.1f ours_gflops=%.1f peak_gflops=%.1f "
                "ours_over_peak=%.3f gflop_per_step=%.2f\n",
                ours_total, peak_total, flops_total / ours_total * 1e-6, flops_total / peak_total * 1e-6,
                peak_total / ours_total, flops_total * 1e-9);
    return 0;
}
