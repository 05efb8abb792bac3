// dsk_cuda_bias_grad: db[j] += sum over rows of dy[r, j] (the Linear's bias
// gradient, as dsk_cpu_bias_grad). Column sums over fixed groups of 256 rows,
// then the groups in order: the result does not depend on scheduling.
#include <cstdint>

#include "reduce2.cuh"

using namespace ds::kernels;
using namespace ds::kernels::cu;

namespace ds::kernels::cu {

constexpr int64_t kBiasRows = 256;

__global__ void bias_grad_groups(const float* dy, int64_t rows, int64_t out, float* part) {
    const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (j >= out) return;
    const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kBiasRows;
    const int64_t r1 = r0 + kBiasRows < rows ? r0 + kBiasRows : rows;
    float s = 0.0f;
    for (int64_t r = r0; r < r1; ++r) s += dy[r * out + j];
    part[blockIdx.y * out + j] = s;
}

__global__ void bias_grad_sum(const float* part, int64_t groups, int64_t out, float* db) {
    const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (j >= out) return;
    float s = 0.0f;
    for (int64_t g = 0; g < groups; ++g) s += part[g * out + j];
    db[j] += s;
}

}  // namespace ds::kernels::cu

extern "C" int dsk_cuda_bias_grad(const float* dy, float* db, int64_t rows, int64_t out, void* stream) noexcept {
    const char* kernel = "dsk_cuda_bias_grad";
    if (rows < 0 || out < 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: rows = %lld, out = %lld (negative)", kernel,
                              static_cast<long long>(rows), static_cast<long long>(out));
    if (out != 0 && rows > INT64_MAX / out)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: rows * out overflows (rows = %lld, out = %lld)", kernel,
                              static_cast<long long>(rows), static_cast<long long>(out));
    ArgCheck k(kernel);
    if (k.ptr("dy", dy, static_cast<size_t>(rows * out)).ptr("db", db, static_cast<size_t>(out)).failed())
        return k.status();
    if (rows == 0 || out == 0) return DSK_OK;
    const int64_t groups = (rows + kBiasRows - 1) / kBiasRows;
    if (groups > 65535)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: rows = %lld exceeds %lld", kernel,
                              static_cast<long long>(rows), static_cast<long long>(65535 * kBiasRows));
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    StreamScratch scratch{st};
    if (const int rc = scratch.alloc(kernel, static_cast<size_t>(groups * out) * sizeof(float))) return rc;
    float* part = static_cast<float*>(scratch.p);
    const unsigned cols = static_cast<unsigned>((out + 255) / 256);
    bias_grad_groups<<<dim3(cols, static_cast<unsigned>(groups)), 256, 0, st>>>(dy, rows, out, part);
    bias_grad_sum<<<cols, 256, 0, st>>>(part, groups, out, db);
    return cuda_launch_status(kernel);
}
