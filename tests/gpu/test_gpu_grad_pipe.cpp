// ZeRO-Offload's gradient copies (engine/grad_pipe.h) on a real GPU: the
// copy stream's copies arrive in the sinks in order and bit for bit as the
// ring wraps; a fence keeps a source the legacy stream writes again from
// being read too late; and submit() does not wait for the legacy stream's
// queued work (the wall times are printed, not asserted: the overlap this
// buys is measured by bench/, not tested).
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/allocator.h"
#include "core/tensor.h"
#include "engine/grad_pipe.h"
#include "gpu_test_util.h"

namespace {

using ds::Device;
using ds::DType;
using ds::GradPipe;
using ds::MemCategory;
using ds::Tensor;

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void test_order_and_wrap(ds::Allocator& alloc) {
    GradPipe::set_min_staging_for_testing(0);
    GradPipe pipe(Device::cuda(0), /*pin=*/true, alloc);
    const std::vector<int64_t> sizes = {1000, 70000, 12, 300000, 5, 65536, 1 << 20, 3, 250000, 999999};
    std::vector<Tensor> grads;
    std::vector<std::vector<float>> host;
    for (size_t k = 0; k < sizes.size(); ++k) {
        host.push_back(gput::randv(size_t(sizes[k]), -1, 1, uint32_t(k + 1)));
        grads.push_back(Tensor::empty({sizes[k]}, DType::F32, Device::cuda(0), alloc, MemCategory::Grads));
        gput::cuda_ok(cudaMemcpy(grads.back().data_ptr(), host.back().data(), size_t(sizes[k]) * 4,
                                 cudaMemcpyHostToDevice),
                      "upload");
    }
    size_t next = 0;
    for (size_t k = 0; k < sizes.size(); ++k)
        pipe.submit(grads[k].data_ptr(), size_t(sizes[k]) * 4,
                    [&, k](const void* bytes) {
                        GPU_CHECK(k == next, "sink %zu ran as number %zu", k, next);
                        GPU_CHECK(std::memcmp(bytes, host[k].data(), host[k].size() * 4) == 0,
                                  "gradient %zu arrived with other bytes", k);
                        ++next;
                    },
                    "test");
    pipe.drain();
    GPU_CHECK(next == sizes.size(), "%zu of %zu sinks ran", next, sizes.size());
    GradPipe::set_min_staging_for_testing(size_t{4} << 20);
}

// The source is written again on the legacy stream right after the fence:
// the copy must have read the old bytes. Many rounds, so a missing order
// would show up on a GPU whose copy engine lags.
void test_fence(ds::Allocator& alloc) {
    GradPipe pipe(Device::cuda(0), true, alloc);
    const int64_t n = 1 << 22;  // 16 MiB: long enough for the copy to lag the memset
    Tensor g = Tensor::empty({n}, DType::F32, Device::cuda(0), alloc, MemCategory::Grads);
    int wrong = 0;
    for (int round = 0; round < 8; ++round) {
        const int byte = 0x10 + round;
        gput::cuda_ok(cudaMemsetAsync(g.data_ptr(), byte, size_t(n) * 4, cudaStreamLegacy), "memset");
        const uint64_t t = pipe.submit(g.data_ptr(), size_t(n) * 4,
                                       [&, byte](const void* bytes) {
                                           const auto* b = static_cast<const unsigned char*>(bytes);
                                           for (int64_t i = 0; i < n * 4; i += 4099)
                                               if (b[i] != byte) ++wrong;
                                       },
                                       "test");
        pipe.fence(t);
        gput::cuda_ok(cudaMemsetAsync(g.data_ptr(), 0xEE, size_t(n) * 4, cudaStreamLegacy), "memset again");
    }
    pipe.drain();
    GPU_CHECK(wrong == 0, "%d sampled bytes were read after the source was written again", wrong);
}

// submit() queues behind the legacy stream's work without waiting for it.
void test_submit_does_not_wait(ds::Allocator& alloc) {
    GradPipe pipe(Device::cuda(0), true, alloc);
    const int64_t n = int64_t{1} << 28;  // 1 GiB of work on the legacy stream
    Tensor big = Tensor::empty({n}, DType::F32, Device::cuda(0), alloc, MemCategory::Buffers);
    Tensor g = Tensor::empty({1 << 20}, DType::F32, Device::cuda(0), alloc, MemCategory::Grads);
    gput::cuda_ok(cudaDeviceSynchronize(), "sync");
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i)
        gput::cuda_ok(cudaMemsetAsync(big.data_ptr(), i, size_t(n) * 4, cudaStreamLegacy), "memset");
    const double queued = ms_since(t0);
    pipe.submit(g.data_ptr(), size_t(1 << 20) * 4, [](const void*) {}, "test");
    const double submitted = ms_since(t0);
    pipe.drain();
    const double drained = ms_since(t0);
    std::printf("legacy stream work queued in %.2f ms; submit returned at %.2f ms; drained at %.2f ms\n", queued,
                submitted, drained);
}

}  // namespace

int main() {
    if (const int skip = gput::require_device()) return skip;
    ds::Allocator alloc;
    test_order_and_wrap(alloc);
    test_fence(alloc);
    test_submit_does_not_wait(alloc);
    return gput::finish("test_gpu_grad_pipe");
}
