// The optimizer boundary against the memory floor (issue 8 §5), in one run.
//
// For N fp32 parameters (default 100M, one tensor), AdamW with gradient
// clipping, each repetition times, interleaved:
//   ceiling  an Adam-shaped in-place pass: read p, g, m, v, write p, m, v
//            (28 B/param) with trivial arithmetic: the memory-bound best any
//            Adam step can do on this machine;
//   (a)      gradients written through ds_engine_grad_view (untimed), then
//            ds_backward + ds_step (norm + overflow check + clip + AdamW):
//            floor 32 B/param (the norm reads the gradients once more);
//   (b)      ds_engine_accumulate_grad (the first micro-step of a window) +
//            ds_backward + ds_step: floor 36 B/param (the copy reads the
//            host's gradient and writes the buffer once).
// Printed: the CPU model and ISA, the ceiling's median ms and bandwidth, and
// per path the median time, the floor ratio, the median of the per-rep
// ratios path / ceiling, and the ratio of the fastest reps (min/min).
//
//   OMP_NUM_THREADS=2 OMP_PROC_BIND=close build/bench/bench_boundary [N] [reps]
//   (DS_CPU_ISA=avx2 to run the AVX2 kernels on an AVX-512 machine)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <omp.h>

#include "bench_util.h"
#include "deepspeed_c.h"
#include "kernels.h"

namespace {

using bench::Clock;
using bench::check;
using bench::median;
using bench::ms_since;

std::string cpu_model() {
    FILE* f = std::fopen("/proc/cpuinfo", "r");
    if (!f) return "unknown";
    char line[512];
    std::string model = "unknown";
    while (std::fgets(line, sizeof line, f)) {
        if (std::strncmp(line, "model name", 10) == 0) {
            const char* c = std::strchr(line, ':');
            if (c) model = c + 2;
            if (!model.empty() && model.back() == '\n') model.pop_back();
            break;
        }
    }
    std::fclose(f);
    return model;
}

// Adam-shaped in-place streams with minimal arithmetic (vectorized by the
// compiler, split over the OpenMP threads as the kernels split).
__attribute__((noinline)) void ceiling_pass(float* __restrict p, const float* __restrict g, float* __restrict m,
                                            float* __restrict v, int64_t n) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float gi = g[i];
        const float mi = 0.9f * m[i] + gi;
        const float vi = 0.999f * v[i] + gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] - 1e-4f * mi + 1e-8f * vi;
    }
}

ds_engine_t* make_engine(int64_t n, std::vector<float>& init, int64_t* shape) {
    const char* cfg =
        "{\"train_batch_size\": 1, \"gradient_clipping\": 1.0,"
        " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-4, \"weight_decay\": 0.01}}}";
    ds_engine_t* e = nullptr;
    check(ds_engine_create(cfg, nullptr, &e), "create");
    *shape = n;
    DLTensor t{};
    t.data = init.data();
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
    check(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE), "add_param");
    check(ds_engine_init(e), "init");
    return e;
}

void step_ok(ds_engine_t* e) {
    ds_step_info_t info;
    std::memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    check(ds_step(e, &info), "step");
    if (info.skipped) {
        std::fprintf(stderr, "unexpected overflow\n");
        std::exit(1);
    }
}

}  // namespace

int main(int argc, char** argv) {
    const int64_t n = argc > 1 ? std::atoll(argv[1]) : 100000000;
    const int reps = argc > 2 ? std::atoi(argv[2]) : 9;
    const size_t un = static_cast<size_t>(n);
    std::printf("bench_boundary: %lld fp32 parameters, AdamW + clipping, %d reps, %d threads\n",
                static_cast<long long>(n), reps, omp_get_max_threads());
    std::printf("cpu: %s; simd %s (detected %s)\n", cpu_model().c_str(), dsk_isa_name(dsk_cpu_isa()),
                dsk_isa_name(dsk_cpu_isa_detected()));

    std::vector<float> host_grad(un), init(un, 0.01f);
    for (size_t i = 0; i < un; ++i) host_grad[i] = 1e-5f * static_cast<float>(static_cast<int>(i % 201) - 100);
    std::vector<float> cp(un, 0.01f), cg(host_grad), cm(un, 0.0f), cv(un, 0.0f);

    int64_t shape_a = 0, shape_b = 0;
    ds_engine_t* ea = make_engine(n, init, &shape_a);
    ds_engine_t* eb = make_engine(n, init, &shape_b);
    DLTensor g{};
    g.data = host_grad.data();
    g.device = {kDLCPU, 0};
    g.ndim = 1;
    g.dtype = {kDLFloat, 32, 1};
    g.shape = &shape_b;

    std::vector<double> tc, ta, tb, ra, rb;
    for (int r = 0; r < reps + 1; ++r) {
        auto t0 = Clock::now();
        ceiling_pass(cp.data(), cg.data(), cm.data(), cv.data(), n);
        const double c = ms_since(t0);

        // (a): the host writes its gradient into the engine's buffer (untimed).
        DLTensor view{};
        check(ds_engine_grad_view(ea, "w", &view), "grad_view");
        std::memcpy(static_cast<char*>(view.data) + view.byte_offset, host_grad.data(), un * sizeof(float));
        t0 = Clock::now();
        check(ds_backward(ea, nullptr), "backward (a)");
        step_ok(ea);
        const double a = ms_since(t0);

        // (b): accumulate_grad copies it (timed with the step).
        t0 = Clock::now();
        check(ds_engine_accumulate_grad(eb, "w", &g), "accumulate_grad");
        check(ds_backward(eb, nullptr), "backward (b)");
        step_ok(eb);
        const double b = ms_since(t0);
        if (r == 0) continue;  // warm-up
        tc.push_back(c);
        ta.push_back(a);
        tb.push_back(b);
        ra.push_back(a / c);
        rb.push_back(b / c);
    }
    ds_engine_destroy(ea);
    ds_engine_destroy(eb);
    const double cms = median(tc);
    std::printf("ceiling (28 B/param, in place): %.1f ms = %.1f GB/s\n", cms, 28.0 * static_cast<double>(n) / cms / 1e6);
    // On a loaded machine the fastest rep of each is the least disturbed:
    // the ratio of the minima is printed beside the median of the ratios.
    const double cmin = *std::min_element(tc.begin(), tc.end());
    const double amin = *std::min_element(ta.begin(), ta.end()), bmin = *std::min_element(tb.begin(), tb.end());
    std::printf("(a) grad_view + ds_backward + ds_step: %.1f ms, ratio %.3f (floor 32/28 = %.3f); min/min %.3f\n",
                median(ta), median(ra), 32.0 / 28.0, amin / cmin);
    std::printf("(b) accumulate_grad + ds_backward + ds_step: %.1f ms, ratio %.3f (floor 36/28 = %.3f); min/min %.3f\n",
                median(tb), median(rb), 36.0 / 28.0, bmin / cmin);
    return 0;
}
