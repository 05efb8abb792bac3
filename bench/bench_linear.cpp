// Linear / GEMM: our nn::Linear forward and backward against the raw oneDNN
// matmul on the same shapes in the same run (issue 11 §7: matmuls >= 70 % of
// oneDNN's peak). GPT shapes: rows (batch x sequence) 1024 and 4096,
// n_embd C = 256 and 768, the four Linears of a block (C->3C attention
// projection, C->C attention output, C->4C MLP up, 4C->C MLP down).
//
//   raw fwd   oneDNN matmul, weights reordered to the packed layout once,
//             outside the timing, bias fused (its best case);
//   ours fwd  nn::Linear::forward: dsk_linear_fwd (one matmul reading the
//             weights as stored, bias fused) into a newly allocated output;
//   plain     dsk_gemm with the weights as stored, no bias;
//   kernel    dsk_linear_fwd into a preallocated output: the layer minus
//             its output allocation;
//   packed    dsk_linear_fwd_packed: the weights reordered to oneDNN's
//             packed layout on every call (they change every step), the
//             scheme the layer would use if it paid;
//   raw bwd   dx = dy W and dW += dy^T x as two oneDNN matmuls on plain
//             layouts, primitives created outside the timing;
//   ours bwd  nn::Linear::backward (the same two products + the bias grad).
//
//   OMP_NUM_THREADS=2 bench_linear [reps=5]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "nn/linear.h"
#include "nn_gemm.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace {

using dnnl::memory;
using dt = memory::data_type;
using bench::Clock;
using bench::ms_since;

std::string cpu_model() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    return "unknown";
}

void fill(float* p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; ++i) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = static_cast<float>(seed >> 8) / 16777216.0f - 0.5f;
    }
}

double cpu_ms() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Wall and process CPU milliseconds of f(). On a machine shared with other
// jobs the CPU time (all threads, spin-waits included) is the steadier
// figure: it does not count the time the scheduler gave to others.
struct Times {
    double wall = 1e30, cpu = 1e30;
    void keep_best(const Times& t) {
        wall = std::min(wall, t.wall);
        cpu = std::min(cpu, t.cpu);
    }
};
template <class F>
Times time_ms(F&& f) {
    const double c0 = cpu_ms();
    const auto t0 = Clock::now();
    f();
    return {ms_since(t0), cpu_ms() - c0};
}

struct Raw {
    dnnl::engine eng{dnnl::engine::kind::cpu, 0};
    dnnl::stream s{eng};

    // A (rows x cols) row-major or transposed view.
    static memory::desc md(int64_t r, int64_t c, bool trans) {
        return memory::desc({r, c}, dt::f32, trans ? memory::dims{1, r} : memory::dims{c, 1});
    }
};

}  // namespace

int main(int argc, char** argv) {
    const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
    std::printf("cpu: %s | isa: %s | threads: %d | gemm engine: %s\n", cpu_model().c_str(),
                dsk_isa_name(dsk_cpu_isa()), omp_get_max_threads(), dsk_cpu_gemm_engine());
    std::printf("best of %d interleaved reps after a warm-up; GFLOPS = 2*rows*in*out (fwd), 4*rows*in*out (bwd) / wall time;\n"
                "after ||: ratios to raw from process CPU time: fwd ours, fwd plain, fwd kernel (dsk_linear_fwd into a\n"
                "preallocated y: the layer without its output allocation), fwd packed (dsk_linear_fwd_packed:\n"
                "the kernel with the per-call reorder to the packed layout), bwd ours\n\n", reps);
    std::printf("%5s %5s %5s | %8s %8s %8s %6s %6s | %8s %8s %6s || %-20s\n", "rows", "in", "out", "raw fwd",
                "ours fwd", "plain", "o/raw", "pl/raw", "raw bwd", "ours bwd", "o/raw", "cpu-time ratios");
    Raw raw;
    double sum[12] = {};
    for (int64_t rows : {1024, 4096})
        for (int64_t c : {256, 768}) {
            const int64_t shapes[][2] = {{c, 3 * c}, {c, c}, {c, 4 * c}, {4 * c, c}};
            for (const auto& sh : shapes) {
                const int64_t in = sh[0], out = sh[1];
                const double flop = 2.0 * rows * in * out;
                ds::nn::Linear lin(in, out, true);
                fill(lin.weight().value.data<float>(), out * in, 1);
                fill(lin.bias().value.data<float>(), out, 2);
                lin.weight().grad = ds::Tensor::zeros({out, in}, ds::DType::F32, ds::Device::cpu(),
                                                      ds::Allocator::process(), ds::MemCategory::Grads);
                lin.bias().grad = ds::Tensor::zeros({out}, ds::DType::F32, ds::Device::cpu(), ds::Allocator::process(),
                                                    ds::MemCategory::Grads);
                ds::Tensor x = ds::Tensor::empty({rows, in}, ds::DType::F32, ds::Device::cpu(),
                                                 ds::Allocator::process(), ds::MemCategory::Buffers);
                ds::Tensor dy = ds::Tensor::empty({rows, out}, ds::DType::F32, ds::Device::cpu(),
                                                  ds::Allocator::process(), ds::MemCategory::Buffers);
                fill(x.data<float>(), rows * in, 3);
                fill(dy.data<float>(), rows * out, 4);
                ds::nn::RunContext ctx;
                const float* w = lin.weight().value.data<float>();
                const float* b = lin.bias().value.data<float>();
                std::vector<float> y(rows * out), dx(rows * in), dw(out * in);

                // raw forward: packed weights prepared outside the timing
                const memory::desc src = Raw::md(rows, in, false), dst = Raw::md(rows, out, false);
                const memory::desc bmd({1, out}, dt::f32, {out, 1});
                dnnl::matmul::primitive_desc fpd(
                    dnnl::matmul::desc(src, memory::desc({in, out}, dt::f32, memory::format_tag::any), bmd, dst),
                    raw.eng);
                dnnl::matmul fwd(fpd);
                memory user_w(Raw::md(in, out, true), raw.eng, const_cast<float*>(w));
                memory packed(fpd.weights_desc(), raw.eng);
                dnnl::reorder(user_w, packed).execute(raw.s, user_w, packed);
                raw.s.wait();
                memory xm(src, raw.eng, x.data<float>()), ym(dst, raw.eng, y.data()),
                    bm(bmd, raw.eng, const_cast<float*>(b));
                auto run_raw = [&] {
                    fwd.execute(raw.s, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, packed}, {DNNL_ARG_BIAS, bm},
                                        {DNNL_ARG_DST, ym}});
                    raw.s.wait();
                };
                auto run_ours = [&] {
                    ds::Tensor out_t = lin.forward(x, ctx);
                    lin.clear_saved();
                };
                auto run_kernel = [&] {  // the layer's kernel into a preallocated y
                    dsk_cpu_linear_fwd(x.data<float>(), w, b, y.data(), rows, in, out);
                };
                auto run_packed = [&] {  // the same with the per-call reorder to the packed layout
                    dsk_cpu_linear_fwd_packed(x.data<float>(), w, b, y.data(), rows, in, out);
                };
                auto run_plain = [&] {
                    dsk_cpu_gemm(0, 1, rows, out, in, 1.0f, x.data<float>(), in, w, in, 0.0f, y.data(), out);
                };

                // raw backward: dx = dy W (W [out, in] plain), dW += dy^T x
                dnnl::matmul bx(dnnl::matmul::primitive_desc(
                    dnnl::matmul::desc(Raw::md(rows, out, false), Raw::md(out, in, false), Raw::md(rows, in, false)),
                    raw.eng));
                dnnl::post_ops po;
                po.append_sum(1.0f);
                dnnl::primitive_attr acc;
                acc.set_post_ops(po);
                dnnl::matmul bw(dnnl::matmul::primitive_desc(
                    dnnl::matmul::desc(Raw::md(out, rows, true), Raw::md(rows, in, false), Raw::md(out, in, false)),
                    acc, raw.eng));
                memory dym(Raw::md(rows, out, false), raw.eng, dy.data<float>()),
                    wm(Raw::md(out, in, false), raw.eng, const_cast<float*>(w)),
                    dxm(Raw::md(rows, in, false), raw.eng, dx.data()),
                    dyt(Raw::md(out, rows, true), raw.eng, dy.data<float>()),
                    xm2(Raw::md(rows, in, false), raw.eng, x.data<float>()),
                    dwm(Raw::md(out, in, false), raw.eng, dw.data());
                auto run_raw_b = [&] {
                    bx.execute(raw.s, {{DNNL_ARG_SRC, dym}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dxm}});
                    bw.execute(raw.s, {{DNNL_ARG_SRC, dyt}, {DNNL_ARG_WEIGHTS, xm2}, {DNNL_ARG_DST, dwm}});
                    raw.s.wait();
                };
                // The five are interleaved rep by rep and the best rep of each
                // counts, so load from other processes hits them alike.
                Times t_raw, t_ours, t_plain, t_raw_b, t_ours_b, t_kern, t_pack;
                for (int r = 0; r <= reps; ++r) {  // rep 0 warms up
                    const Times a = time_ms(run_raw), o = time_ms(run_ours), p = time_ms(run_plain);
                    const Times kk = time_ms(run_kernel), pk = time_ms(run_packed);
                    const Times rb = time_ms(run_raw_b);
                    lin.forward(x, ctx);
                    const Times ob = time_ms([&] { ds::Tensor g = lin.backward(dy, ctx); });
                    if (r == 0) continue;
                    t_raw.keep_best(a), t_ours.keep_best(o), t_plain.keep_best(p), t_kern.keep_best(kk), t_pack.keep_best(pk);
                    t_raw_b.keep_best(rb), t_ours_b.keep_best(ob);
                }

                const double g_raw = flop / t_raw.wall / 1e6, g_ours = flop / t_ours.wall / 1e6,
                             g_plain = flop / t_plain.wall / 1e6;
                const double g_raw_b = 2 * flop / t_raw_b.wall / 1e6, g_ours_b = 2 * flop / t_ours_b.wall / 1e6;
                std::printf("%5lld %5lld %5lld | %8.1f %8.1f %8.1f %6.2f %6.2f | %8.1f %8.1f %6.2f || %6.2f %6.2f %6.2f %6.2f %6.2f\n",
                            static_cast<long long>(rows), static_cast<long long>(in), static_cast<long long>(out),
                            g_raw, g_ours, g_plain, g_ours / g_raw, g_plain / g_raw, g_raw_b, g_ours_b,
                            g_ours_b / g_raw_b, t_raw.cpu / t_ours.cpu, t_raw.cpu / t_plain.cpu,
                            t_raw.cpu / t_kern.cpu, t_raw.cpu / t_pack.cpu, t_raw_b.cpu / t_ours_b.cpu);
                std::fflush(stdout);
                sum[0] += t_ours.wall, sum[1] += t_raw.wall, sum[2] += t_ours_b.wall, sum[3] += t_raw_b.wall;
                sum[4] += t_ours.cpu, sum[5] += t_raw.cpu, sum[6] += t_ours_b.cpu, sum[7] += t_raw_b.cpu;
                sum[8] += t_plain.wall, sum[9] += t_plain.cpu, sum[10] += t_kern.cpu, sum[11] += t_pack.cpu;
            }
        }
    std::printf("\ntime-weighted over all shapes (GFLOPS ratios), wall: forward ours/raw %.2f, plain/raw %.2f, "
                "backward ours/raw %.2f;\n  cpu: forward ours/raw %.2f, plain/raw %.2f, kernel/raw %.2f, packed/raw %.2f, "
                "backward ours/raw %.2f\n",
                sum[1] / sum[0], sum[1] / sum[8], sum[3] / sum[2], sum[5] / sum[4], sum[5] / sum[9], sum[5] / sum[10],
                sum[5] / sum[11], sum[7] / sum[6]);
    return 0;
}
