// dsk_cuda_lamb_step: LAMB (FusedLamb semantics, DEEPSPEED_SEMANTICS.md §2.3) on
// one tensor, three launches on the stream: pass 1 (the shared body
// LambPass1 updates m, v and sums |p|^2, |u|^2 per thread in double, then
// per block), stage 2 (one block sums the partials in a fixed order and
// forms trust and the pass-2 coefficient on the device with the functions
// the CPU kernel uses, ../ref/lamb_trust.h), pass 2 (LambPass2 with that
// coefficient). No host round trip unless the caller asks for the ratio.
#include "../elem/lamb.h"
#include "../elem/simd_scalar.h"
#include "../elem/step_consts.h"
#include "../ref/lamb_trust.h"
#include "reduce2.cuh"

using namespace ds::kernels;
using namespace ds::kernels::cu;

namespace ds::kernels::cu {

template <int GD>
__global__ void __launch_bounds__(kRedThreads) lamb_pass1(const LambPass1<GD> body, double* parts) {
    auto pa = ScalarOps::dacc_zero(), ua = ScalarOps::dacc_zero();
    const size_t n = body.a.n;
    const size_t stride = static_cast<size_t>(gridDim.x) * kRedThreads;
    for (size_t i = static_cast<size_t>(blockIdx.x) * kRedThreads + threadIdx.x; i < n; i += stride)
        body.template step<ScalarOps>(i, pa, ua);
    const RedSums<2> r = red_block_tree<2>(RedSums<2>{{ScalarOps::dacc_sum(pa), ScalarOps::dacc_sum(ua)}});
    if (threadIdx.x == 0) {
        parts[2 * blockIdx.x] = r.v[0];
        parts[2 * blockIdx.x + 1] = r.v[1];
    }
}

// Stage 2's last step: out[0] = trust, out[1] = the pass-2 coefficient.
struct LambTrust {
    dsk_lamb_hparams h;
    float* out;
    __device__ void operator()(const RedSums<2>& r) const {
        const float trust = dsk_lamb_trust(r.v[0], r.v[1], &h);
        out[0] = trust;
        out[1] = dsk_lamb_coef(trust, &h);
    }
};

template <int WD>
__global__ void lamb_pass2(LambPass2<WD> body, const float* trust_coef) {
    body.coef = trust_coef[1];
    const size_t n = body.a.n;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        body.template step<ScalarOps>(i);
}

}  // namespace ds::kernels::cu

extern "C" int dsk_cuda_lamb_step(float* p, const void* g, int g_dtype, float* m, float* v, void* w16,
                                  int w_dtype, size_t n, const dsk_lamb_hparams* h, float* trust,
                                  void* stream) noexcept {
    const char* kernel = "dsk_cuda_lamb_step";
    ArgCheck k(kernel);
    k.hparams(h).dtype("g_dtype", g_dtype).w16(w16, w_dtype);
    if (k.ptr("p", p, n).ptr("g", g, n).ptr("m", m, n).ptr("v", v, n).failed()) return k.status();
    if (n == 0) {  // both norms 0: trust 1, nothing to update (as the CPU kernel)
        if (trust) *trust = dsk_lamb_trust(0.0, 0.0, h);
        return DSK_OK;
    }
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    const LambConsts c = lamb_consts(*h);
    const LambArgs a{{p, g, g_dtype, w16, w_dtype, n}, m, v};
    const int blocks = red_blocks(n);
    StreamScratch scratch{st};
    if (const int rc = scratch.alloc(kernel, sizeof(double) * 2 * blocks + 2 * sizeof(float))) return rc;
    double* parts = static_cast<double*>(scratch.p);
    float* trust_coef = reinterpret_cast<float*>(parts + 2 * blocks);
    with_dtype(g_dtype, [&](auto gd) {
        lamb_pass1<decltype(gd)::value><<<blocks, kRedThreads, 0, st>>>(LambPass1<decltype(gd)::value>{a, c}, parts);
    });
    red_stage2<2><<<1, kRedThreads, 0, st>>>(parts, blocks, LambTrust{*h, trust_coef});
    const size_t want = (n + 255) / 256;
    const unsigned grid = static_cast<unsigned>(want < 65535 ? want : 65535);
    with_out16(w16, w_dtype, [&](auto wd) {
        lamb_pass2<decltype(wd)::value><<<grid, 256, 0, st>>>(LambPass2<decltype(wd)::value>{a, c, 0.0f, false},
                                                                trust_coef);
    });
    if (const int rc = cuda_launch_status(kernel)) return rc;
    if (trust) {
        if (const int rc = cuda_status(kernel, "cudaMemcpyAsync (trust ratio)",
                                       cudaMemcpyAsync(trust, trust_coef, sizeof(float), cudaMemcpyDeviceToHost, st)))
            return rc;
        return cuda_status(kernel, "cudaStreamSynchronize", cudaStreamSynchronize(st));
    }
    return DSK_OK;
}
