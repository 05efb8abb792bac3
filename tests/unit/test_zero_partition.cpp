// ZeRO partition layout math: DEEPSPEED_SEMANTICS.md's worked examples (§6.1 item 7,
// §16.3, §16.4), prime sizes over several dp, random property tests against
// an element-by-element model of the flat buffer, stage 3 sub-groups and
// persistence, gradient bucket boundaries and all-gather shards.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "zero/partition.h"

using namespace ds::zero;

namespace {

struct Frag {
    int32_t rank;
    int64_t flat, part, param_off, len;
};

void expect_frags(const std::vector<FlatFragment>& got, const std::vector<Frag>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
        EXPECT_EQ(got[k].rank, want[k].rank) << "fragment " << k;
        EXPECT_EQ(got[k].flat_offset, want[k].flat) << "fragment " << k;
        EXPECT_EQ(got[k].partition_offset, want[k].part) << "fragment " << k;
        EXPECT_EQ(got[k].param_offset, want[k].param_off) << "fragment " << k;
        EXPECT_EQ(got[k].length, want[k].len) << "fragment " << k;
    }
}

// Element-level model of a stage 1/2 flat buffer: owner param (or -1 for
// padding) and offset inside it for every flat position.
struct ElementMap {
    std::vector<int64_t> param, offset;
};

ElementMap element_map(const std::vector<int64_t>& sizes, const std::vector<size_t>& order, int64_t padded) {
    ElementMap m;
    for (size_t i : order)
        for (int64_t e = 0; e < sizes[i]; ++e) {
            m.param.push_back(static_cast<int64_t>(i));
            m.offset.push_back(e);
        }
    while (static_cast<int64_t>(m.param.size()) < padded) {
        m.param.push_back(-1);
        m.offset.push_back(-1);
    }
    return m;
}

// Checks every stage 1/2 invariant against the element model.
void check_flat_layout(const std::vector<int64_t>& sizes, int32_t dp, bool rr) {
    SCOPED_TRACE(::testing::Message() << "dp=" << dp << " rr=" << rr << " params=" << sizes.size());
    const FlatPartitionLayout L = make_flat_partition_layout(sizes, dp, rr);
    int64_t total = 0;
    for (int64_t s : sizes) total += s;
    ASSERT_EQ(L.numel, total);
    // Smallest multiple of 2*dp that is >= total.
    ASSERT_EQ(L.padded_numel % (2 * dp), 0);
    ASSERT_GE(L.padded_numel, total);
    ASSERT_LT(L.padded_numel - total, 2 * dp);
    ASSERT_EQ(L.partition_numel * dp, L.padded_numel);

    const ElementMap m = element_map(sizes, L.flat_order, L.padded_numel);
    // Partitions tile the buffer exactly once, equal sizes.
    int64_t expect_begin = 0;
    for (int32_t r = 0; r < dp; ++r) {
        ASSERT_EQ(L.partition_begin(r), expect_begin);
        ASSERT_EQ(L.partition_end(r) - L.partition_begin(r), L.partition_numel);
        expect_begin = L.partition_end(r);
        // Padding: exactly the partition's padding elements, all at its end.
        int64_t pad = 0;
        for (int64_t x = L.partition_begin(r); x < L.partition_end(r); ++x) {
            if (m.param[x] < 0) ++pad;
            else EXPECT_EQ(pad, 0) << "real element after padding at flat " << x;
        }
        EXPECT_EQ(L.padding(r), pad) << "rank " << r;
    }
    ASSERT_EQ(expect_begin, L.padded_numel);

    // Fragments of each param cover it exactly once and agree with the model.
    std::vector<int> seen(static_cast<size_t>(L.padded_numel), 0);
    for (size_t i = 0; i < sizes.size(); ++i) {
        int64_t next = 0;
        for (const FlatFragment& f : L.fragments[i]) {
            EXPECT_GT(f.length, 0);
            EXPECT_EQ(f.param_offset, next);
            next += f.length;
            EXPECT_EQ(f.partition_offset, f.flat_offset - f.rank * L.partition_numel);
            EXPECT_GE(f.partition_offset, 0);
            EXPECT_LE(f.partition_offset + f.length, L.partition_numel);
            for (int64_t e = 0; e < f.length; ++e) {
                const int64_t x = f.flat_offset + e;
                EXPECT_EQ(m.param[x], static_cast<int64_t>(i));
                EXPECT_EQ(m.offset[x], f.param_offset + e);
                EXPECT_EQ(x / L.partition_numel, f.rank);
                ++seen[x];
            }
        }
        EXPECT_EQ(next, sizes[i]) << "param " << i;
    }
    for (int64_t x = 0; x < L.padded_numel; ++x) EXPECT_EQ(seen[x], m.param[x] >= 0 ? 1 : 0) << "flat " << x;

    // params_in_partition / first_offset: DeepSpeed's rule, from the model.
    for (int32_t r = 0; r < dp; ++r) {
        const int64_t b = L.partition_begin(r), e = L.partition_end(r);
        std::vector<size_t> want;
        int64_t want_first = 0;
        for (size_t pos = 0; pos < L.flat_order.size(); ++pos) {
            const size_t i = L.flat_order[pos];
            const int64_t s = L.param_flat_offset[i];
            if (s >= b && s < e) want.push_back(i);
            else if (s < b && b < s + sizes[i]) {
                want.push_back(i);
                want_first = b - s;
            }
        }
        EXPECT_EQ(L.params_in_partition(r), want) << "rank " << r;
        EXPECT_EQ(L.first_offset(r), want_first) << "rank " << r;
    }
}

std::vector<int64_t> random_sizes(std::mt19937_64& rng, size_t count, int64_t max_size) {
    std::uniform_int_distribution<int64_t> d(0, max_size);
    std::vector<int64_t> v(count);
    for (auto& x : v) x = d(rng);
    return v;
}

}  // namespace

// ---------------------------------------------------------------------------
// Stage 1/2
// ---------------------------------------------------------------------------

TEST(ZeroPartitionFlat, ReferenceExampleSection6_1) {
    // dp=4, sizes 5,7,3 -> padded 16, P=4: r0=[p0 0:4], r1=[p0 4:5 | p1 0:3]
    // (first_offset 4), r2=[p1 3:7], r3=[p2 0:3 | pad 1].
    const FlatPartitionLayout L = make_flat_partition_layout({5, 7, 3}, 4, false);
    EXPECT_EQ(L.alignment, 8);
    EXPECT_EQ(L.numel, 15);
    EXPECT_EQ(L.padded_numel, 16);
    EXPECT_EQ(L.partition_numel, 4);
    expect_frags(L.fragments[0], {{0, 0, 0, 0, 4}, {1, 4, 0, 4, 1}});
    expect_frags(L.fragments[1], {{1, 5, 1, 0, 3}, {2, 8, 0, 3, 4}});
    expect_frags(L.fragments[2], {{3, 12, 0, 0, 3}});
    EXPECT_EQ(L.params_in_partition(0), (std::vector<size_t>{0}));
    EXPECT_EQ(L.params_in_partition(1), (std::vector<size_t>{0, 1}));
    EXPECT_EQ(L.params_in_partition(2), (std::vector<size_t>{1}));
    EXPECT_EQ(L.params_in_partition(3), (std::vector<size_t>{2}));
    EXPECT_EQ(L.first_offset(0), 0);
    EXPECT_EQ(L.first_offset(1), 4);
    EXPECT_EQ(L.first_offset(2), 3);
    EXPECT_EQ(L.first_offset(3), 0);
    for (int32_t r = 0; r < 3; ++r) EXPECT_EQ(L.padding(r), 0);
    EXPECT_EQ(L.padding(3), 1);
}

TEST(ZeroPartitionFlat, ReferenceStitchingExample16_4) {
    // Saved fp32 partitions (without padding) have lengths 4,4,4,3; their
    // concatenation (15) splits 5/7/3 in param_shapes order.
    const FlatPartitionLayout L = make_flat_partition_layout({5, 7, 3}, 4, false);
    std::vector<int64_t> saved;
    for (int32_t r = 0; r < 4; ++r) saved.push_back(L.partition_numel - L.padding(r));
    EXPECT_EQ(saved, (std::vector<int64_t>{4, 4, 4, 3}));
    // Stitch param 1 (7 elements) from the saved partitions.
    const auto pieces = L.locate(1, 0, 7);
    expect_frags(pieces, {{1, 5, 1, 0, 3}, {2, 8, 0, 3, 4}});
    // A sub-range across the rank boundary.
    expect_frags(L.locate(1, 2, 5), {{1, 7, 3, 2, 1}, {2, 8, 0, 3, 2}});
    expect_frags(L.locate(0, 4, 5), {{1, 4, 0, 4, 1}});
    EXPECT_TRUE(L.locate(2, 1, 1).empty());
}

TEST(ZeroPartitionFlat, RoundRobinOrder) {
    // dp=2, [a,b,c,d,e] -> [a,c,e,b,d]
    EXPECT_EQ(round_robin_order(5, 2), (std::vector<size_t>{0, 2, 4, 1, 3}));
    EXPECT_EQ(round_robin_order(3, 4), (std::vector<size_t>{0, 1, 2}));
    EXPECT_EQ(round_robin_order(7, 3), (std::vector<size_t>{0, 3, 6, 1, 4, 2, 5}));
    EXPECT_EQ(round_robin_order(4, 1), (std::vector<size_t>{0, 1, 2, 3}));
    EXPECT_TRUE(round_robin_order(0, 3).empty());

    // The flat buffer follows the reordered order: sizes a=1,b=2,c=3,d=4,e=5.
    const FlatPartitionLayout L = make_flat_partition_layout({1, 2, 3, 4, 5}, 2, true);
    EXPECT_EQ(L.flat_order, (std::vector<size_t>{0, 2, 4, 1, 3}));
    EXPECT_EQ(L.param_flat_offset, (std::vector<int64_t>{0, 9, 1, 11, 4}));
    EXPECT_EQ(L.padded_numel, 16);  // 15 -> multiple of 4
    EXPECT_EQ(L.partition_numel, 8);
    // e occupies flat [4,9): straddles ranks 0 and 1.
    expect_frags(L.fragments[4], {{0, 4, 4, 0, 4}, {1, 8, 0, 4, 1}});
    EXPECT_EQ(L.params_in_partition(1), (std::vector<size_t>{4, 1, 3}));
    EXPECT_EQ(L.first_offset(1), 4);
}

TEST(ZeroPartitionFlat, PrimeSizesOverDp) {
    const std::vector<int64_t> primes{2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61};
    for (int32_t dp : {1, 2, 3, 4, 7})
        for (bool rr : {false, true}) check_flat_layout(primes, dp, rr);
    // One prime param alone, and a prime-length prefix.
    for (int32_t dp : {1, 2, 3, 4, 7}) {
        check_flat_layout({101}, dp, false);
        check_flat_layout({3, 5, 7}, dp, true);
    }
}

TEST(ZeroPartitionFlat, KnownPaddingValues) {
    // 1 element, dp=4: padded 8, P=2: paddings 1,2,2,2 (whole partitions of padding).
    const auto a = make_flat_partition_layout({1}, 4, false);
    EXPECT_EQ(a.padded_numel, 8);
    EXPECT_EQ(a.padding(0), 1);
    EXPECT_EQ(a.padding(1), 2);
    EXPECT_EQ(a.padding(3), 2);
    EXPECT_TRUE(a.params_in_partition(2).empty());
    // 14 elements, dp=7: already a multiple of 14, no padding.
    const auto b = make_flat_partition_layout({2, 3, 9}, 7, false);
    EXPECT_EQ(b.padded_numel, 14);
    for (int32_t r = 0; r < 7; ++r) EXPECT_EQ(b.padding(r), 0);
    // dp=3, 61 elements -> 66, P=22: rank 2 holds 17 real + 5 pad.
    const auto c = make_flat_partition_layout({61}, 3, false);
    EXPECT_EQ(c.padded_numel, 66);
    EXPECT_EQ(c.padding(2), 5);
    expect_frags(c.fragments[0], {{0, 0, 0, 0, 22}, {1, 22, 0, 22, 22}, {2, 44, 0, 44, 17}});
}

TEST(ZeroPartitionFlat, ZeroSizeAndEmptyGroups) {
    const auto e = make_flat_partition_layout({}, 3, false);
    EXPECT_EQ(e.padded_numel, 0);
    EXPECT_EQ(e.partition_numel, 0);
    EXPECT_EQ(e.padding(2), 0);
    // A zero-size param has no fragments but still belongs to the partition its start lies in.
    const auto z = make_flat_partition_layout({4, 0, 4}, 2, false);
    EXPECT_TRUE(z.fragments[1].empty());
    EXPECT_EQ(z.param_flat_offset[1], 4);
    EXPECT_EQ(z.params_in_partition(1), (std::vector<size_t>{1, 2}));
    EXPECT_TRUE(z.locate(1, 0, 0).empty());
    check_flat_layout({0, 5, 0, 0, 3, 0}, 3, false);
    check_flat_layout({0, 5, 0, 0, 3, 0}, 3, true);
}

TEST(ZeroPartitionFlat, RandomProperties) {
    std::mt19937_64 rng(20240611);
    for (int trial = 0; trial < 200; ++trial) {
        const int32_t dp = 1 + static_cast<int32_t>(rng() % 9);
        const size_t count = rng() % 12;
        const auto sizes = random_sizes(rng, count, trial % 3 == 0 ? 3 : 40);
        check_flat_layout(sizes, dp, (trial & 1) != 0);
        // locate(): random sub-ranges agree with the fragments element by element.
        const FlatPartitionLayout L = make_flat_partition_layout(sizes, dp, (trial & 1) != 0);
        for (size_t i = 0; i < count; ++i) {
            if (sizes[i] == 0) continue;
            const int64_t b = static_cast<int64_t>(rng() % static_cast<uint64_t>(sizes[i]));
            const int64_t e = b + static_cast<int64_t>(rng() % static_cast<uint64_t>(sizes[i] - b + 1));
            int64_t next = b;
            for (const FlatFragment& f : L.locate(i, b, e)) {
                EXPECT_EQ(f.param_offset, next);
                EXPECT_EQ(f.flat_offset, L.param_flat_offset[i] + f.param_offset);
                EXPECT_EQ(f.rank, f.flat_offset / L.partition_numel);
                EXPECT_EQ(f.partition_offset, f.flat_offset % L.partition_numel);
                next += f.length;
            }
            EXPECT_EQ(next, e);
        }
    }
}

TEST(ZeroPartitionFlat, InvalidArguments) {
    EXPECT_THROW(make_flat_partition_layout({1}, 0, false), ds::Error);
    EXPECT_THROW(make_flat_partition_layout({1, -2}, 2, false), ds::Error);
    EXPECT_THROW(make_flat_partition_layout({INT64_MAX - 2, 1}, 2, false), ds::Error);
    const auto L = make_flat_partition_layout({5, 7, 3}, 4, false);
    EXPECT_THROW(L.padding(4), ds::Error);
    EXPECT_THROW(L.partition_begin(-1), ds::Error);
    EXPECT_THROW(L.locate(3, 0, 1), ds::Error);
    EXPECT_THROW(L.locate(0, 2, 6), ds::Error);
    EXPECT_THROW(L.locate(0, 3, 2), ds::Error);
    try {
        make_flat_partition_layout({1, -2}, 2, false);
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(e.what()).find("param_numel[1]"), std::string::npos) << e.what();
    }
}

TEST(ZeroPartitionFlat, AllgatherShards) {
    // P=100, dp=4, bucket 50: 400/50 = 8 shards of 12 (even), last 16.
    EXPECT_EQ(allgather_shard_bounds(100, 4, 50),
              (std::vector<int64_t>{0, 12, 24, 36, 48, 60, 72, 84, 100}));
    // 3 shards of 33 -> rounded down to 32; last takes 36.
    EXPECT_EQ(allgather_shard_bounds(100, 2, 66), (std::vector<int64_t>{0, 32, 64, 100}));
    // Bucket larger than the buffer: one shard.
    EXPECT_EQ(allgather_shard_bounds(100, 4, 500000000), (std::vector<int64_t>{0, 100}));
    EXPECT_EQ(allgather_shard_bounds(8, 1, 2), (std::vector<int64_t>{0, 8}));
    // Shard size rounds to 0: every shard but the last is empty.
    EXPECT_EQ(allgather_shard_bounds(7, 2, 3), (std::vector<int64_t>{0, 0, 0, 0, 7}));
    EXPECT_THROW(allgather_shard_bounds(8, 2, 0), ds::Error);
}

// ---------------------------------------------------------------------------
// Stage 3
// ---------------------------------------------------------------------------

TEST(ZeroPartitionStage3, ReferenceStitchingExample16_3) {
    // dp=4, a (10), b (3) in one sub-group: pn(a)=3, pn(b)=1; each rank's flat
    // = [a_r (3), b_r (1)]; a = cat(rank0[0:3], ..., rank3[0:3])[:10].
    const Stage3Layout L = make_stage3_layout({10, 3}, 4, 1000000000);
    ASSERT_EQ(L.sub_groups.size(), 1u);
    EXPECT_EQ(L.sub_groups[0].numel, 4);
    EXPECT_EQ(L.rank_numel() * 4, 16);  // total check (3+1)*4
    EXPECT_EQ(L.params[0].partition_numel, 3);
    EXPECT_EQ(L.params[1].partition_numel, 1);
    EXPECT_EQ(L.params[0].sub_group_offset, 0);
    EXPECT_EQ(L.params[1].sub_group_offset, 3);
    // Owned elements: a: 3,3,3,1 (rank 3 has 2 padding); b: 1,1,1,0.
    const int64_t a_owned[4] = {3, 3, 3, 1}, b_owned[4] = {1, 1, 1, 0};
    for (int32_t r = 0; r < 4; ++r) {
        EXPECT_EQ(L.params[0].owned_numel(r), a_owned[r]);
        EXPECT_EQ(L.params[1].owned_numel(r), b_owned[r]);
        EXPECT_EQ(L.params[0].padding(r), 3 - a_owned[r]);
    }
    const auto a = L.locate(0, 0, 10);
    ASSERT_EQ(a.size(), 4u);
    for (int32_t r = 0; r < 4; ++r) {
        EXPECT_EQ(a[r].rank, r);
        EXPECT_EQ(a[r].sub_group_offset, 0);
        EXPECT_EQ(a[r].param_offset, 3 * r);
        EXPECT_EQ(a[r].length, r < 3 ? 3 : 1);
    }
    const auto b = L.locate(1, 0, 3);
    ASSERT_EQ(b.size(), 3u);
    for (int32_t r = 0; r < 3; ++r) {
        EXPECT_EQ(b[r].rank, r);
        EXPECT_EQ(b[r].sub_group_offset, 3);  // rank r's flat [3:4]
        EXPECT_EQ(b[r].param_offset, r);
        EXPECT_EQ(b[r].length, 1);
    }
    // A sub-range: a[4:8) lives on rank 1 [1:3) and rank 2 [0:2).
    const auto mid = L.locate(0, 4, 8);
    ASSERT_EQ(mid.size(), 2u);
    EXPECT_EQ(mid[0].rank, 1);
    EXPECT_EQ(mid[0].chunk_offset, 1);
    EXPECT_EQ(mid[0].length, 2);
    EXPECT_EQ(mid[1].rank, 2);
    EXPECT_EQ(mid[1].chunk_offset, 0);
    EXPECT_EQ(mid[1].length, 2);
}

TEST(ZeroPartitionStage3, ChunkSizes) {
    EXPECT_EQ(stage3_partition_numel(10, 4), 3);
    EXPECT_EQ(stage3_partition_numel(12, 4), 3);
    EXPECT_EQ(stage3_partition_numel(13, 4), 4);
    EXPECT_EQ(stage3_partition_numel(0, 4), 0);
    EXPECT_EQ(stage3_partition_numel(7, 1), 7);
    EXPECT_EQ(stage3_partition_numel(2, 7), 1);  // ranks 2..6 hold only padding
    EXPECT_THROW(stage3_partition_numel(-1, 4), ds::Error);
    EXPECT_THROW(stage3_partition_numel(4, 0), ds::Error);
}

TEST(ZeroPartitionStage3, PrimeSizesCoverEachParamOnce) {
    const std::vector<int64_t> primes{2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61};
    for (int32_t dp : {1, 2, 3, 4, 7}) {
        const Stage3Layout L = make_stage3_layout(primes, dp, 1000000000);
        int64_t rank_total = 0;
        for (size_t i = 0; i < primes.size(); ++i) {
            const Stage3Param& p = L.params[i];
            // chunk = ceil(n/dp) computed independently in floating point
            EXPECT_EQ(p.partition_numel,
                      static_cast<int64_t>(std::ceil(static_cast<double>(primes[i]) / dp)));
            EXPECT_EQ(p.sub_group_offset, rank_total);
            rank_total += p.partition_numel;
            std::vector<int> seen(static_cast<size_t>(primes[i]), 0);
            int64_t owned_sum = 0;
            for (int32_t r = 0; r < dp; ++r) {
                owned_sum += p.owned_numel(r);
                for (int64_t e = 0; e < p.owned_numel(r); ++e) ++seen[p.owned_begin(r) + e];
                EXPECT_EQ(p.owned_numel(r) + p.padding(r), p.partition_numel);
            }
            EXPECT_EQ(owned_sum, primes[i]);
            for (int c : seen) EXPECT_EQ(c, 1);
            // Padding only at the tail: owned ranks form a prefix.
            bool tail = false;
            for (int32_t r = 0; r < dp; ++r) {
                if (p.padding(r) > 0) tail = true;
                else EXPECT_FALSE(tail) << "rank " << r << " after a padded rank";
            }
            int64_t next = 0;
            for (const Stage3Fragment& f : L.locate(i, 0, primes[i])) {
                EXPECT_EQ(f.param_offset, next);
                EXPECT_EQ(f.param_offset, static_cast<int64_t>(f.rank) * p.partition_numel + f.chunk_offset);
                next += f.length;
            }
            EXPECT_EQ(next, primes[i]);
        }
        EXPECT_EQ(L.rank_numel(), rank_total);
    }
}

TEST(ZeroPartitionStage3, SubGroups) {
    // chunks (dp=1) 3,1,4,1,5, sub_group_size 4: running 3, 4 -> close {0,1};
    // 4 -> close {2}; 1, 6 -> close {3,4}.
    const Stage3Layout L = make_stage3_layout({3, 1, 4, 1, 5}, 1, 4);
    ASSERT_EQ(L.sub_groups.size(), 3u);
    EXPECT_EQ(L.sub_groups[0].first_param, 0u);
    EXPECT_EQ(L.sub_groups[0].end_param, 2u);
    EXPECT_EQ(L.sub_groups[0].numel, 4);
    EXPECT_EQ(L.sub_groups[1].first_param, 2u);
    EXPECT_EQ(L.sub_groups[1].end_param, 3u);
    EXPECT_EQ(L.sub_groups[2].first_param, 3u);
    EXPECT_EQ(L.sub_groups[2].end_param, 5u);
    EXPECT_EQ(L.sub_groups[2].numel, 6);
    EXPECT_EQ(L.params[4].sub_group, 2);
    EXPECT_EQ(L.params[4].sub_group_offset, 1);
    // dp=2 uses chunk sizes: 10,6,7 -> chunks 5,3,4; size 8: 5, 8 -> close; 4 (last) -> close.
    const Stage3Layout M = make_stage3_layout({10, 6, 7}, 2, 8);
    ASSERT_EQ(M.sub_groups.size(), 2u);
    EXPECT_EQ(M.sub_groups[0].numel, 8);
    EXPECT_EQ(M.sub_groups[1].numel, 4);
    EXPECT_EQ(M.params[2].sub_group_offset, 0);
    // sub_group_size >= group chunk total (12): one sub-group.
    EXPECT_EQ(make_stage3_layout({10, 6, 7}, 2, 12).sub_groups.size(), 1u);
    // 0: every parameter closes its own sub-group.
    EXPECT_EQ(make_stage3_layout({10, 6, 7}, 2, 0).sub_groups.size(), 3u);
    // Empty group: one empty sub-group (DeepSpeed returns [params_group]).
    const Stage3Layout E = make_stage3_layout({}, 3, 5);
    ASSERT_EQ(E.sub_groups.size(), 1u);
    EXPECT_EQ(E.sub_groups[0].numel, 0);
    EXPECT_THROW(make_stage3_layout({1}, 2, -1), ds::Error);
}

TEST(ZeroPartitionStage3, RandomSubGroupProperties) {
    std::mt19937_64 rng(7);
    for (int trial = 0; trial < 200; ++trial) {
        const int32_t dp = 1 + static_cast<int32_t>(rng() % 8);
        const auto sizes = random_sizes(rng, 1 + rng() % 10, 50);
        const int64_t sgs = static_cast<int64_t>(rng() % 60);
        const Stage3Layout L = make_stage3_layout(sizes, dp, sgs);
        int64_t total = 0;
        for (const auto& p : L.params) total += p.partition_numel;
        size_t next = 0;
        for (size_t g = 0; g < L.sub_groups.size(); ++g) {
            const Stage3SubGroup& sg = L.sub_groups[g];
            EXPECT_EQ(sg.first_param, next);
            ASSERT_GT(sg.end_param, sg.first_param);
            next = sg.end_param;
            int64_t run = 0;
            for (size_t i = sg.first_param; i < sg.end_param; ++i) {
                EXPECT_EQ(L.params[i].sub_group, static_cast<int32_t>(g));
                EXPECT_EQ(L.params[i].sub_group_offset, run);
                run += L.params[i].partition_numel;
                // Nobody before the last member of a sub-group reached the size
                // (unless everything fits in one sub-group).
                if (i + 1 < sg.end_param && sgs < total) EXPECT_LT(run, sgs);
            }
            EXPECT_EQ(run, sg.numel);
            if (sgs < total && g + 1 < L.sub_groups.size()) EXPECT_GE(run, sgs);
        }
        EXPECT_EQ(next, sizes.size());
        EXPECT_EQ(L.rank_numel(), total);
    }
}

TEST(ZeroPartitionStage3, Persistence) {
    // param threshold 10, model threshold 25, sizes 5,20,8,10,3,4:
    // 5 yes (5); 20 too big; 8 yes (13); 10 yes (23); 3 would reach 26 > 25; 4 -> 27.
    EXPECT_EQ(mark_persistent_params({5, 20, 8, 10, 3, 4}, 10, 25),
              (std::vector<uint8_t>{1, 0, 1, 1, 0, 0}));
    // DeepSpeed defaults: 1e5 and sys.maxsize.
    EXPECT_EQ(mark_persistent_params({100000, 100001, 0, 7}, 100000, INT64_MAX),
              (std::vector<uint8_t>{1, 0, 1, 1}));
    // The model check comes first: a large param that would overflow the model
    // threshold is skipped, a later small one still fits.
    EXPECT_EQ(mark_persistent_params({6, 6, 3}, 10, 10), (std::vector<uint8_t>{1, 0, 1}));
    EXPECT_THROW(mark_persistent_params({1}, -1, 10), ds::Error);
}

// ---------------------------------------------------------------------------
// Buckets
// ---------------------------------------------------------------------------

TEST(ZeroPartitionBuckets, FlushAfterExceeding) {
    using V = std::vector<size_t>;
    EXPECT_EQ(bucket_bounds_flush_after_exceeding({3, 3, 3}, 5), (V{0, 2, 3}));
    EXPECT_EQ(bucket_bounds_flush_after_exceeding({3, 3, 3}, 6), (V{0, 3}));  // 6 is not > 6
    EXPECT_EQ(bucket_bounds_flush_after_exceeding({3, 3, 3, 1}, 6), (V{0, 3, 4}));
    EXPECT_EQ(bucket_bounds_flush_after_exceeding({2, 10, 2}, 5), (V{0, 2, 3}));
    EXPECT_EQ(bucket_bounds_flush_after_exceeding({7}, 5), (V{0, 1}));
    EXPECT_EQ(bucket_bounds_flush_after_exceeding({}, 5), (V{0}));
    EXPECT_THROW(bucket_bounds_flush_after_exceeding({1}, 0), ds::Error);
}

TEST(ZeroPartitionBuckets, FlushBeforeOverflow) {
    using V = std::vector<size_t>;
    EXPECT_EQ(bucket_bounds_flush_before_overflow({3, 3, 3}, 6), (V{0, 2, 3}));
    EXPECT_EQ(bucket_bounds_flush_before_overflow({3, 3, 3}, 5), (V{0, 1, 2, 3}));
    EXPECT_EQ(bucket_bounds_flush_before_overflow({2, 10, 2}, 5), (V{0, 1, 2, 3}));  // oversize alone
    EXPECT_EQ(bucket_bounds_flush_before_overflow({10, 2}, 5), (V{0, 1, 2}));  // no empty bucket first
    EXPECT_EQ(bucket_bounds_flush_before_overflow({0, 10, 0, 1}, 5), (V{0, 3, 4}));  // zero-size never flushes
    EXPECT_EQ(bucket_bounds_flush_before_overflow({5, 5}, 5), (V{0, 1, 2}));
    EXPECT_EQ(bucket_bounds_flush_before_overflow({}, 5), (V{0}));
}

TEST(ZeroPartitionBuckets, RandomProperties) {
    std::mt19937_64 rng(99);
    for (int trial = 0; trial < 300; ++trial) {
        const auto sizes = random_sizes(rng, rng() % 15, 12);
        const int64_t cap = 1 + static_cast<int64_t>(rng() % 15);
        auto sum = [&](size_t b, size_t e) {
            int64_t s = 0;
            for (size_t i = b; i < e; ++i) s += sizes[i];
            return s;
        };
        const auto after = bucket_bounds_flush_after_exceeding(sizes, cap);
        ASSERT_EQ(after.front(), 0u);
        ASSERT_EQ(after.back(), sizes.size());
        for (size_t b = 0; b + 1 < after.size(); ++b) {
            ASSERT_LT(after[b], after[b + 1]);
            // Only the last bucket may stay <= cap; each closed one exceeded it
            // with its last tensor and not before.
            if (b + 2 < after.size()) EXPECT_GT(sum(after[b], after[b + 1]), cap);
            EXPECT_LE(sum(after[b], after[b + 1] - 1), cap);
        }
        const auto before = bucket_bounds_flush_before_overflow(sizes, cap);
        ASSERT_EQ(before.front(), 0u);
        ASSERT_EQ(before.back(), sizes.size());
        for (size_t b = 0; b + 1 < before.size(); ++b) {
            ASSERT_LT(before[b], before[b + 1]);
            const int64_t s = sum(before[b], before[b + 1]);
            // Over the cap only as a single oversize tensor (plus zero-size riders).
            if (s > cap) EXPECT_EQ(s, *std::max_element(sizes.begin() + before[b], sizes.begin() + before[b + 1]));
            // The next bucket starts with a tensor that would not have fit.
            if (b + 2 < before.size()) {
                EXPECT_GT(sizes[before[b + 1]], 0);
                EXPECT_GT(s + sizes[before[b + 1]], cap);
            }
        }
    }
}
