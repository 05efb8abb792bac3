// ds_build_info(): a static JSON description of this build.
#include "api/build_info.h"

#include <string>

#include "build_config.h"
#include "deepspeed_c.h"
#include "kernels.h"
#include "nn_gemm.h"

#ifdef DS_WITH_CUDA
#include "cuda_kernels.h"
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ds::api {

namespace {
const char* yes(bool b) { return b ? "true" : "false"; }

// A JSON string body: quotes and backslashes escaped, control bytes dropped.
std::string json_text(const char* t) {
    std::string out;
    for (; *t; ++t) {
        if (*t == '"' || *t == '\\') out += '\\';
        if (static_cast<unsigned char>(*t) >= 0x20) out += *t;
    }
    return out;
}

std::string make_build_info() {
#ifdef DS_WITH_CUDA
    const bool cuda = true;
#else
    const bool cuda = false;
#endif
#ifdef DS_WITH_MPI
    const bool mpi = true;
#else
    const bool mpi = false;
#endif
#ifdef _OPENMP
    const bool openmp = true;
    const int omp_threads = omp_get_max_threads();
#else
    const bool openmp = false;
    const int omp_threads = 1;
#endif
    std::string s = "{";
    s += "\"version\":\"" + std::string(ds_version_string()) + "\"";
    s += ",\"abi\":" + std::to_string(DS_ABI_VERSION);
    s += ",\"compiler\":\"" DS_BUILD_COMPILER "\"";
    s += ",\"build_type\":\"" DS_BUILD_TYPE "\"";
    s += ",\"sanitize\":\"" DS_BUILD_SANITIZE "\"";
    s += std::string(",\"cuda\":") + yes(cuda);
    s += ",\"cuda_version\":\"" DS_BUILD_CUDA_VERSION "\"";
    s += std::string(",\"nccl\":") + yes(cuda);
    // The CUDA kernels compiled in (kernels/cuda) and their architectures.
    std::string archs, kernels;
#ifdef DS_WITH_CUDA
    archs = dsk_cuda_architectures();
    for (const char* k = dsk_cuda_kernel_list(); *k;) {
        const char* e = k;
        while (*e && *e != ',') ++e;
        kernels += (kernels.empty() ? "\"" : ",\"") + std::string(k, e) + "\"";
        k = *e ? e + 1 : e;
    }
#endif
    s += ",\"cuda_architectures\":\"" + json_text(archs.c_str()) + "\"";
    s += ",\"cuda_kernels\":[" + kernels + "]";
    s += std::string(",\"mpi\":") + yes(mpi);
    s += std::string(",\"openmp\":") + yes(openmp);
    s += ",\"omp_max_threads\":" + std::to_string(omp_threads);
    s += std::string(",\"simd_detected\":\"") + dsk_isa_name(dsk_cpu_isa_detected()) + "\"";
    s += std::string(",\"simd\":\"") + dsk_isa_name(dsk_cpu_isa()) + "\"";
#ifdef DS_WITH_ONEDNN
    s += ",\"onednn\":true";
#else
    s += ",\"onednn\":false";
#endif
#ifdef DS_WITH_OPENBLAS
    s += ",\"openblas\":true";
#else
    s += ",\"openblas\":false";
#endif
    // What runs the layers' matmuls (chosen at first use, kernels/nn_gemm.h).
    s += ",\"gemm_engine\":\"" + json_text(dsk_cpu_gemm_engine()) + "\"";
    s += "}";
    return s;
}
}  // namespace

const char* build_info_json() {
    static const std::string info = make_build_info();
    return info.c_str();
}

}  // namespace ds::api
