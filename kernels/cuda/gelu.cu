// dsk_cuda_gelu_fwd / _bwd: the CPU's per-element tanh-GELU (../elem/exp_gelu.h)
// over a grid-stride loop.
#include "../elem/exp_gelu.h"
#include "elementwise.cuh"

using namespace ds::kernels;
using namespace ds::kernels::cu;

namespace ds::kernels::cu {

struct GeluFwd {
    const float* x;
    float* y;
    template <class V>
    __device__ void step(size_t i) const {
        y[i] = gelu_fwd_elem(x[i]);
    }
};

struct GeluBwd {
    const float* x;
    const float* dy;
    float* dx;
    template <class V>
    __device__ void step(size_t i) const {
        dx[i] = gelu_bwd_elem(x[i], dy[i]);
    }
};

}  // namespace ds::kernels::cu

extern "C" int dsk_cuda_gelu_fwd(const float* x, float* y, size_t n, void* stream) noexcept {
    ArgCheck k("dsk_cuda_gelu_fwd");
    if (k.ptr("x", x, n).ptr("y", y, n).failed()) return k.status();
    if (n == 0) return DSK_OK;
    return launch_elementwise("dsk_cuda_gelu_fwd", GeluFwd{x, y}, n, static_cast<cudaStream_t>(stream));
}

extern "C" int dsk_cuda_gelu_bwd(const float* x, const float* dy, float* dx, size_t n, void* stream) noexcept {
    ArgCheck k("dsk_cuda_gelu_bwd");
    if (k.ptr("x", x, n).ptr("dy", dy, n).ptr("dx", dx, n).failed()) return k.status();
    if (n == 0) return DSK_OK;
    return launch_elementwise("dsk_cuda_gelu_bwd", GeluBwd{x, dy, dx}, n, static_cast<cudaStream_t>(stream));
}
