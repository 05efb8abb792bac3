// The NCCL communicator (one rank per GPU, bootstrapped over MPI). Skipped
// when the build has no CUDA or there are fewer GPUs than ranks. Values are
// small integers so NCCL's 16-bit arithmetic is exact whatever its
// reduction order; avg over 3 ranks is checked to within one 16-bit ulp.
#include <gtest/gtest.h>

#include "comm/tensor_collectives.h"
#include "comm_test_util.h"
#include "core/tensor.h"
#include "mpi_gtest_main.h"

#ifdef DS_WITH_CUDA
#include <cuda_runtime.h>
#endif

using namespace ds_comm_test;
using ds::comm::Backend;
using ds::comm::Communicator;

namespace {

#ifdef DS_WITH_CUDA
// Device memory holding a copy of a host byte vector.
class DeviceBuf {
public:
    explicit DeviceBuf(size_t bytes) : bytes_(bytes) {
        EXPECT_EQ(cudaMalloc(&p_, bytes ? bytes : 1), cudaSuccess);
        cudaMemset(p_, 0, bytes ? bytes : 1);
    }
    explicit DeviceBuf(const std::vector<uint8_t>& host) : DeviceBuf(host.size()) {
        cudaMemcpy(p_, host.data(), host.size(), cudaMemcpyHostToDevice);
    }
    ~DeviceBuf() { cudaFree(p_); }
    DeviceBuf(const DeviceBuf&) = delete;
    DeviceBuf& operator=(const DeviceBuf&) = delete;
    void* get() { return p_; }
    std::vector<uint8_t> host() const {
        std::vector<uint8_t> h(bytes_);
        cudaMemcpy(h.data(), p_, bytes_, cudaMemcpyDeviceToHost);
        return h;
    }

private:
    void* p_ = nullptr;
    size_t bytes_;
};
#endif

// Small integers: every partial sum of 3 ranks is exact in bf16 (|sum| <= 180).
float small(int r, size_t i) { return static_cast<float>(static_cast<int>((i * 37 + static_cast<size_t>(r) * 11) % 121) - 60); }

std::vector<uint8_t> small_input(DType d, int r, size_t n, size_t offset = 0) {
    std::vector<uint8_t> b(n * ds::dtype_size(d));
    for (size_t i = 0; i < n; ++i) {
        const float v = small(r, offset + i);
        if (d == DType::F32) {
            std::memcpy(b.data() + 4 * i, &v, 4);
        } else {
            const uint16_t u = d == DType::F16 ? oracle_f16(v) : oracle_bf16(v);
            std::memcpy(b.data() + 2 * i, &u, 2);
        }
    }
    return b;
}

// A NCCL communicator over MPI_COMM_WORLD, or nullptr (and a skip reason).
std::shared_ptr<Communicator> nccl_world(std::string* why, bool debug = false) {
    const int S = ds_mpi_test::world_size(), R = ds_mpi_test::world_rank();
    if (!ds::comm::nccl_built()) {
        *why = "this build has no CUDA/NCCL";
        return nullptr;
    }
    const int gpus = ds::comm::cuda_device_count();
    int min_gpus = gpus;
    MPI_Allreduce(&gpus, &min_gpus, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (min_gpus < S) {
        *why = "NCCL needs one GPU per rank: " + std::to_string(min_gpus) + " GPUs for " + std::to_string(S) + " ranks";
        return nullptr;
    }
    ds::comm::Options o;
    o.backend = Backend::Nccl;
    o.timeout_ms = 120000;
    o.debug = debug;
    o.device = R % gpus;
#ifdef DS_WITH_CUDA
    cudaSetDevice(o.device);
#endif
    return ds::comm::make_from_mpi(MPI_Comm_c2f(MPI_COMM_WORLD), o);
}

#define NCCL_WORLD_OR_SKIP(var, ...)                      \
    std::string why_;                                     \
    auto var = nccl_world(&why_, ##__VA_ARGS__);          \
    if (!var) GTEST_SKIP() << why_

}  // namespace

#ifdef DS_WITH_CUDA

TEST(CommNccl, NoGpuIsADeviceError) {
    int gpus = ds::comm::cuda_device_count(), max_gpus = 0;
    MPI_Allreduce(&gpus, &max_gpus, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (max_gpus > 0) GTEST_SKIP() << "GPUs are present";
    ds::comm::Options o;
    o.backend = Backend::Nccl;
    try {
        ds::comm::make_from_mpi(MPI_Comm_c2f(MPI_COMM_WORLD), o);
        ADD_FAILURE() << "NCCL without a GPU did not throw";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_DEVICE) << e.what();
        EXPECT_NE(std::string(e.what()).find("needs a CUDA device"), std::string::npos) << e.what();
    }
}

TEST(CommNccl, IsOneRankPerGpu) {
    NCCL_WORLD_OR_SKIP(c);
    EXPECT_EQ(c->backend(), Backend::Nccl);
    EXPECT_TRUE(c->device_buffers());
    EXPECT_EQ(c->size(), ds_mpi_test::world_size());
    EXPECT_EQ(c->rank(), ds_mpi_test::world_rank());
    c->finalize();
}

TEST(CommNccl, AllreduceEveryFloatDtypeAndOp) {
    NCCL_WORLD_OR_SKIP(c);
    const int R = c->rank(), S = c->size();
    for (DType d : {DType::F32, DType::F16, DType::BF16})
        for (Op op : {Op::Sum, Op::Avg, Op::Max})
            for (size_t n : {size_t(1), size_t(13), size_t(65537), size_t(1000003)}) {
                DeviceBuf in(small_input(d, R, n)), out(n * ds::dtype_size(d));
                c->allreduce(in.get(), out.get(), n, d, op);
                const std::vector<uint8_t> got = out.host();
                size_t bad = 0;
                for (size_t i = 0; i < n; ++i) {
                    double sum = 0, mx = -1e9;
                    for (int r = 0; r < S; ++r) {
                        sum += small(r, i);
                        mx = std::max<double>(mx, small(r, i));
                    }
                    const double want = op == Op::Sum ? sum : op == Op::Max ? mx : sum / S;
                    const double tol = op == Op::Avg && d != DType::F32 ? std::fabs(want) / 64 + 1e-3 : 1e-6;
                    bad += std::fabs(load(d, got, i) - want) > tol;
                }
                EXPECT_EQ(bad, 0u) << ds::dtype_name(d) << " " << ds::comm::op_name(op) << " n=" << n;
            }
    c->finalize();
}

TEST(CommNccl, ReduceScatterAllgatherBroadcastAlltoall) {
    NCCL_WORLD_OR_SKIP(c);
    const int R = c->rank(), S = c->size();
    const size_t n = 10007;
    {
        DeviceBuf in(small_input(DType::F32, R, n * S)), out(n * 4);
        c->reduce_scatter(in.get(), out.get(), n, DType::F32, Op::Sum);
        const auto got = out.host();
        size_t bad = 0;
        for (size_t i = 0; i < n; ++i) {
            double want = 0;
            for (int r = 0; r < S; ++r) want += small(r, R * n + i);
            bad += load(DType::F32, got, i) != static_cast<float>(want);
        }
        EXPECT_EQ(bad, 0u) << "reduce_scatter";
    }
    {
        DeviceBuf in(small_input(DType::BF16, R, n)), out(n * S * 2);
        c->allgather(in.get(), out.get(), n, DType::BF16);
        std::vector<uint8_t> want;
        for (int r = 0; r < S; ++r) {
            auto b = small_input(DType::BF16, r, n);
            want.insert(want.end(), b.begin(), b.end());
        }
        EXPECT_EQ(out.host(), want) << "allgather";
    }
    for (int root = 0; root < S; ++root) {
        DeviceBuf buf(R == root ? small_input(DType::F16, root, n) : std::vector<uint8_t>(n * 2, 0));
        c->broadcast(buf.get(), n, DType::F16, root);
        EXPECT_EQ(buf.host(), small_input(DType::F16, root, n)) << "broadcast root " << root;
    }
    {
        std::vector<int32_t> send(n * S);
        for (int j = 0; j < S; ++j)
            for (size_t i = 0; i < n; ++i) send[j * n + i] = R * 1000000 + j * 10000 + static_cast<int32_t>(i % 10000);
        std::vector<uint8_t> bytes(reinterpret_cast<uint8_t*>(send.data()),
                                   reinterpret_cast<uint8_t*>(send.data()) + send.size() * 4);
        DeviceBuf in(bytes), out(bytes.size());
        c->alltoall(in.get(), out.get(), n, DType::I32);
        const auto got = out.host();
        size_t bad = 0;
        for (int r = 0; r < S; ++r)
            for (size_t i = 0; i < n; ++i) {
                int32_t v;
                std::memcpy(&v, got.data() + 4 * (r * n + i), 4);
                bad += v != r * 1000000 + R * 10000 + static_cast<int32_t>(i % 10000);
            }
        EXPECT_EQ(bad, 0u) << "alltoall";
    }
    c->barrier();
    c->finalize();
}

TEST(CommNccl, TensorCollectivesTakeTheCommunicatorsDeviceTensors) {
    NCCL_WORLD_OR_SKIP(c);
    const int R = c->rank(), S = c->size();
    const int64_t n = 4099;
    const ds::Device gpu = ds::Device::cuda(c->device_index());
    DeviceBuf x(small_input(DType::F32, R, static_cast<size_t>(n)));
    ds::comm::all_reduce_tensor(*c, ds::Tensor::borrow(x.get(), {n}, {}, DType::F32, gpu), Op::Sum);
    const auto got = x.host();
    size_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
        double want = 0;
        for (int r = 0; r < S; ++r) want += small(r, static_cast<size_t>(i));
        bad += load(DType::F32, got, static_cast<size_t>(i)) != static_cast<float>(want);
    }
    EXPECT_EQ(bad, 0u) << "all_reduce_tensor";
    DeviceBuf whole(static_cast<size_t>(n * S) * 4);
    ds::comm::all_gather_tensor(*c, ds::Tensor::borrow(whole.get(), {n * S}, {}, DType::F32, gpu),
                                ds::Tensor::borrow(x.get(), {n}, {}, DType::F32, gpu));
    const auto all = whole.host();
    for (int r = 0; r < S; ++r)
        EXPECT_EQ(0, std::memcmp(all.data() + static_cast<size_t>(r * n) * 4, got.data(), static_cast<size_t>(n) * 4))
            << "all_gather_tensor block " << r;
    std::vector<float> host(static_cast<size_t>(n));
    try {
        ds::comm::all_reduce_tensor(*c, ds::Tensor::borrow(host.data(), {n}, {}, DType::F32, ds::Device::cpu()),
                                    Op::Sum);
        ADD_FAILURE() << "a host tensor was accepted by NCCL";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT) << e.what();
    }
    c->finalize();
}

TEST(CommNccl, SendRecvRingAndNoTags) {
    NCCL_WORLD_OR_SKIP(c);
    const int R = c->rank(), S = c->size();
    const size_t n = 4099;
    DeviceBuf out(small_input(DType::F32, R, n)), in(n * 4);
    const int next = (R + 1) % S, prev = (R + S - 1) % S;
    // NCCL point to point must be issued so that no rank waits on a send
    // before posting its receive: even ranks send first, odd ranks receive first.
    if (R % 2 == 0) {
        auto s = c->send_async(out.get(), n, DType::F32, next, 0);
        auto r = c->recv_async(in.get(), n, DType::F32, prev, 0);
        s->wait();
        r->wait();
    } else {
        auto r = c->recv_async(in.get(), n, DType::F32, prev, 0);
        auto s = c->send_async(out.get(), n, DType::F32, next, 0);
        r->wait();
        s->wait();
    }
    EXPECT_EQ(in.host(), small_input(DType::F32, prev, n));
    try {
        c->send(out.get(), n, DType::F32, next, 3);
        ADD_FAILURE() << "a tag was accepted";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_UNSUPPORTED);
    }
    c->finalize();
}

TEST(CommNccl, DebugMismatchThroughTheBootstrap) {
    NCCL_WORLD_OR_SKIP(c, true);
    DeviceBuf a(4096);
    try {
        if (c->rank() == 0)
            c->allreduce(a.get(), a.get(), 100, DType::F32, Op::Sum);
        else
            c->allreduce(a.get(), a.get(), 100, DType::F16, Op::Sum);
        ADD_FAILURE() << "the mismatch went unnoticed";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_COMM);
        EXPECT_NE(std::string(e.what()).find("rank 1 called allreduce(fp16, 100, sum)"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(c->broken());
    MPI_Barrier(MPI_COMM_WORLD);
}

#else

TEST(CommNccl, NotBuilt) {
    EXPECT_FALSE(ds::comm::nccl_built());
    ds::comm::Options o;
    o.backend = Backend::Nccl;
    try {
        ds::comm::make_from_mpi(MPI_Comm_c2f(MPI_COMM_WORLD), o);
        ADD_FAILURE() << "NCCL without CUDA did not throw";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_UNSUPPORTED);
    }
}

#endif
