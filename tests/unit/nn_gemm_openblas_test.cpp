// The OpenBLAS trap (kernels/cpu/gemm_openblas.cpp): Debian's OpenBLAS
// 0.3.21 can run an old core ("Prescott") on an AVX-512 CPU at a fifth of the
// peak. Loading it, the library forces a fitting core unless the user chose
// one, restores the environment, and refuses a core that does not fit the
// CPU. OpenBLAS reads the variable once per process, so each case runs in a
// fresh process (a "threadsafe" death test re-executes this binary).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cpu/gemm_engines.h"
#include "kernels.h"

namespace {

// Exit code 0 when the engine name contains `want` (the child's verdict).
void load_and_check(const char* user_coretype, const char* want, bool usable) {
    if (user_coretype) setenv("OPENBLAS_CORETYPE", user_coretype, 1);
    std::string name;
    const bool ok = ds::kernels::gemm::openblas_init(&name);
    const bool env_kept = user_coretype ? std::getenv("OPENBLAS_CORETYPE") != nullptr
                                        : std::getenv("OPENBLAS_CORETYPE") == nullptr;
    if (ok != usable || name.find(want) == std::string::npos || !env_kept) {
        std::fprintf(stderr, "engine name '%s', usable %d, environment kept %d\n", name.c_str(), ok, env_kept);
        std::exit(1);
    }
    std::exit(0);
}

bool can_test() {
#ifndef DS_WITH_OPENBLAS
    return false;
#else
    return dsk_cpu_isa_detected() >= DSK_ISA_AVX2 && std::getenv("OPENBLAS_CORETYPE") == nullptr;
#endif
}

}  // namespace

TEST(NnGemmOpenblas, ForcesAFittingCoreAndRestoresTheEnvironment) {
    if (!can_test()) GTEST_SKIP() << "needs OpenBLAS, an AVX2/AVX-512 CPU and OPENBLAS_CORETYPE unset";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const char* core = dsk_cpu_isa_detected() >= DSK_ISA_AVX512 ? "(SkylakeX, OPENBLAS_CORETYPE set by deepspeed_c)"
                                                                 : "(Haswell, OPENBLAS_CORETYPE set by deepspeed_c)";
    EXPECT_EXIT(load_and_check(nullptr, core, true), testing::ExitedWithCode(0), "");
}

TEST(NnGemmOpenblas, RefusesAnOldCoreOnANewCpu) {
    if (!can_test()) GTEST_SKIP() << "needs OpenBLAS, an AVX2/AVX-512 CPU and OPENBLAS_CORETYPE unset";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    // The user's choice is respected (not overridden), then refused.
    EXPECT_EXIT(load_and_check("Prescott", "refused: openblas 0.3", false), testing::ExitedWithCode(0), "");
    EXPECT_EXIT(load_and_check("Prescott", "runs core Prescott on an avx", false), testing::ExitedWithCode(0), "");
}
