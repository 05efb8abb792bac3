// Which memory the tensor collectives (ds_comm_all_reduce and friends) take:
// a device communicator's (NCCL's) tensors must be on its own GPU, a host
// communicator's in host memory. Driven by a fake device communicator that
// records the buffers it is handed, so the routing is checked without a GPU
// (tests/mpi/test_comm_nccl.cpp moves real device tensors where GPUs exist).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "catch_error.h"
#include "comm/communicator.h"
#include "comm/factory.h"
#include "comm/tensor_collectives.h"
#include "core/tensor.h"

using ds::Device;
using ds::DType;
using ds::Tensor;
using ds::comm::Communicator;
using ds::comm::Fingerprint;
using ds::comm::Op;
using ds::comm::Request;

namespace {

// A world of two whose buffers "live" on cuda:1. Nothing is dereferenced:
// each operation records its pointers and count and completes at once.
class FakeDeviceComm final : public Communicator {
public:
    FakeDeviceComm() : Communicator(ds::comm::Options{}) {}
    int rank() const override { return 0; }
    int size() const override { return 2; }
    ds::comm::Backend backend() const override { return ds::comm::Backend::Nccl; }
    bool device_buffers() const override { return true; }
    int32_t device_index() const override { return 1; }

    struct Call {
        std::string op;
        const void* send;
        const void* recv;
        size_t count;
    };
    std::vector<Call> calls;

protected:
    std::unique_ptr<Request> record(const char* op, const void* send, const void* recv, size_t count) {
        calls.push_back({op, send, recv, count});
        return completed();
    }
    std::unique_ptr<Request> start_allreduce(const void* s, void* r, size_t n, DType, Op, const Fingerprint&) override {
        return record("allreduce", s, r, n);
    }
    std::unique_ptr<Request> start_reduce_scatter(const void* s, void* r, size_t n, DType, Op,
                                                  const Fingerprint&) override {
        return record("reduce_scatter", s, r, n);
    }
    std::unique_ptr<Request> start_allgather(const void* s, void* r, size_t n, DType, const Fingerprint&) override {
        return record("allgather", s, r, n);
    }
    std::unique_ptr<Request> start_broadcast(void* b, size_t n, DType, int, const Fingerprint&) override {
        return record("broadcast", b, b, n);
    }
    std::unique_ptr<Request> start_alltoall(const void* s, void* r, size_t n, DType, const Fingerprint&) override {
        return record("alltoall", s, r, n);
    }
    std::unique_ptr<Request> start_barrier(const Fingerprint&) override { return record("barrier", nullptr, nullptr, 0); }
    std::unique_ptr<Request> start_send(const void* b, size_t n, DType, int, int, const Fingerprint&) override {
        return record("send", b, nullptr, n);
    }
    std::unique_ptr<Request> start_recv(void* b, size_t n, DType, int, int, const Fingerprint&) override {
        return record("recv", nullptr, b, n);
    }
};

// Pointers that stand for device memory; never read.
void* fake_ptr(uintptr_t v) { return reinterpret_cast<void*>(v); }

Tensor on(Device d, uintptr_t addr, int64_t n) { return Tensor::borrow(fake_ptr(addr), {n}, {}, DType::F32, d); }

bool has(const ds::Error& e, const char* s) { return std::string(e.what()).find(s) != std::string::npos; }

}  // namespace

TEST(CommDeviceTensors, ADeviceCommunicatorGetsTensorsOnItsGpu) {
    FakeDeviceComm c;
    const Device gpu = Device::cuda(1);
    ds::comm::all_reduce_tensor(c, on(gpu, 0x1000, 6), Op::Sum);
    ds::comm::all_gather_tensor(c, on(gpu, 0x2000, 12), on(gpu, 0x3000, 6));
    ds::comm::reduce_scatter_tensor(c, on(gpu, 0x4000, 3), on(gpu, 0x5000, 6), Op::Avg);
    ds::comm::all_to_all_tensor(c, on(gpu, 0x6000, 8), on(gpu, 0x7000, 8));
    ds::comm::broadcast_tensor(c, on(gpu, 0x8000, 5), 1);
    ASSERT_EQ(c.calls.size(), 5u);
    const FakeDeviceComm::Call want[] = {{"allreduce", fake_ptr(0x1000), fake_ptr(0x1000), 6},
                                         {"allgather", fake_ptr(0x3000), fake_ptr(0x2000), 6},
                                         {"reduce_scatter", fake_ptr(0x5000), fake_ptr(0x4000), 3},
                                         {"alltoall", fake_ptr(0x7000), fake_ptr(0x6000), 4},
                                         {"broadcast", fake_ptr(0x8000), fake_ptr(0x8000), 5}};
    for (size_t i = 0; i < 5; ++i) {
        EXPECT_EQ(c.calls[i].op, want[i].op);
        EXPECT_EQ(c.calls[i].send, want[i].send) << want[i].op;
        EXPECT_EQ(c.calls[i].recv, want[i].recv) << want[i].op;
        EXPECT_EQ(c.calls[i].count, want[i].count) << want[i].op;
    }
}

TEST(CommDeviceTensors, ADeviceCommunicatorRefusesHostAndOtherGpus) {
    FakeDeviceComm c;
    std::vector<float> host(6);
    const Tensor h = Tensor::borrow(host.data(), {6}, {}, DType::F32, Device::cpu());
    ds::Error e = catch_error([&] { ds::comm::all_reduce_tensor(c, h, Op::Sum); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(has(e, "all_reduce: tensor: is in cpu memory")) << e.what();
    EXPECT_TRUE(has(e, "nccl communicator's buffers are on cuda:1")) << e.what();

    e = catch_error([&] { ds::comm::all_gather_tensor(c, on(Device::cuda(1), 0x10, 12), on(Device::cuda(0), 0x20, 6)); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(has(e, "all_gather_into_tensor: input: is in cuda:0 memory")) << e.what();

    const Tensor strided = Tensor::borrow(fake_ptr(0x40), {3}, {2}, DType::F32, Device::cuda(1));
    e = catch_error([&] { ds::comm::broadcast_tensor(c, strided, 0); });
    EXPECT_TRUE(has(e, "broadcast: tensor: must be contiguous")) << e.what();
    EXPECT_TRUE(c.calls.empty()) << "a refused tensor reached the backend";
}

TEST(CommDeviceTensors, AHostCommunicatorRefusesDeviceTensors) {
    auto c = ds::comm::make_local(ds::comm::Options{});
    EXPECT_FALSE(c->device_buffers());
    EXPECT_EQ(c->device_index(), -1);
    ds::Error e = catch_error([&] { ds::comm::all_reduce_tensor(*c, on(Device::cuda(0), 0x10, 4), Op::Sum); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(has(e, "all_reduce: tensor: is on cuda:0, but the local communicator moves host memory (kDLCPU)"))
        << e.what();
    EXPECT_TRUE(has(e, "need an NCCL communicator")) << e.what();
    // still usable
    std::vector<float> x{1, 2, 3, 4};
    ds::comm::all_reduce_tensor(*c, Tensor::borrow(x.data(), {4}, {}, DType::F32, Device::cpu()), Op::Max);
    EXPECT_EQ(x[3], 4.0f);
}
