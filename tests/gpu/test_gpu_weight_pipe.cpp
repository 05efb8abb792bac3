// ZeRO-Offload's gathered weights on their way to the GPU
// (engine/weight_pipe.h) on a real GPU: every batch lands bit for bit as the
// ring wraps, with the host sources overwritten as soon as upload() returns;
// a kernel queued on the legacy stream after upload() reads the new bytes;
// upload() does not wait for the legacy stream's queued work; and a batch
// uploaded ahead lands while later legacy-stream work runs (the wall times
// are printed, not asserted).
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/allocator.h"
#include "core/tensor.h"
#include "engine/weight_pipe.h"
#include "gpu_test_util.h"

namespace {

using ds::Device;
using ds::DType;
using ds::MemCategory;
using ds::Tensor;
using ds::WeightPipe;

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void test_batches_land_as_the_ring_wraps(ds::Allocator& alloc) {
    WeightPipe::set_min_staging_for_testing(0);
    WeightPipe pipe(Device::cuda(0), /*pin=*/true, alloc);
    const std::vector<int64_t> sizes = {1000, 70000, 12, 300000, 5, 65536, 1 << 20, 3, 250000, 999999};
    std::vector<Tensor> dev;
    std::vector<std::vector<float>> want;
    for (size_t k = 0; k + 1 < sizes.size(); k += 2) {  // batches of two, as a layer's weights
        std::vector<float> a = gput::randv(size_t(sizes[k]), -1, 1, uint32_t(k + 1));
        std::vector<float> b = gput::randv(size_t(sizes[k + 1]), -1, 1, uint32_t(k + 2));
        dev.push_back(Tensor::empty({sizes[k]}, DType::F32, Device::cuda(0), alloc, MemCategory::Params));
        dev.push_back(Tensor::empty({sizes[k + 1]}, DType::F32, Device::cuda(0), alloc, MemCategory::Params));
        pipe.upload({{dev[k].data_ptr(), a.data(), a.size() * 4}, {dev[k + 1].data_ptr(), b.data(), b.size() * 4}},
                    "test");
        want.push_back(a);
        want.push_back(b);
        std::fill(a.begin(), a.end(), 7.0f);  // the host gathers are freed at once
        std::fill(b.begin(), b.end(), 7.0f);
    }
    gput::cuda_ok(cudaDeviceSynchronize(), "sync");
    for (size_t k = 0; k < dev.size(); ++k) {
        std::vector<float> got(want[k].size());
        gput::cuda_ok(cudaMemcpy(got.data(), dev[k].data_ptr(), got.size() * 4, cudaMemcpyDeviceToHost), "read");
        GPU_CHECK(std::memcmp(got.data(), want[k].data(), got.size() * 4) == 0, "weights %zu landed with other bytes",
                  k);
    }
    WeightPipe::set_min_staging_for_testing(size_t{4} << 20);
}

// A device-to-device copy queued on the legacy stream right after upload()
// reads the uploaded bytes, round after round (a missing wait would show up
// on a GPU whose copy engine lags).
void test_legacy_stream_sees_the_batch(ds::Allocator& alloc) {
    WeightPipe pipe(Device::cuda(0), true, alloc);
    const int64_t n = 1 << 22;  // 16 MiB
    Tensor d = Tensor::empty({n}, DType::F32, Device::cuda(0), alloc, MemCategory::Params);
    Tensor out = Tensor::empty({n}, DType::F32, Device::cuda(0), alloc, MemCategory::Buffers);
    std::vector<unsigned char> src(size_t(n) * 4), back(size_t(n) * 4);
    int wrong = 0;
    for (int round = 0; round < 8; ++round) {
        std::memset(src.data(), 0x10 + round, src.size());
        pipe.upload({{d.data_ptr(), src.data(), src.size()}}, "test");
        gput::cuda_ok(cudaMemcpyAsync(out.data_ptr(), d.data_ptr(), src.size(), cudaMemcpyDeviceToDevice,
                                      cudaStreamLegacy),
                      "read on the legacy stream");
        gput::cuda_ok(cudaMemcpy(back.data(), out.data_ptr(), back.size(), cudaMemcpyDeviceToHost), "back");
        for (size_t i = 0; i < back.size(); i += 4099)
            if (back[i] != 0x10 + round) ++wrong;
    }
    GPU_CHECK(wrong == 0, "%d sampled bytes were read before their upload landed", wrong);
}

// upload() queues behind the legacy stream's work without waiting for it.
void test_upload_does_not_wait(ds::Allocator& alloc) {
    WeightPipe pipe(Device::cuda(0), true, alloc);
    const int64_t n = int64_t{1} << 28;  // 1 GiB of work on the legacy stream
    Tensor big = Tensor::empty({n}, DType::F32, Device::cuda(0), alloc, MemCategory::Buffers);
    Tensor w = Tensor::empty({1 << 20}, DType::F32, Device::cuda(0), alloc, MemCategory::Params);
    std::vector<float> host(1 << 20, 1.0f);
    gput::cuda_ok(cudaDeviceSynchronize(), "sync");
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i)
        gput::cuda_ok(cudaMemsetAsync(big.data_ptr(), i, size_t(n) * 4, cudaStreamLegacy), "memset");
    const double queued = ms_since(t0);
    pipe.upload({{w.data_ptr(), host.data(), host.size() * 4}}, "test");
    const double uploaded = ms_since(t0);
    gput::cuda_ok(cudaDeviceSynchronize(), "sync");
    std::printf("legacy stream work queued in %.2f ms; upload returned at %.2f ms; all done at %.2f ms\n", queued,
                uploaded, ms_since(t0));
}

// upload_ahead(): the batch's copies do not wait for legacy-stream work
// queued after it (the current layer's kernels; here 20 GiB of memsets), and a
// read queued on the legacy stream after wait_batch() sees the bytes. The
// times are printed (the overlap), the bytes checked.
void test_ahead_batch_overlaps_later_work(ds::Allocator& alloc) {
    WeightPipe pipe(Device::cuda(0), true, alloc);
    const int64_t n = int64_t{1} << 28;  // 1 GiB
    Tensor big = Tensor::empty({n}, DType::F32, Device::cuda(0), alloc, MemCategory::Buffers);
    Tensor w = Tensor::empty({1 << 22}, DType::F32, Device::cuda(0), alloc, MemCategory::Params);
    Tensor out = Tensor::empty({1 << 22}, DType::F32, Device::cuda(0), alloc, MemCategory::Buffers);
    std::vector<unsigned char> src(size_t(1) << 24, 0x5A), back(size_t(1) << 24);
    gput::cuda_ok(cudaDeviceSynchronize(), "sync");
    const auto t0 = std::chrono::steady_clock::now();
    void* ev = pipe.upload_ahead({{w.data_ptr(), src.data(), src.size()}}, "test");
    for (int i = 0; i < 20; ++i)
        gput::cuda_ok(cudaMemsetAsync(big.data_ptr(), i, size_t(n) * 4, cudaStreamLegacy), "memset");
    gput::cuda_ok(cudaEventSynchronize(static_cast<cudaEvent_t>(ev)), "the batch's event");
    const double copied = ms_since(t0);
    pipe.wait_batch(ev, "test");
    gput::cuda_ok(cudaMemcpyAsync(out.data_ptr(), w.data_ptr(), src.size(), cudaMemcpyDeviceToDevice,
                                  cudaStreamLegacy),
                  "read on the legacy stream");
    gput::cuda_ok(cudaMemcpy(back.data(), out.data_ptr(), back.size(), cudaMemcpyDeviceToHost), "back");
    std::printf("ahead batch (16 MiB) landed at %.2f ms; the legacy stream's 20 GiB of memsets done at %.2f ms\n",
                copied, ms_since(t0));
    int wrong = 0;
    for (size_t i = 0; i < back.size(); i += 4099)
        if (back[i] != 0x5A) ++wrong;
    GPU_CHECK(wrong == 0, "%d sampled bytes of the ahead batch were wrong", wrong);
}

}  // namespace

int main() {
    if (const int skip = gput::require_device()) return skip;
    ds::Allocator alloc;
    test_batches_land_as_the_ring_wraps(alloc);
    test_legacy_stream_sees_the_batch(alloc);
    test_upload_does_not_wait(alloc);
    test_ahead_batch_overlaps_later_work(alloc);
    return gput::finish("test_gpu_weight_pipe");
}
