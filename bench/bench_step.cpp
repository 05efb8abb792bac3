// ds_step vs the bare fused AdamW kernel, measured in one run.
//
// For N parameters (default 100M, as one tensor) the engine runs AdamW with
// gradient clipping on; each repetition hands it a fresh gradient
// (ds_engine_accumulate_grad + ds_backward, untimed) and times ds_step —
// overflow check, global norm, clip factor, the optimizer over every
// parameter, the LR schedule, the counters. The bare kernel is dsk_cpu_adam_step
// over separate buffers of the same size and dtypes, interleaved with the
// steps rep by rep. Printed: median ms and the median of the per-rep ratios
// step / kernel, for fp32, and for bf16 and fp16 working copies.
//
//   OMP_NUM_THREADS=2 OMP_PROC_BIND=close build/bench/bench_step [N] [reps]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "deepspeed_c.h"
#include "kernels.h"

namespace {

using bench::Clock;
using bench::check;
using bench::median;
using bench::ms_since;

struct Timing {
    double step_ms, kernel_ms, ratio;  // medians; ratio = median of per-rep ratios
};

// Interleaves one bare-kernel step and one ds_step per repetition (the
// machine's bandwidth drifts, so the ratio is taken rep by rep).
Timing time_both(const char* precision, int g_dtype, int w_dtype, int64_t n, int reps, const std::vector<float>& grad) {
    std::string cfg = std::string("{\"train_batch_size\": 1, \"gradient_clipping\": 1.0,") +
                      " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-4, \"weight_decay\": 0.01}}" +
                      precision + "}";
    ds_engine_t* e = nullptr;
    check(ds_engine_create(cfg.c_str(), nullptr, &e), "create");
    int64_t shape = n;
    DLTensor t{};
    t.data = const_cast<float*>(grad.data());  // any values: the init is copied
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = &shape;
    check(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE), "add_param");
    check(ds_engine_init(e), "init");
    // The bare kernel's buffers, same sizes and dtypes as the engine's.
    const size_t un = static_cast<size_t>(n);
    std::vector<float> p(un, 0.01f), m(un, 0.0f), v(un, 0.0f);
    std::vector<uint16_t> g16, w16;
    const void* g = grad.data();
    if (g_dtype != DSK_F32) {
        g16.assign(un, 0);
        dsk_cpu_convert(grad.data(), DSK_F32, g16.data(), g_dtype, un);
        g = g16.data();
    }
    if (w_dtype != DSK_F32) w16.assign(un, 0);
    dsk_adam_hparams h{1e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.1f, 1.0f, 0.5f, 1};
    std::vector<double> ks, ss, rs;
    ds_step_info_t info;
    info.struct_size = sizeof info;
    for (int r = 0; r < reps + 1; ++r) {
        auto t0 = Clock::now();
        dsk_cpu_adam_step(p.data(), g, g_dtype, m.data(), v.data(), DSK_F32, w16.empty() ? nullptr : w16.data(), w_dtype,
                      un, &h);
        const double k = ms_since(t0);
        check(ds_engine_accumulate_grad(e, "w", &t), "accumulate_grad");
        check(ds_backward(e, nullptr), "backward");
        t0 = Clock::now();
        check(ds_step(e, &info), "step");
        const double st = ms_since(t0);
        if (info.skipped) {
            std::fprintf(stderr, "unexpected overflow\n");
            std::exit(1);
        }
        if (r == 0) continue;  // warm-up
        ks.push_back(k);
        ss.push_back(st);
        rs.push_back(st / k);
    }
    ds_engine_destroy(e);
    return {median(ss), median(ks), median(rs)};
}

}  // namespace

int main(int argc, char** argv) {
    const int64_t n = argc > 1 ? std::atoll(argv[1]) : 100000000;
    const int reps = argc > 2 ? std::atoi(argv[2]) : 7;
    std::printf("bench_step: %lld parameters, %d reps, simd %s\n", static_cast<long long>(n), reps,
                dsk_isa_name(dsk_cpu_isa()));
    std::vector<float> grad(static_cast<size_t>(n), 1e-3f);
    struct Row {
        const char* name;
        const char* config;
        int g_dtype, w_dtype;
    } rows[] = {
        {"fp32", "", DSK_F32, DSK_F32},
        {"bf16", ", \"bf16\": {\"enabled\": true}", DSK_BF16, DSK_BF16},
        {"fp16", ", \"fp16\": {\"enabled\": true, \"initial_scale_power\": 0}", DSK_F16, DSK_F16},
    };
    for (const Row& r : rows) {
        const Timing t = time_both(r.config, r.g_dtype, r.w_dtype, n, reps, grad);
        std::printf("%s: ds_step %.1f ms, bare dsk_adam_step %.1f ms, ratio %.3f (median of per-rep ratios)\n", r.name,
                    t.step_ms, t.kernel_ms, t.ratio);
    }
    return 0;
}
