// bench_adam [n_params=100000000] [reps=11]
// Times dsk_cpu_adam_step (AdamW, fp32 p/g/m/v) against an Adam-shaped memory
// ceiling measured in the same run: the simplest OpenMP+SIMD loop that reads
// p, g, m, v and writes p, m, v in place (28 bytes/param, like Adam).
// Also times the variants with a bf16 / fp16 working copy (w16), bf16
// gradients, and the AVX2 and scalar paths. Run with e.g.
//   OMP_NUM_THREADS=2 OMP_PROC_BIND=close ./bench_adam
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels.h"

namespace {

template <class T>
T* alloc(size_t n) {
    const size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
    T* p = static_cast<T*>(std::aligned_alloc(64, bytes));
    if (!p) {
        std::fprintf(stderr, "out of memory allocating %zu bytes\n", bytes);
        std::exit(1);
    }
    return p;
}

// Deterministic pseudo-random floats in [lo, hi), filled in parallel with the
// same static split the kernels use (first touch places pages per thread).
void fill(float* x, size_t n, float lo, float hi, uint32_t seed) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) {
        uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        x[i] = lo + (hi - lo) * static_cast<float>(h >> 8) * (1.0f / 16777216.0f);
    }
}

double now() { return omp_get_wtime(); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// The ceiling: Adam's memory traffic with almost no arithmetic.
__attribute__((target("avx512f"))) void ceiling_avx512(float* p, const float* g, float* m, float* v, size_t n,
                                                       float c) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; ++i) {
        p[i] += g[i] * c;
        m[i] += g[i];
        v[i] += g[i];
    }
}

void ceiling_default(float* p, const float* g, float* m, float* v, size_t n, float c) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; ++i) {
        p[i] += g[i] * c;
        m[i] += g[i];
        v[i] += g[i];
    }
}

dsk_adam_hparams adamw_hparams(int step) {
    dsk_adam_hparams h;
    h.lr = 1e-3f;
    h.beta1 = 0.9f;
    h.beta2 = 0.999f;
    h.eps = 1e-8f;
    h.weight_decay = 0.01f;
    h.bias_correction1 = 1.0f - std::pow(h.beta1, static_cast<float>(step));
    h.bias_correction2_rsqrt = 1.0f / std::sqrt(1.0f - std::pow(h.beta2, static_cast<float>(step)));
    h.grad_scale = 1.0f;
    h.adamw_mode = 1;
    return h;
}

// One step on a 1M slice vs the scalar reference: bitwise comparison.
bool check_slice(const float* p0, const float* g, const float* m0, const float* v0, size_t n) {
    std::vector<float> pa(p0, p0 + n), ma(m0, m0 + n), va(v0, v0 + n);
    std::vector<float> pb = pa, mb = ma, vb = va;
    const dsk_adam_hparams h = adamw_hparams(3);
    dsk_cpu_adam_step(pa.data(), g, DSK_F32, ma.data(), va.data(), DSK_F32, nullptr, DSK_F16, n, &h);
    dsk_ref_adam_step(pb.data(), g, DSK_F32, mb.data(), vb.data(), DSK_F32, nullptr, DSK_F16, n, &h);
    size_t diff = 0;
    double max_rel = 0.0;
    for (size_t i = 0; i < n; ++i) {
        if (std::memcmp(&pa[i], &pb[i], 4) || std::memcmp(&ma[i], &mb[i], 4) ||
            std::memcmp(&va[i], &vb[i], 4))
            ++diff;
        max_rel = std::max(max_rel, std::fabs(static_cast<double>(pa[i]) - pb[i]) / std::fabs(pb[i]));
    }
    std::printf(
        "check: %s, one AdamW step on a %zu-element slice vs dsk_ref_adam_step: %zu elements differ "
        "(max rel |dp| %.3g) -> %s\n",
        dsk_isa_name(dsk_cpu_isa()), n, diff, max_rel, diff == 0 ? "OK (bitwise equal)" : "MISMATCH");
    return diff == 0;
}

struct Timing {
    std::string name;
    double bytes_per_param;
    std::vector<double> t;
};

}  // namespace

int main(int argc, char** argv) {
    const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100000000ull;
    const int reps = argc > 2 ? std::atoi(argv[2]) : 11;
    const std::string tag = n % 1000000 == 0 ? std::to_string(n / 1000000) + "M" : std::to_string(n);
    std::printf("bench_adam: n=%zu reps=%d threads=%d isa=%s (detected %s)\n", n, reps, omp_get_max_threads(),
                dsk_isa_name(dsk_cpu_isa()), dsk_isa_name(dsk_cpu_isa_detected()));

    float *p = alloc<float>(n), *g = alloc<float>(n), *m = alloc<float>(n), *v = alloc<float>(n);
    float *cp = alloc<float>(n), *cg = alloc<float>(n), *cm = alloc<float>(n), *cv = alloc<float>(n);
    uint16_t *w16 = alloc<uint16_t>(n), *g16 = alloc<uint16_t>(n);
    fill(p, n, -1.0f, 1.0f, 1);
    fill(g, n, -1e-2f, 1e-2f, 2);
    fill(m, n, -1e-3f, 1e-3f, 3);
    fill(v, n, 0.0f, 1e-4f, 4);
    fill(cp, n, -1.0f, 1.0f, 5);
    fill(cg, n, -1e-2f, 1e-2f, 6);
    fill(cm, n, -1.0f, 1.0f, 7);
    fill(cv, n, 0.0f, 1.0f, 8);
    std::memset(w16, 0, n * 2);
    dsk_f32_to_bf16(g, g16, n);

    const bool ok = check_slice(p, g, m, v, std::min<size_t>(n, 1000000));

    const int best = dsk_cpu_isa();
    const bool have512 = dsk_cpu_isa_detected() >= DSK_ISA_AVX512;
    int step = 1;
    auto adam = [&](int isa, const void* grad, int gdt, void* w, int wdt) {
        dsk_cpu_set_isa(isa);
        const dsk_adam_hparams h = adamw_hparams(step++);
        dsk_cpu_adam_step(p, grad, gdt, m, v, DSK_F32, w, wdt, n, &h);
        dsk_cpu_set_isa(best);
    };
    std::vector<Timing> rows = {
        {"ceiling", 28, {}},
        {"adamw_fp32_" + tag, 28, {}},
        {"adamw_fp32_w16bf16_" + tag, 30, {}},
        {"adamw_fp32_w16fp16_" + tag, 30, {}},
        {"adamw_bf16grad_" + tag, 26, {}},
        {"adamw_fp32_avx2_" + tag, 28, {}},
    };
    std::vector<std::function<void()>> runs = {
        [&] { (have512 ? ceiling_avx512 : ceiling_default)(cp, cg, cm, cv, n, 1e-3f); },
        [&] { adam(best, g, DSK_F32, nullptr, DSK_F16); },
        [&] { adam(best, g, DSK_F32, w16, DSK_BF16); },
        [&] { adam(best, g, DSK_F32, w16, DSK_F16); },
        [&] { adam(best, g16, DSK_BF16, nullptr, DSK_F16); },
        [&] { adam(std::min(best, DSK_ISA_AVX2), g, DSK_F32, nullptr, DSK_F16); },
    };
    // Interleave the variants every repetition, rotating which goes first, so
    // drift and neighbours' load hit all alike; repetition 0 is a warm-up.
    for (int r = 0; r <= reps; ++r)
        for (size_t j = 0; j < runs.size(); ++j) {
            const size_t k = (j + static_cast<size_t>(r)) % runs.size();
            const double t0 = now();
            runs[k]();
            const double dt = now() - t0;
            if (r > 0) rows[k].t.push_back(dt);
        }
    Timing scalar{"adamw_fp32_scalar_" + tag, 28, {}};
    for (int r = 0; r < 3; ++r) {
        const double t0 = now();
        adam(DSK_ISA_SCALAR, g, DSK_F32, nullptr, DSK_F16);
        scalar.t.push_back(now() - t0);
    }

    const double ceil_ms = median(rows[0].t) * 1e3;
    std::printf("ceiling_%s: %.1f ms/step (%.2f GB/s at 28 B/param; p+=g*c, m+=g, v+=g in place)\n",
                tag.c_str(), ceil_ms, 28.0 * n / (ceil_ms * 1e-3) / 1e9);
    rows.push_back(scalar);
    for (size_t k = 1; k < rows.size(); ++k) {
        const double ms = median(rows[k].t) * 1e3;
        const double mn = *std::min_element(rows[k].t.begin(), rows[k].t.end()) * 1e3;
        std::printf("%s: %.1f ms/step (%.2f GB/s at %.0f B/param, min %.1f ms) ceiling %.1f ms ratio %.2f\n",
                    rows[k].name.c_str(), ms, rows[k].bytes_per_param * n / (ms * 1e-3) / 1e9,
                    rows[k].bytes_per_param, mn, ceil_ms, ms / ceil_ms);
    }
    double sink = 0;
    for (size_t i = 0; i < n; i += 4099) sink += p[i] + cp[i];
    std::printf("(checksum %.6g)\n", sink);
    for (void* q :
         {static_cast<void*>(p), static_cast<void*>(g), static_cast<void*>(m), static_cast<void*>(v),
          static_cast<void*>(cp), static_cast<void*>(cg), static_cast<void*>(cm), static_cast<void*>(cv),
          static_cast<void*>(w16), static_cast<void*>(g16)})
        std::free(q);
    return ok ? 0 : 1;
}
