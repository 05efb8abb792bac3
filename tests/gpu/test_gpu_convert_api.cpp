// ds_convert on GPU memory ({kDLCUDA, 0} tensors): the same bits as the
// host conversion for every fp32/fp16/bf16 pair, the caller's current device
// left alone, and the refusals of mixed devices and misaligned device data.
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "deepspeed_c.h"
#include "gpu_test_util.h"

namespace {

DLTensor tensor(void* data, int64_t* n, DLDataTypeCode code, uint8_t bits, DLDeviceType where) {
    DLTensor t{};
    t.data = data;
    t.device = {where, 0};
    t.ndim = 1;
    t.dtype = {static_cast<uint8_t>(code), bits, 1};
    t.shape = n;
    return t;
}

struct Kind {
    DLDataTypeCode code;
    uint8_t bits;
    const char* name;
};

}  // namespace

int main() {
    if (int rc = gput::require_device()) return rc;
    const Kind kinds[] = {{kDLFloat, 32, "fp32"}, {kDLFloat, 16, "fp16"}, {kDLBfloat, 16, "bf16"}};
    int64_t n = 100003;
    // Every 16-bit pattern (NaN, Inf, subnormals) plus random fp32 values.
    std::vector<float> f32(static_cast<size_t>(n));
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-70000.0f, 70000.0f);
    for (auto& v : f32) v = u(rng);
    std::vector<uint16_t> bits16(static_cast<size_t>(n));
    for (size_t i = 0; i < bits16.size(); ++i) bits16[i] = static_cast<uint16_t>(i);
    for (const Kind& from : kinds)
        for (const Kind& to : kinds) {
            const size_t sb = from.bits / 8, db = to.bits / 8;
            const void* src_host = from.bits == 32 ? static_cast<const void*>(f32.data()) : bits16.data();
            std::vector<uint8_t> want(static_cast<size_t>(n) * db), got(want.size());
            DLTensor hs = tensor(const_cast<void*>(src_host), &n, from.code, from.bits, kDLCPU);
            DLTensor hd = tensor(want.data(), &n, to.code, to.bits, kDLCPU);
            GPU_CHECK(ds_convert(&hs, &hd) == DS_OK, "host %s->%s: %s", from.name, to.name, ds_last_error());
            gput::DevBuf ds(src_host, static_cast<size_t>(n) * sb), dd(got.data(), got.size());
            DLTensor gs = tensor(ds.d, &n, from.code, from.bits, kDLCUDA);
            DLTensor gd = tensor(dd.d, &n, to.code, to.bits, kDLCUDA);
            GPU_CHECK(ds_convert(&gs, &gd) == DS_OK, "device %s->%s: %s", from.name, to.name, ds_last_error());
            dd.download(got.data());
            GPU_CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0, "%s->%s differs from the host",
                      from.name, to.name);
        }

    // The caller's current device is left as it was (device 0 is all a
    // one-GPU machine has; with two, select 1 and convert on 0).
    int count = 0;
    cudaGetDeviceCount(&count);
    if (count > 1) {
        // The buffers on device 0 (their tensors say cuda:0), then device 1 current.
        gput::DevBuf a(f32.data(), f32.size() * 4), b(f32.data(), f32.size() * 2);
        gput::cuda_ok(cudaSetDevice(1), "cudaSetDevice(1)");
        DLTensor s = tensor(a.d, &n, kDLFloat, 32, kDLCUDA), d = tensor(b.d, &n, kDLBfloat, 16, kDLCUDA);
        GPU_CHECK(ds_convert(&s, &d) == DS_OK, "%s", ds_last_error());
        int now = -1;
        cudaGetDevice(&now);
        GPU_CHECK(now == 1, "ds_convert left device %d current, not the caller's 1", now);
        cudaSetDevice(0);
    }

    // Refusals: a device source with a host destination; misaligned device data.
    gput::DevBuf a(f32.data(), f32.size() * 4);
    std::vector<uint16_t> host(static_cast<size_t>(n));
    DLTensor s = tensor(a.d, &n, kDLFloat, 32, kDLCUDA), d = tensor(host.data(), &n, kDLBfloat, 16, kDLCPU);
    GPU_CHECK(ds_convert(&s, &d) == DS_ERR_INVALID_ARGUMENT, "mixed devices were accepted");
    GPU_CHECK(std::strstr(ds_last_error(), "dst.device = cpu: expected cuda:0") != nullptr, "%s", ds_last_error());
    int64_t m = 8;
    gput::DevBuf b(f32.data(), 64);
    s = tensor(a.d, &m, kDLFloat, 32, kDLCUDA);
    s.byte_offset = 2;
    d = tensor(b.d, &m, kDLBfloat, 16, kDLCUDA);
    GPU_CHECK(ds_convert(&s, &d) == DS_ERR_INVALID_ARGUMENT, "misaligned device data was accepted");
    GPU_CHECK(std::strstr(ds_last_error(), "not aligned") != nullptr, "%s", ds_last_error());
    if (gput::failures()) return 1;
    std::printf("ds_convert on cuda:0: every fp32/fp16/bf16 pair equals the host conversion\n");
    return 0;
}
