// dsk_cuda_add / _add_inplace (the residual adds) and dsk_cuda_bias_add.
#include "elementwise.cuh"

using namespace ds::kernels;
using namespace ds::kernels::cu;

namespace ds::kernels::cu {

struct Add {
    const float* a;
    const float* b;
    float* y;
    template <class V>
    __device__ void step(size_t i) const {
        y[i] = a[i] + b[i];
    }
};

struct AddInplace {
    float* y;
    const float* a;
    template <class V>
    __device__ void step(size_t i) const {
        y[i] += a[i];
    }
};

struct BiasAdd {
    float* y;
    const float* bias;
    size_t dim;
    template <class V>
    __device__ void step(size_t i) const {
        y[i] += bias[i % dim];
    }
};

}  // namespace ds::kernels::cu

extern "C" int dsk_cuda_add(const float* a, const float* b, float* y, size_t n, void* stream) noexcept {
    ArgCheck k("dsk_cuda_add");
    if (k.ptr("a", a, n).ptr("b", b, n).ptr("y", y, n).failed()) return k.status();
    if (n == 0) return DSK_OK;
    return launch_elementwise("dsk_cuda_add", Add{a, b, y}, n, static_cast<cudaStream_t>(stream));
}

extern "C" int dsk_cuda_add_inplace(float* y, const float* a, size_t n, void* stream) noexcept {
    ArgCheck k("dsk_cuda_add_inplace");
    if (k.ptr("y", y, n).ptr("a", a, n).failed()) return k.status();
    if (n == 0) return DSK_OK;
    return launch_elementwise("dsk_cuda_add_inplace", AddInplace{y, a}, n, static_cast<cudaStream_t>(stream));
}

extern "C" int dsk_cuda_bias_add(float* y, const float* bias, size_t rows, size_t dim, void* stream) noexcept {
    const char* kernel = "dsk_cuda_bias_add";
    ArgCheck k(kernel);
    const size_t n = rows * dim;
    if (k.ptr("y", y, n).ptr("bias", bias, n ? dim : 0).failed()) return k.status();
    if (rows != 0 && n / rows != dim)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: rows * dim overflows (rows = %zu, dim = %zu)", kernel,
                              rows, dim);
    if (n == 0) return DSK_OK;
    return launch_elementwise(kernel, BiasAdd{y, bias, dim}, n, static_cast<cudaStream_t>(stream));
}
