// Run-time instruction-set detection and selection for the CPU kernels.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "isa_table.h"
#include "kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace {

#if defined(__x86_64__) || defined(__i386__)
// F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does
// not know "f16c".
bool has_f16c() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    return (c & (1u << 29)) != 0;
}
#endif

int detect() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    // AVX-512 path needs F, BW, VL, DQ (bf16/fp16 packing uses BW/VL).
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("fma") && has_f16c())
        return DSK_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        has_f16c())
        return DSK_ISA_AVX2;
#endif
    return DSK_ISA_SCALAR;
}

int from_env(int detected) {
    const char* s = std::getenv("DS_CPU_ISA");
    if (!s) return detected;
    int want = detected;
    if (std::strcmp(s, "scalar") == 0) want = DSK_ISA_SCALAR;
    else if (std::strcmp(s, "avx2") == 0) want = DSK_ISA_AVX2;
    else if (std::strcmp(s, "avx512") == 0) want = DSK_ISA_AVX512;
    return want < detected ? want : detected;
}

std::atomic<int> g_isa{-1};

}  // namespace

extern "C" {

int dsk_cpu_isa_detected(void) {
    static const int d = detect();
    return d;
}

int dsk_cpu_isa(void) {
    int v = g_isa.load(std::memory_order_relaxed);
    if (v < 0) {
        v = from_env(dsk_cpu_isa_detected());
        g_isa.store(v, std::memory_order_relaxed);
    }
    return v;
}

int dsk_cpu_set_isa(int isa) {
    if (isa < DSK_ISA_SCALAR || isa > dsk_cpu_isa_detected()) return -1;
    g_isa.store(isa, std::memory_order_relaxed);
    return 0;
}

const char* dsk_isa_name(int isa) {
    switch (isa) {
        case DSK_ISA_AVX512: return "avx512";
        case DSK_ISA_AVX2: return "avx2";
        default: return "scalar";
    }
}

}  // extern "C"

const ds::kernels::IsaKernels& ds::kernels::isa_kernels() {
    switch (dsk_cpu_isa()) {
        case DSK_ISA_AVX512: return kAvx512Kernels;
        case DSK_ISA_AVX2: return kAvx2Kernels;
        default: return kScalarKernels;
    }
}
