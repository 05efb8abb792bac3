// Fingerprints: the text of descriptions and of the mismatch message every
// rank reports in debug mode.
#include <gtest/gtest.h>

#include <vector>

#include "comm/communicator.h"
#include "comm/fingerprint.h"

using ds::DType;
using ds::comm::FpKind;
using ds::comm::Fingerprint;
using ds::comm::Op;

namespace {
Fingerprint fp(uint64_t seq, FpKind k, DType d, uint64_t count, int op = -1, int root = -1) {
    Fingerprint f;
    f.seq = seq;
    f.kind = static_cast<int32_t>(k);
    f.dtype = static_cast<int32_t>(d);
    f.count = count;
    f.op = op;
    f.root = root;
    return f;
}
}  // namespace

TEST(CommFingerprint, DescribeNamesEveryField) {
    EXPECT_EQ(describe(fp(1, FpKind::Allreduce, DType::F32, 1000, static_cast<int>(Op::Sum))),
              "allreduce(fp32, 1000, sum)");
    EXPECT_EQ(describe(fp(2, FpKind::ReduceScatter, DType::BF16, 7, static_cast<int>(Op::Avg))),
              "reduce_scatter(bf16, 7, avg)");
    EXPECT_EQ(describe(fp(3, FpKind::Allgather, DType::F16, 500)), "allgather(fp16, 500)");
    EXPECT_EQ(describe(fp(4, FpKind::Broadcast, DType::I64, 3, -1, 2)), "broadcast(int64, 3, root=2)");
    EXPECT_EQ(describe(fp(5, FpKind::Alltoall, DType::U8, 9)), "alltoall(uint8, 9)");
    Fingerprint b = fp(6, FpKind::Barrier, DType::F32, 0);
    b.dtype = -1;
    EXPECT_EQ(describe(b), "barrier()");
    EXPECT_EQ(describe(fp(0, FpKind::Send, DType::I32, 10, -1, 1)), "send(int32, 10, peer=1)");
    EXPECT_EQ(label(fp(17, FpKind::Allreduce, DType::F32, 1000, 2)), "collective #17 allreduce(fp32, 1000, max)");
    EXPECT_EQ(label(fp(0, FpKind::Recv, DType::F32, 4, -1, 0)), "recv(fp32, 4, peer=0)");
}

TEST(CommFingerprint, GarbageFromADivergedPeerIsDescribedSafely) {
    Fingerprint f = fp(1, FpKind::Allreduce, DType::F32, 1, 1);
    f.kind = 99;
    f.dtype = 42;
    f.op = 7;
    EXPECT_EQ(describe(f), "unknown_collective(unknown_dtype, 1, unknown_op)");
}

TEST(CommFingerprint, AgreeingRanksHaveNoMismatch) {
    std::vector<Fingerprint> all(3, fp(4, FpKind::Allgather, DType::F16, 8));
    EXPECT_EQ(ds::comm::find_mismatch(all.data(), all.size()), "");
    EXPECT_EQ(ds::comm::find_mismatch(all.data(), 0), "");
}

TEST(CommFingerprint, MismatchNamesRankZeroAndEveryDifferingRank) {
    std::vector<Fingerprint> all = {fp(17, FpKind::Allreduce, DType::F32, 1000, 0),
                                     fp(17, FpKind::Allgather, DType::F32, 500),
                                     fp(17, FpKind::Allreduce, DType::F32, 1000, 0),
                                     fp(17, FpKind::Allreduce, DType::F16, 1000, 0)};
    EXPECT_EQ(ds::comm::find_mismatch(all.data(), all.size()),
              "collective #17 mismatch: rank 0 called allreduce(fp32, 1000, sum), rank 1 called "
              "allgather(fp32, 500), rank 3 called allreduce(fp16, 1000, sum)");
}

TEST(CommFingerprint, MismatchReportsADifferentSequenceNumber) {
    std::vector<Fingerprint> all = {fp(5, FpKind::Barrier, DType::F32, 0), fp(6, FpKind::Barrier, DType::F32, 0)};
    all[0].dtype = all[1].dtype = -1;
    EXPECT_EQ(ds::comm::find_mismatch(all.data(), all.size()),
              "collective #5 mismatch: rank 0 called barrier(), rank 1 called barrier() as its collective #6");
}
