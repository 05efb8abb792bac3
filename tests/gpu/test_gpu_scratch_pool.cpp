// The CUDA kernels' scratch pool (kernels/cuda/scratch_pool.h) on the
// device: it exists where the device has memory pools, what it reserved
// stays reserved across a synchronization (the default pool's threshold 0
// would hand it back) and is reused by the next allocation of that size
// without growing, on the legacy stream and on a stream of its own, and
// dsk_cuda_release_scratch hands it back; the default pool's release
// threshold is left as it was. Also a reduction and a
// bf16 product through it, after a synchronization, still correct. Exit 77
// without a device.
#include <cstdint>
#include <vector>

#include "cuda/scratch_pool.h"
#include "gpu_test_util.h"

using gput::DevBuf;

namespace {

uint64_t reserved(cudaMemPool_t pool) {
    uint64_t v = 0;
    gput::cuda_ok(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &v), "reserved memory");
    return v;
}

uint64_t default_threshold() {
    cudaMemPool_t pool = nullptr;
    gput::cuda_ok(cudaDeviceGetDefaultMemPool(&pool, 0), "default pool");
    uint64_t v = 0;
    gput::cuda_ok(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &v), "threshold");
    return v;
}

void keeps_across_syncs(cudaStream_t stream, const char* which) {
    namespace cu = ds::kernels::cu;
    const cudaMemPool_t pool = cu::scratch_pool(0);
    const size_t bytes = size_t{64} << 20;
    void* p = nullptr;
    GPU_OK(cu::scratch_alloc("test", "64 MiB", &p, bytes, stream));
    gput::cuda_ok(cudaMemsetAsync(p, 0, bytes, stream), "memset");
    cu::scratch_free(p, stream);
    gput::cuda_ok(cudaDeviceSynchronize(), "sync");
    const uint64_t kept = reserved(pool);
    GPU_CHECK(kept >= bytes, "%s: %llu bytes reserved after the sync, want >= %zu", which,
              static_cast<unsigned long long>(kept), bytes);
    GPU_OK(cu::scratch_alloc("test", "64 MiB again", &p, bytes, stream));
    GPU_CHECK(reserved(pool) == kept, "%s: the pool grew to %llu from %llu for a size it held", which,
              static_cast<unsigned long long>(reserved(pool)), static_cast<unsigned long long>(kept));
    cu::scratch_free(p, stream);
    gput::cuda_ok(cudaDeviceSynchronize(), "sync");
    // What the engines' allocator does before retrying an allocation that found no memory.
    GPU_OK(dsk_cuda_release_scratch(0));
    GPU_CHECK(reserved(pool) == 0, "%s: %llu bytes still reserved after dsk_cuda_release_scratch", which,
              static_cast<unsigned long long>(reserved(pool)));
}

}  // namespace

int main() {
    if (int rc = gput::require_device()) return rc;
    const uint64_t threshold = default_threshold();
    int pools = 0;
    gput::cuda_ok(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, 0), "attribute");
    const cudaMemPool_t pool = ds::kernels::cu::scratch_pool(0);
    GPU_CHECK((pool != nullptr) == (pools != 0), "pool %p with memory pools supported = %d", static_cast<void*>(pool),
              pools);
    if (pool != nullptr) {
        keeps_across_syncs(nullptr, "legacy stream");
        cudaStream_t s = nullptr;
        gput::cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
        keeps_across_syncs(s, "own stream");
        gput::cuda_ok(cudaStreamDestroy(s), "stream destroy");
    }
    GPU_CHECK(default_threshold() == threshold, "the default pool's release threshold changed");

    // A reduction (partials in the pool's scratch) and a bf16 product (its
    // operand copies there), each after a synchronization: exact answers.
    const std::vector<float> ones(4096, 1.0f);
    DevBuf x(ones.data(), ones.size() * 4);
    for (int round = 0; round < 2; ++round) {
        double s = 0.0;
        GPU_OK(dsk_cuda_sumsq(x.as<float>(), DSK_F32, ones.size(), &s, nullptr, nullptr));
        GPU_CHECK(s == 4096.0, "sumsq %g, want 4096", s);
        DevBuf c(nullptr, 64 * 4);
        GPU_OK(dsk_cuda_gemm_bf16(0, 1, 8, 8, 64, 1.0f, x.as<float>(), 64, x.as<float>(), 64, 0.0f, c.as<float>(), 8,
                                  nullptr));
        const std::vector<float> got = gput::down(c, 64);
        for (float v : got) GPU_CHECK(v == 64.0f, "bf16 product %g, want 64", static_cast<double>(v));
        gput::cuda_ok(cudaDeviceSynchronize(), "sync");
    }
    return gput::finish("test_gpu_scratch_pool");
}
