// bench_cuda_engine [--layers 12 --embd 768 --vocab 50304 --ctx 1024] [--rounds 5 --warmup 2]
// One training step (gradient hand-over for every tensor, ds_backward,
// ds_step) of an engine on cuda:0 with GPT-2-shaped parameters (GPT-2 small
// by default: 124M parameters in 148 tensors), bf16, AdamW, clipping 1.0,
// fp32 gradients already in device memory. Each mode is measured against
// its bare parts timed in the same run:
//   device-resident (no offload): the step vs a device-to-device copy of the
//     bytes it must move (34 per parameter: read the fp32 gradient, write the
//     bf16 accumulation buffer; AdamW reads master, gradient, m, v and writes
//     master, m, v, the bf16 copy) and vs the bare kernels on one flat buffer
//     (dsk_cuda_axpy_sumsq + dsk_cuda_adam_multi);
//   ZeRO-Offload (offload_optimizer "cpu", stage 1): the step vs the sum of
//     the gradients' device-to-host copy, the CPU AdamW over the flat master
//     (dsk_cpu_adam_step) and the bf16 weights' host-to-device copy;
//   ZeRO-Offload with offload_optimizer.pin_memory: the step vs the same
//     step of an engine without it (its copies through pageable memory).
// Rounds interleave the engine step and its reference; medians are printed.
// A benchmark, not a test: without a device it prints "SKIPPED: no CUDA
// device (...)" and exits 0.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_c_util.h"
#include "bench_cuda_util.h"
#include "bench_machine.h"
#include "cuda_kernels.h"
#include "deepspeed_c.h"
#include "kernels.h"

namespace {

using namespace bench_cuda;
using Clock = std::chrono::steady_clock;

double since_ms(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

enum class Mode { Resident, Offload, OffloadPinned };

std::string config(Mode mode) {
    const char* offload = mode == Mode::Offload         ? ", \"offload_optimizer\": {\"device\": \"cpu\"}"
                          : mode == Mode::OffloadPinned ? ", \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true}"
                                                        : "";
    return std::string("{\"train_batch_size\": 1, \"gradient_clipping\": 1.0, \"bf16\": {\"enabled\": true},"
                       " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.0001, \"weight_decay\": 0.1}},"
                       " \"zero_optimization\": {\"stage\": 1") +
           offload + "}}";
}

DLTensor tensor(void* data, int64_t* shape, DLDevice dev) {
    DLTensor t{};
    t.data = data;
    t.device = dev;
    t.ndim = 1;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
    return t;
}

// An engine on cuda:0 with one parameter per size (host initial values).
struct Engine {
    ds_engine_t* e = nullptr;
    std::vector<int64_t> shapes;
    Engine(Mode mode, const std::vector<size_t>& sizes) {
        ds_engine_options_t o;
        ds_engine_options_init(&o, sizeof o);
        o.device = {kDLCUDA, 0};
        CHECK(ds_engine_create(config(mode).c_str(), &o, &e));
        shapes.assign(sizes.begin(), sizes.end());
        size_t most = 0;
        for (size_t n : sizes) most = std::max(most, n);
        std::vector<float> init(most);
        for (size_t i = 0; i < most; ++i) init[i] = 0.02f * std::sin(0.001f * static_cast<float>(i));
        for (size_t i = 0; i < sizes.size(); ++i) {
            DLTensor t = tensor(init.data(), &shapes[i], {kDLCPU, 0});
            CHECK(ds_engine_add_param(e, ("p" + std::to_string(i)).c_str(), &t, DS_PARAM_TRAINABLE));
        }
        CHECK(ds_engine_init(e));
    }
    ~Engine() { ds_engine_destroy(e); }
    // One step with gradients at `grads` (fp32, the tensors back to back); ms.
    double step(const float* grads) {
        cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        const auto t0 = Clock::now();
        size_t off = 0;
        for (size_t i = 0; i < shapes.size(); ++i) {
            DLTensor g = tensor(const_cast<float*>(grads) + off, &shapes[i], {kDLCUDA, 0});
            CHECK(ds_engine_accumulate_grad(e, ("p" + std::to_string(i)).c_str(), &g));
            off += static_cast<size_t>(shapes[i]);
        }
        CHECK(ds_backward(e, nullptr));
        CHECK(ds_step(e, nullptr));
        cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        return since_ms(t0);
    }
};

dsk_adam_hparams adamw() {
    dsk_adam_hparams h{};
    h.lr = 1e-4f;
    h.beta1 = 0.9f;
    h.beta2 = 0.999f;
    h.eps = 1e-8f;
    h.weight_decay = 0.1f;
    h.bias_correction1 = 0.1f;
    h.bias_correction2_rsqrt = 31.6f;
    h.grad_scale = 1.0f;
    h.adamw_mode = 1;
    return h;
}

void report(const char* name, std::vector<double>& engine, std::vector<double>& ref, const char* ref_name) {
    const double e = median(engine), r = median(ref);
    std::printf("%-16s step %8.2f ms | %-34s %8.2f ms | ratio %.3f\n", name, e, ref_name, r, r / e);
}

}  // namespace

int main(int argc, char** argv) {
    if (!have_device()) return 0;
    const size_t layers = static_cast<size_t>(arg_long(argc, argv, "--layers", 12));
    const size_t d = static_cast<size_t>(arg_long(argc, argv, "--embd", 768));
    const size_t vocab = static_cast<size_t>(arg_long(argc, argv, "--vocab", 50304));
    const size_t ctx = static_cast<size_t>(arg_long(argc, argv, "--ctx", 1024));
    const int rounds = static_cast<int>(arg_long(argc, argv, "--rounds", 5));
    const int warmup = static_cast<int>(arg_long(argc, argv, "--warmup", 2));
    bench_print_cpu();
    print_device();
    const std::vector<size_t> sizes = gpt_tensor_sizes(layers, d, vocab, ctx);
    size_t n = 0;
    for (size_t s : sizes) n += s;
    std::printf("model: %zu parameters in %zu tensors; bf16 weights, fp32 master and moments, AdamW\n", n,
                sizes.size());
    auto* grads = static_cast<float*>(dev_alloc_filled(n * 4, -1e-3f, 1e-3f, 7));
    const dsk_adam_hparams h = adamw();

    // ---- device-resident -----------------------------------------------------
    {
        Engine eng(Mode::Resident, sizes);
        const double bytes = 34.0 * static_cast<double>(n);
        void *a = nullptr, *b = nullptr;
        cuda_ok(cudaMalloc(&a, static_cast<size_t>(bytes / 2)), "cudaMalloc");
        cuda_ok(cudaMalloc(&b, static_cast<size_t>(bytes / 2)), "cudaMalloc");
        // The bare kernels' buffers: master, m, v (fp32), bf16 gradient and copy.
        float* p = static_cast<float*>(dev_alloc_filled(n * 4, -0.02f, 0.02f, 1));
        float* m = static_cast<float*>(dev_alloc_filled(n * 4, 0.0f, 1e-6f, 2));
        float* v = static_cast<float*>(dev_alloc_filled(n * 4, 0.0f, 1e-8f, 3));
        void *g16 = nullptr, *w16 = nullptr;
        cuda_ok(cudaMalloc(&g16, n * 2), "cudaMalloc");
        cuda_ok(cudaMalloc(&w16, n * 2), "cudaMalloc");
        auto bare = [&] {
            cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
            const auto t0 = Clock::now();
            double s = 0;
            int nf = 0;
            dsk_ok(dsk_cuda_axpy_sumsq(g16, DSK_BF16, grads, DSK_F32, 1.0f, 1, n, &s, &nf, nullptr), "axpy_sumsq");
            const dsk_opt_tensor t{p, g16, m, v, w16, n};
            dsk_ok(dsk_cuda_adam_multi(&t, 1, DSK_BF16, DSK_F32, DSK_BF16, &h, nullptr), "adam_multi");
            cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
            return since_ms(t0);
        };
        auto copy = [&] {
            cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
            const auto t0 = Clock::now();
            cuda_ok(cudaMemcpy(b, a, static_cast<size_t>(bytes / 2), cudaMemcpyDeviceToDevice), "cudaMemcpy D2D");
            return since_ms(t0);
        };
        std::vector<double> es, ks, cs;
        for (int r = 0; r < warmup + rounds; ++r) {
            const double e = eng.step(grads), k = bare(), c = copy();
            if (r >= warmup) {
                es.push_back(e);
                ks.push_back(k);
                cs.push_back(c);
            }
        }
        std::vector<double> es2 = es;
        report("resident", es, cs, "D2D copy of the step's bytes");
        report("resident", es2, ks, "bare axpy_sumsq + adam_multi");
        std::printf("resident: %.1f GB/s effective (34 B/parameter)\n", bytes / median(es2) / 1e6);
        cudaFree(a);
        cudaFree(b);
        cudaFree(p);
        cudaFree(m);
        cudaFree(v);
        cudaFree(g16);
        cudaFree(w16);
    }

    // ---- ZeRO-Offload ----------------------------------------------------------
    {
        Engine eng(Mode::Offload, sizes);
        std::vector<float> hg(n), hp(n, 0.01f), hm(n, 0.0f), hv(n, 0.0f);
        std::vector<uint16_t> hw(n);
        void* dw = nullptr;
        cuda_ok(cudaMalloc(&dw, n * 2), "cudaMalloc");
        auto parts = [&] {
            cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
            const auto t0 = Clock::now();
            cuda_ok(cudaMemcpy(hg.data(), grads, n * 4, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
            dsk_ok(dsk_cpu_adam_step(hp.data(), hg.data(), DSK_F32, hm.data(), hv.data(), DSK_F32, hw.data(), DSK_BF16,
                                     n, &h),
                   "dsk_cpu_adam_step");
            cuda_ok(cudaMemcpy(dw, hw.data(), n * 2, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
            return since_ms(t0);
        };
        std::vector<double> es, ps;
        for (int r = 0; r < warmup + rounds; ++r) {
            const double e = eng.step(grads), q = parts();
            if (r >= warmup) {
                es.push_back(e);
                ps.push_back(q);
            }
        }
        report("zero-offload", es, ps, "D2H grads + CPU AdamW + H2D bf16");
        cudaFree(dw);
    }
    {
        Engine plain(Mode::Offload, sizes), pinned(Mode::OffloadPinned, sizes);
        std::vector<double> es, ps;
        for (int r = 0; r < warmup + rounds; ++r) {
            const double e = pinned.step(grads), q = plain.step(grads);
            if (r >= warmup) {
                es.push_back(e);
                ps.push_back(q);
            }
        }
        report("zero-offload+pin", es, ps, "the same step, pin_memory false");
    }
    cudaFree(grads);
    return 0;
}
