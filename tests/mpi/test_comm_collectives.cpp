// The MPI communicator's collectives against values computed here: every
// collective x dtype (fp32, fp16, bf16) x op (sum, avg, max), odd and prime
// counts, in place, integer dtypes, async overlap, point to point, barrier.
// Data are integer-valued so fp32 sums are exact; 16-bit results must be the
// fp32 result rounded once to nearest-even (the oracles in comm_test_util.h).
//
// Every rank runs the same sequence of collectives whatever fails (EXPECT,
// never ASSERT, inside loops), so a failure cannot desynchronise the ranks.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "comm_test_util.h"
#include "mpi_gtest_main.h"

using namespace ds_comm_test;
using ds::comm::Backend;
using ds::comm::Communicator;

namespace {

const DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};
const Op kOps[] = {Op::Sum, Op::Avg, Op::Max};

// Number of elements of `got` (dtype d, first n) whose bits differ from
// expect_bits(d, want(i)); reports the first one.
template <class Want>
size_t count_bad(DType d, const std::vector<uint8_t>& got, size_t n, Want want, const std::string& what) {
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        const float w = want(i);
        if (load_bits(d, got, i) != expect_bits(d, w)) {
            if (bad == 0)
                ADD_FAILURE() << what << ": element " << i << " is " << load(d, got, i) << " (bits 0x" << std::hex
                              << load_bits(d, got, i) << "), want " << std::dec << w << " rounded (bits 0x"
                              << std::hex << expect_bits(d, w) << ")";
            ++bad;
        }
    }
    return bad;
}

std::string trace(const char* coll, DType d, Op op, size_t n, bool in_place) {
    return std::string(coll) + " " + ds::dtype_name(d) + " " + ds::comm::op_name(op) + " n=" + std::to_string(n) +
           (in_place ? " in-place" : "");
}

}  // namespace

TEST(CommMpi, RankSizeBackend) {
    auto c = world_comm();
    EXPECT_EQ(c->rank(), ds_mpi_test::world_rank());
    EXPECT_EQ(c->size(), ds_mpi_test::world_size());
    EXPECT_EQ(c->backend(), Backend::Mpi);
    EXPECT_FALSE(c->device_buffers());
    c->finalize();
}

TEST(CommMpi, AllreduceEveryFloatDtypeAndOp) {
    auto c = world_comm();
    const int R = c->rank(), S = c->size();
    for (DType d : kFloatTypes)
        for (Op op : kOps)
            for (size_t n : counts())
                for (bool in_place : {false, true}) {
                    const std::string what = trace("allreduce", d, op, n, in_place);
                    std::vector<uint8_t> send = make_input(d, R, n);
                    std::vector<uint8_t> recv(send.size(), 0xA5);
                    if (in_place)
                        c->allreduce(send.data(), send.data(), n, d, op);
                    else
                        c->allreduce(send.data(), recv.data(), n, d, op);
                    const auto& out = in_place ? send : recv;
                    EXPECT_EQ(count_bad(d, out, n, [&](size_t i) { return reduced(d, op, S, i); }, what), 0u)
                        << what;
                    if (!in_place)  // the input is left alone
                        EXPECT_EQ(send, make_input(d, R, n)) << what;
                }
    c->finalize();
}

TEST(CommMpi, AllreduceIntegerDtypes) {
    auto c = world_comm();
    const int R = c->rank(), S = c->size();
    const size_t n = 1009;
    std::vector<int32_t> a(n), ra(n);
    std::vector<int64_t> b(n), rb(n);
    std::vector<uint8_t> u(n), ru(n);
    std::vector<int8_t> s8(n), rs8(n);
    for (size_t i = 0; i < n; ++i) {
        a[i] = static_cast<int32_t>(i * 1000003 % 2000001) - 1000000 + R;
        b[i] = (int64_t(1) << 40) * (R + 1) + static_cast<int64_t>(i);
        u[i] = static_cast<uint8_t>((i * 31 + R * 77) % 256);
        s8[i] = static_cast<int8_t>(static_cast<int>(i % 11) - 5 + R);
    }
    c->allreduce(a.data(), ra.data(), n, DType::I32, Op::Sum);
    c->allreduce(b.data(), rb.data(), n, DType::I64, Op::Sum);
    c->allreduce(u.data(), ru.data(), n, DType::U8, Op::Max);
    c->allreduce(s8.data(), rs8.data(), n, DType::I8, Op::Sum);
    int64_t sum_r = 0;
    for (int r = 0; r < S; ++r) sum_r += r;
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        const int64_t base = static_cast<int64_t>(i * 1000003 % 2000001) - 1000000;
        bad += ra[i] != static_cast<int32_t>(base * S + sum_r);
        int64_t wb = 0;
        int wu = 0, ws = 0;
        for (int r = 0; r < S; ++r) {
            wb += (int64_t(1) << 40) * (r + 1) + static_cast<int64_t>(i);
            wu = std::max(wu, static_cast<int>((i * 31 + r * 77) % 256));
            ws += static_cast<int>(i % 11) - 5 + r;
        }
        bad += rb[i] != wb;
        bad += ru[i] != wu;
        bad += rs8[i] != ws;
    }
    EXPECT_EQ(bad, 0u);
    c->finalize();
}

TEST(CommMpi, ReduceScatterEveryFloatDtypeAndOp) {
    auto c = world_comm();
    const int R = c->rank(), S = c->size();
    for (DType d : kFloatTypes)
        for (Op op : kOps)
            for (size_t n : counts())
                for (bool in_place : {false, true}) {
                    const std::string what = trace("reduce_scatter", d, op, n, in_place);
                    const size_t es = ds::dtype_size(d);
                    std::vector<uint8_t> send = make_input(d, R, n * S);
                    std::vector<uint8_t> recv(n * es, 0xA5);
                    uint8_t* out = in_place ? send.data() + R * n * es : recv.data();
                    c->reduce_scatter(send.data(), out, n, d, op);
                    std::vector<uint8_t> mine(out, out + n * es);
                    EXPECT_EQ(count_bad(d, mine, n, [&](size_t i) { return reduced(d, op, S, R * n + i); }, what), 0u)
                        << what;
                }
    c->finalize();
}

TEST(CommMpi, AllgatherEveryDtype) {
    auto c = world_comm();
    const int R = c->rank(), S = c->size();
    for (DType d : kFloatTypes)
        for (size_t n : counts())
            for (bool in_place : {false, true}) {
                const std::string what = trace("allgather", d, Op::Sum, n, in_place);
                const size_t es = ds::dtype_size(d);
                std::vector<uint8_t> mine = make_input(d, R, n);
                std::vector<uint8_t> recv(n * S * es, 0xA5);
                if (in_place) {
                    std::copy(mine.begin(), mine.end(), recv.begin() + R * n * es);
                    c->allgather(recv.data() + R * n * es, recv.data(), n, d);
                } else {
                    c->allgather(mine.data(), recv.data(), n, d);
                }
                std::vector<uint8_t> want;
                for (int r = 0; r < S; ++r) {
                    std::vector<uint8_t> b = make_input(d, r, n);
                    want.insert(want.end(), b.begin(), b.end());
                }
                EXPECT_EQ(recv, want) << what;
            }
    c->finalize();
}

TEST(CommMpi, BroadcastFromEveryRoot) {
    auto c = world_comm();
    const int R = c->rank(), S = c->size();
    for (DType d : kFloatTypes)
        for (size_t n : {size_t(1), size_t(13), size_t(65537)})
            for (int root = 0; root < S; ++root) {
                std::vector<uint8_t> buf = R == root ? make_input(d, root, n) : std::vector<uint8_t>(n * ds::dtype_size(d), 0);
                c->broadcast(buf.data(), n, d, root);
                EXPECT_EQ(buf, make_input(d, root, n)) << ds::dtype_name(d) << " n=" << n << " root=" << root;
            }
    c->finalize();
}

TEST(CommMpi, AlltoallSendsBlockJToRankJ) {
    auto c = world_comm();
    const int R = c->rank(), S = c->size();
    for (size_t n : {size_t(1), size_t(7), size_t(1009)}) {
        // Element i of the block for rank j from rank r: r*1e6 + j*1e3 + i (exact in fp32 for i < 1000... use int32).
        std::vector<int32_t> send(n * S), recv(n * S, -1);
        for (int j = 0; j < S; ++j)
            for (size_t i = 0; i < n; ++i) send[j * n + i] = R * 10000000 + j * 100000 + static_cast<int32_t>(i);
        c->alltoall(send.data(), recv.data(), n, DType::I32);
        size_t bad = 0;
        for (int r = 0; r < S; ++r)
            for (size_t i = 0; i < n; ++i) bad += recv[r * n + i] != r * 10000000 + R * 100000 + static_cast<int32_t>(i);
        EXPECT_EQ(bad, 0u) << "n=" << n;
    }
    c->finalize();
}

TEST(CommMpi, SendRecvRing) {
    auto c = world_comm();
    const int R = c->rank(), S = c->size();
    const int next = (R + 1) % S, prev = (R + S - 1) % S;
    for (DType d : kFloatTypes)
        for (size_t n : {size_t(1), size_t(1009), size_t(1000003)}) {
            std::vector<uint8_t> out = make_input(d, R, n), in(out.size(), 0);
            auto rq = c->recv_async(in.data(), n, d, prev, 5);
            auto sq = c->send_async(out.data(), n, d, next, 5);
            sq->wait();
            rq->wait();
            EXPECT_EQ(in, make_input(d, prev, n)) << ds::dtype_name(d) << " n=" << n;
        }
    // Tags keep messages apart: tag 2 posted first, tag 1 received first.
    std::vector<int32_t> one = {R * 10 + 1}, two = {R * 10 + 2}, got1 = {0}, got2 = {0};
    auto s2 = c->send_async(two.data(), 1, DType::I32, next, 2);
    auto s1 = c->send_async(one.data(), 1, DType::I32, next, 1);
    c->recv(got1.data(), 1, DType::I32, prev, 1);
    c->recv(got2.data(), 1, DType::I32, prev, 2);
    s1->wait();
    s2->wait();
    EXPECT_EQ(got1[0], prev * 10 + 1);
    EXPECT_EQ(got2[0], prev * 10 + 2);
    c->finalize();
}

TEST(CommMpi, BarrierWaitsForTheSlowestRank) {
    auto c = world_comm();
    c->barrier();
    const auto t0 = std::chrono::steady_clock::now();
    if (c->rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(400));
    c->barrier();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GE(ms, 350.0) << "barrier returned before rank 0 arrived";
    c->finalize();
}

TEST(CommMpi, AsyncOverlapWaitInReverseOrder) {
    auto c = world_comm();
    const int R = c->rank(), S = c->size();
    const size_t n = 100003;
    std::vector<std::vector<uint8_t>> in, out;
    std::vector<std::unique_ptr<ds::comm::Request>> reqs;
    for (int k = 0; k < 4; ++k) {
        const DType d = kFloatTypes[k % 3];
        in.push_back(make_input(d, R + k, n));
        out.emplace_back(in.back().size(), 0);
    }
    for (int k = 0; k < 4; ++k)
        reqs.push_back(c->allreduce_async(in[k].data(), out[k].data(), n, kFloatTypes[k % 3], Op::Sum));
    std::vector<uint8_t> gathered(n * S * 4);
    std::vector<uint8_t> mine = make_input(DType::F32, R, n);
    reqs.push_back(c->allgather_async(mine.data(), gathered.data(), n, DType::F32));
    // The host "computes" meanwhile; the watchdog drives MPI progress.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int k = static_cast<int>(reqs.size()) - 1; k >= 0; --k) reqs[k]->wait();
    for (auto& r : reqs) EXPECT_TRUE(r->test());  // waiting again is harmless
    for (int k = 0; k < 4; ++k) {
        const DType d = kFloatTypes[k % 3];
        const auto want = [&](size_t i) {
            double s = 0;
            for (int r = 0; r < S; ++r) s += value(d, r + k, i);
            return static_cast<float>(s);
        };
        EXPECT_EQ(count_bad(d, out[k], n, want, "overlap allreduce " + std::to_string(k)), 0u);
    }
    for (int r = 0; r < S; ++r) {
        std::vector<uint8_t> part(gathered.begin() + r * n * 4, gathered.begin() + (r + 1) * n * 4);
        EXPECT_EQ(part, make_input(DType::F32, r, n)) << "allgather block " << r;
    }
    c->finalize();
}

TEST(CommMpi, TestPollsUntilComplete) {
    auto c = world_comm();
    const int R = c->rank(), S = c->size();
    const size_t n = 1000003;
    std::vector<uint8_t> in = make_input(DType::F32, R, n), out(in.size());
    auto req = c->allreduce_async(in.data(), out.data(), n, DType::F32, Op::Avg);
    int polls = 0;
    while (!req->test()) ++polls;
    EXPECT_EQ(count_bad(DType::F32, out, n, [&](size_t i) { return reduced(DType::F32, Op::Avg, S, i); }, "test()"),
              0u);
    c->finalize();
}

TEST(CommMpi, DroppedRequestStillCompletes) {
    auto c = world_comm();
    const int R = c->rank(), S = c->size();
    const size_t n = 65537;
    std::vector<uint8_t> in = make_input(DType::BF16, R, n), out(in.size());
    c->allreduce_async(in.data(), out.data(), n, DType::BF16, Op::Sum);  // dropped: its destructor waits
    EXPECT_EQ(count_bad(DType::BF16, out, n, [&](size_t i) { return reduced(DType::BF16, Op::Sum, S, i); }, "dropped"),
              0u);
    c->finalize();
}

TEST(CommMpi, DebugModeAgreeingCollectivesPass) {
    auto c = world_comm(120000, /*debug=*/true);
    const int R = c->rank(), S = c->size();
    const size_t n = 1009;
    std::vector<uint8_t> in = make_input(DType::F16, R, n), out(in.size());
    c->allreduce(in.data(), out.data(), n, DType::F16, Op::Avg);
    EXPECT_EQ(count_bad(DType::F16, out, n, [&](size_t i) { return reduced(DType::F16, Op::Avg, S, i); }, "debug"), 0u);
    std::vector<uint8_t> all(n * S * 2);
    c->allgather(in.data(), all.data(), n, DType::F16);
    c->broadcast(in.data(), n, DType::F16, S - 1);
    c->barrier();
    EXPECT_EQ(c->collectives_started(), 4u);
    EXPECT_FALSE(c->broken());
    c->finalize();
}

TEST(CommMpi, FinalizedCommunicatorRefusesWork) {
    auto c = world_comm();
    c->finalize();
    float x = 1;
    try {
        c->allreduce(&x, &x, 1, DType::F32, Op::Sum);
        ADD_FAILURE() << "allreduce after finalize did not throw";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_INVALID_STATE);
        EXPECT_NE(std::string(e.what()).find("finalized"), std::string::npos) << e.what();
    }
    try {
        c->finalize();
        ADD_FAILURE() << "second finalize did not throw";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_INVALID_STATE);
    }
}

TEST(CommMpi, PublicApiUnderMpirun) {
    const int S = ds_mpi_test::world_size();
    ds_comm_options_t o;
    ds_comm_options_init(&o, sizeof o);
    ds_comm_t* w = nullptr;
    ASSERT_EQ(ds_comm_create_world(&o, &w), DS_OK) << ds_last_error();
    int32_t rank = -1, size = -1, backend = -1;
    EXPECT_EQ(ds_comm_rank(w, &rank), DS_OK);
    EXPECT_EQ(ds_comm_size(w, &size), DS_OK);
    EXPECT_EQ(ds_comm_backend(w, &backend), DS_OK);
    EXPECT_EQ(rank, ds_mpi_test::world_rank());
    EXPECT_EQ(size, S);
    EXPECT_EQ(backend, DS_COMM_BACKEND_MPI);

    ds_comm_t* m = nullptr;
    ASSERT_EQ(ds_comm_create_mpi(MPI_Comm_c2f(MPI_COMM_WORLD), nullptr, &m), DS_OK) << ds_last_error();
    EXPECT_EQ(ds_comm_size(m, &size), DS_OK);
    EXPECT_EQ(size, S);

    // Not a communicator; an intercommunicator-free world cannot be "local".
    ds_comm_t* bad = reinterpret_cast<ds_comm_t*>(&o);
    EXPECT_EQ(ds_comm_create_mpi(77, nullptr, &bad), DS_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(bad, nullptr);
    EXPECT_NE(std::string(ds_last_error()).find("mpi_comm_f 77"), std::string::npos) << ds_last_error();
    o.backend = DS_COMM_BACKEND_LOCAL;
    EXPECT_EQ(ds_comm_create_world(&o, &bad), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ds_last_error()).find("one of " + std::to_string(S) + " ranks"), std::string::npos)
        << ds_last_error();
    EXPECT_EQ(ds_comm_create_mpi(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &bad), DS_ERR_INVALID_ARGUMENT);

    EXPECT_EQ(ds_comm_finalize(w), DS_OK) << ds_last_error();
    EXPECT_EQ(ds_comm_finalize(m), DS_OK) << ds_last_error();
    EXPECT_EQ(ds_comm_finalize(m), DS_ERR_INVALID_STATE);
    ds_comm_destroy(w);
    ds_comm_destroy(m);
    int finalized = 1;
    MPI_Finalized(&finalized);
    EXPECT_EQ(finalized, 0) << "the library finalized MPI that the host initialised";
}
