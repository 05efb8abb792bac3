// The OpenBLAS GEMM engine, loaded with dlopen at first use so the library
// can set OPENBLAS_CORETYPE before OpenBLAS runs its CPU detection: Debian's
// 0.3.21 (DYNAMIC_ARCH) takes some AVX-512 CPUs for "Prescott" and then runs
// SSE3 kernels at about a fifth of the machine's peak. After loading, the
// core OpenBLAS reports is checked against the CPU's ISA and an old/generic
// one is refused (the engine name says so), e.g. when another component of
// the process had already loaded OpenBLAS with the wrong detection.
#include <dlfcn.h>
#include <omp.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gemm_engines.h"
#include "nn_gemm.h"

#ifndef DS_OPENBLAS_SONAME
#define DS_OPENBLAS_SONAME ""
#endif

namespace ds::kernels::gemm {

namespace {

// cblas_sgemm with its CBLAS enums as ints (LP64 OpenBLAS: 32-bit ints).
using SgemmFn = void (*)(int order, int ta, int tb, int m, int n, int k, float alpha, const float* a, int lda,
                         const float* b, int ldb, float beta, float* c, int ldc);
using CharFn = char* (*)();
using SetThreadsFn = void (*)(int);
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

SgemmFn g_sgemm = nullptr;

// Cores whose SGEMM kernels use the CPU's widest FMA units.
bool core_fits(const char* core, int isa) {
    static const char* const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    static const char* const avx2[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"};
    if (isa >= DSK_ISA_AVX512) {
        for (const char* c : avx512)
            if (strcasecmp(core, c) == 0) return true;
        return false;
    }
    if (isa >= DSK_ISA_AVX2) {
        for (const char* c : avx2)
            if (strcasecmp(core, c) == 0) return true;
        return false;
    }
    return true;  // no AVX2: whatever OpenBLAS detected is the best it has
}

}  // namespace

bool openblas_init(std::string* name) {
    const char* soname = DS_OPENBLAS_SONAME;
    if (*soname == '\0') {
        *name = "not built (DS_WITH_OPENBLAS=OFF or not found)";
        return false;
    }
    const int isa = dsk_cpu_isa_detected();
    void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    const bool preloaded = h != nullptr;
    std::string forced;
    if (!preloaded) {
        // OpenBLAS reads OPENBLAS_CORETYPE in its load-time constructor: set it
        // for the load (unless the user chose one) and restore the environment.
        const char* user = std::getenv("OPENBLAS_CORETYPE");
        const char* pick = isa >= DSK_ISA_AVX512 ? "SkylakeX" : isa >= DSK_ISA_AVX2 ? "Haswell" : nullptr;
        const bool set = user == nullptr && pick != nullptr;
        if (set) {
            setenv("OPENBLAS_CORETYPE", pick, 0);
            forced = pick;
        }
        h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
        if (set) unsetenv("OPENBLAS_CORETYPE");
    }
    if (h == nullptr) {
        const char* e = dlerror();
        *name = std::string("cannot load ") + soname + ": " + (e ? e : "unknown error");
        return false;
    }
    auto sgemm = reinterpret_cast<SgemmFn>(dlsym(h, "cblas_sgemm"));
    auto corename = reinterpret_cast<CharFn>(dlsym(h, "openblas_get_corename"));
    auto config = reinterpret_cast<CharFn>(dlsym(h, "openblas_get_config"));
    auto set_threads = reinterpret_cast<SetThreadsFn>(dlsym(h, "openblas_set_num_threads"));
    if (sgemm == nullptr || corename == nullptr) {
        *name = std::string(soname) + " lacks cblas_sgemm or openblas_get_corename";
        return false;
    }
    const std::string core = corename() ? corename() : "?";
    std::string version = "openblas";
    if (config != nullptr && config() != nullptr) {  // "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
        const char* cfg = config();
        const char* sp = std::strchr(cfg, ' ');
        if (sp != nullptr) version += " " + std::string(sp + 1, std::strcspn(sp + 1, " "));
    }
    if (!core_fits(core.c_str(), isa)) {
        *name = "refused: " + version + " runs core " + core + " on an " + dsk_isa_name(isa) + " CPU" +
                (preloaded ? " (already loaded by the process)" : "");
        return false;
    }
    if (set_threads != nullptr) set_threads(omp_get_max_threads());
    g_sgemm = sgemm;
    *name = version + " (" + core + (forced.empty() ? "" : ", OPENBLAS_CORETYPE set by deepspeed_c") + ")";
    return true;
}

int openblas_gemm(const Problem& p) {
    const int64_t lim = INT_MAX;
    if (p.m > lim || p.n > lim || p.k > lim || p.lda > lim || p.ldb > lim || p.ldc > lim) return -1;
    for (int64_t i = 0; i < p.batch; ++i) {
        const Problem q = batch_item(p, i);
        g_sgemm(kRowMajor, q.trans_a ? kTrans : kNoTrans, q.trans_b ? kTrans : kNoTrans, static_cast<int>(q.m),
                static_cast<int>(q.n), static_cast<int>(q.k), q.alpha, q.a, static_cast<int>(q.lda), q.b,
                static_cast<int>(q.ldb), q.beta, q.c, static_cast<int>(q.ldc));
    }
    return DSK_OK;
}

}  // namespace ds::kernels::gemm
