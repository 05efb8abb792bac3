// The local backend (a world of one) and the argument checks every backend
// shares (they live in the Communicator base class).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "catch_error.h"
#include "comm/factory.h"

using ds::DType;
using ds::comm::Backend;
using ds::comm::Communicator;
using ds::comm::Op;

namespace {

std::shared_ptr<Communicator> local(bool debug = false) {
    ds::comm::Options o;
    o.debug = debug;
    return ds::comm::make_local(o);
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 g(seed);
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(g());
    return v;
}

bool contains(const std::string& s, const char* sub) { return s.find(sub) != std::string::npos; }

const DType kAll[] = {DType::F32, DType::F16, DType::BF16, DType::I8, DType::U8, DType::I32, DType::I64};

}  // namespace

TEST(CommLocal, IsAWorldOfOne) {
    auto c = local();
    EXPECT_EQ(c->rank(), 0);
    EXPECT_EQ(c->size(), 1);
    EXPECT_EQ(c->backend(), Backend::Local);
    EXPECT_FALSE(c->device_buffers());
    EXPECT_EQ(c->options().timeout_ms, 30 * 60 * 1000);
}

// Over one rank the sum, mean and max of x are x, bit for bit (x / 1 == x).
TEST(CommLocal, ReductionsReturnTheInputBitForBit) {
    auto c = local();
    for (DType d : kAll)
        for (Op op : {Op::Sum, Op::Avg, Op::Max}) {
            if (op == Op::Avg && !ds::dtype_is_float(d)) continue;
            const size_t n = 1009;
            const auto in = random_bytes(n * ds::dtype_size(d), 7);
            std::vector<uint8_t> out(in.size(), 0);
            c->allreduce(in.data(), out.data(), n, d, op);
            EXPECT_EQ(out, in) << ds::dtype_name(d) << " " << op_name(op);
            std::vector<uint8_t> inplace = in;
            c->allreduce(inplace.data(), inplace.data(), n, d, op);
            EXPECT_EQ(inplace, in);
            std::fill(out.begin(), out.end(), 0);
            c->reduce_scatter(in.data(), out.data(), n, d, op);
            EXPECT_EQ(out, in);
        }
}

TEST(CommLocal, DataMovementCopies) {
    auto c = local();
    const size_t n = 13;
    const auto in = random_bytes(n * 4, 3);
    std::vector<uint8_t> out(n * 4, 0);
    c->allgather(in.data(), out.data(), n, DType::F32);
    EXPECT_EQ(out, in);
    std::fill(out.begin(), out.end(), 0);
    c->alltoall(in.data(), out.data(), n, DType::F32);
    EXPECT_EQ(out, in);
    std::vector<uint8_t> b = in;
    c->broadcast(b.data(), n, DType::F32, 0);
    EXPECT_EQ(b, in);
    c->barrier();
    std::vector<uint8_t> g = in;  // in place: send == recv + rank*count
    c->allgather(g.data(), g.data(), n, DType::F32);
    EXPECT_EQ(g, in);
    auto r = c->allreduce_async(in.data(), out.data(), n, DType::F32, Op::Sum);
    EXPECT_TRUE(r->test());
    r->wait();
    EXPECT_EQ(c->collectives_started(), 6u);
}

TEST(CommLocal, ArgumentChecksNameTheProblem) {
    auto c = local();
    float x[4] = {0, 0, 0, 0};
    int32_t k[4] = {0, 0, 0, 0};
    auto e = catch_error([&] { c->allreduce(k, k, 4, DType::I32, Op::Avg); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(e.what(), "op avg needs a floating dtype")) << e.what();
    e = catch_error([&] { c->allreduce(nullptr, x, 4, DType::F32, Op::Sum); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(e.what(), "'send' is NULL")) << e.what();
    c->allreduce(nullptr, nullptr, 0, DType::F32, Op::Sum);  // empty is fine
    e = catch_error([&] { c->allreduce(x, x + 1, 2, DType::F32, Op::Sum); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(e.what(), "overlap")) << e.what();
    e = catch_error([&] { c->allreduce(x, x, 1, DType::F32, static_cast<Op>(9)); });
    EXPECT_TRUE(contains(e.what(), "op 9")) << e.what();
    e = catch_error([&] { c->allreduce(x, x, 1, static_cast<DType>(42), Op::Sum); });
    EXPECT_TRUE(contains(e.what(), "dtype 42")) << e.what();
    e = catch_error([&] { c->broadcast(x, 1, DType::F32, 1); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(e.what(), "root 1")) << e.what();
    e = catch_error([&] { c->send(x, 1, DType::F32, 0, 0); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(e.what(), "peer 0 must be another rank")) << e.what();
    EXPECT_NO_THROW(c->alltoall(x, x + 2, 2, DType::F32));  // disjoint: fine
    e = catch_error([&] { c->alltoall(x, x + 1, 2, DType::F32); });
    EXPECT_TRUE(contains(e.what(), "alltoall: send and recv overlap")) << e.what();
    e = catch_error([&] { c->reduce_scatter(x, x + 1, 2, DType::F32, Op::Sum); });
    EXPECT_TRUE(contains(e.what(), "this rank's block")) << e.what();
    e = catch_error([&] { c->allreduce(x, x, SIZE_MAX / 2, DType::F32, Op::Sum); });
    EXPECT_TRUE(contains(e.what(), "overflows")) << e.what();
    // Rejected calls start no collective.
    EXPECT_EQ(c->collectives_started(), 2u);
}

TEST(CommLocal, AbortIsStickyAndNamesTheReason) {
    auto c = local();
    EXPECT_FALSE(c->broken());
    EXPECT_EQ(c->break_status(), DS_OK);
    c->abort("the host gave up");
    c->abort("second reason is ignored");
    EXPECT_TRUE(c->broken());
    EXPECT_EQ(c->break_status(), DS_ERR_COMM);
    EXPECT_TRUE(contains(c->break_message(), "the host gave up")) << c->break_message();
    EXPECT_TRUE(contains(c->break_message(), "rank 0 of 1 (local)")) << c->break_message();
    float x = 0;
    auto e = catch_error([&] { c->allreduce(&x, &x, 1, DType::F32, Op::Sum); });
    EXPECT_EQ(e.status(), DS_ERR_COMM);
    EXPECT_TRUE(contains(e.what(), "allreduce: the communicator is broken: communicator aborted")) << e.what();
    e = catch_error([&] { c->finalize(); });
    EXPECT_EQ(e.status(), DS_ERR_COMM);
    EXPECT_TRUE(contains(e.what(), "the host gave up")) << e.what();
    e = catch_error([&] { c->finalize(); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_STATE);
}

TEST(CommLocal, FinalizeEndsUse) {
    auto c = local();
    c->finalize();
    EXPECT_TRUE(c->finalized());
    float x = 0;
    auto e = catch_error([&] { c->barrier(); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_STATE);
    EXPECT_TRUE(contains(e.what(), "barrier: the communicator has been finalized")) << e.what();
    e = catch_error([&] { c->allreduce(&x, &x, 1, DType::F32, Op::Sum); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_STATE);
    EXPECT_EQ(c->size(), 1);  // still answers
}

TEST(CommLocal, DebugModeCountsCollectivesNotMessages) {
    auto c = local(/*debug=*/true);
    float x[2] = {1, 2};
    c->allreduce(x, x, 2, DType::F32, Op::Max);
    c->allgather(x, x, 2, DType::F32);
    c->barrier();
    EXPECT_EQ(c->collectives_started(), 3u);
    EXPECT_FALSE(c->broken());
}

TEST(CommLocal, NonPositiveTimeoutIsRejected) {
    ds::comm::Options o;
    o.timeout_ms = 0;
    auto e = catch_error([&] { ds::comm::make_local(o); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(e.what(), "timeout_ms = 0")) << e.what();
}
