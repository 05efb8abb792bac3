// The pieces of sharded checkpoints that need no ranks (engine/shard_layout.h,
// engine/sharded_save_plan.h): the local <-> full index mapping of a
// selection, against an element-by-element enumeration written here; and
// the save plan from a hand-made census: which copy of a replicated piece is
// the source, who writes, the order, and every inconsistency refused naming
// the parameter and ranks.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/shard_layout.h"
#include "engine/sharded_save_plan.h"

namespace {

using ds::Shape;
using ds::ShardSelection;

// Local flat index -> full flat index by enumerating the selected elements
// in the local tensor's row-major order.
std::vector<int64_t> enumerate(const Shape& full, const ShardSelection& s) {
    std::vector<int64_t> along;  // the selected indices of dim s.dim, in local order
    for (const auto& r : s.ranges)
        for (int64_t i = r.first; i < r.second; ++i) along.push_back(i);
    const size_t d = static_cast<size_t>(s.dim);
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < d; ++i) outer *= full[i];
    for (size_t i = d + 1; i < full.size(); ++i) inner *= full[i];
    std::vector<int64_t> out;
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t j : along)
            for (int64_t k = 0; k < inner; ++k) out.push_back((o * full[d] + j) * inner + k);
    return out;
}

void expect_runs_match(const Shape& full, const ShardSelection& s) {
    SCOPED_TRACE(ds::shape_to_string(full) + " " + ds::selection_to_string(s));
    const std::vector<int64_t> want = enumerate(full, s);
    const int64_t n = static_cast<int64_t>(want.size());
    EXPECT_EQ(ds::checked_numel(ds::selected_shape(full, s, "p"), "p"), n);
    // every sub-range of the local tensor, including empty ones and single elements
    for (int64_t b = 0; b <= n; b += 3)
        for (int64_t e = b; e <= n; e += 5) {
            int64_t next = b;
            bool ok = true;
            ds::for_each_run(full, s, b, e, [&](int64_t l, int64_t f, int64_t count) {
                ok = ok && l == next && count > 0;
                for (int64_t i = 0; i < count; ++i) ok = ok && want[static_cast<size_t>(l + i)] == f + i;
                next = l + count;
            });
            EXPECT_TRUE(ok && next == e) << "local [" << b << ", " << e << ")";
        }
}

TEST(ShardLayout, RunsMapLocalElementsToTheFullTensor) {
    expect_runs_match({6, 4}, {0, {{1, 3}, {4, 6}}});          // a column-parallel weight's blocks
    expect_runs_match({12, 5}, {0, {{0, 2}, {4, 6}, {8, 10}}});  // the fused q, k, v of rank 0 of 2
    expect_runs_match({12}, {0, {{2, 4}, {6, 8}, {10, 12}}});    // its bias
    expect_runs_match({5, 8}, {1, {{2, 6}}});                    // a row-parallel weight
    expect_runs_match({3, 6, 5}, {2, {{0, 1}, {3, 5}}});         // the last dim
    expect_runs_match({3, 6, 5}, {1, {{4, 6}, {0, 2}}});         // ranges out of order
    int64_t calls = 0;
    ds::for_each_run({4, 3}, ShardSelection{}, 2, 9, [&](int64_t l, int64_t f, int64_t count) {
        ++calls;
        EXPECT_EQ(l, 2);
        EXPECT_EQ(f, 2);
        EXPECT_EQ(count, 7);
    });
    EXPECT_EQ(calls, 1);  // whole: one run
}

TEST(ShardLayout, SelectionsOutsideTheParameterAreInternalErrors) {
    try {
        ds::selected_shape({4, 4}, {0, {{2, 5}}}, "h.0.mlp.c_fc.weight");
        FAIL();
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_INTERNAL);
        EXPECT_NE(std::string(e.what()).find("h.0.mlp.c_fc.weight"), std::string::npos) << e.what();
    }
    EXPECT_THROW(ds::selected_shape({4, 4}, {2, {{0, 1}}}, "p"), ds::Error);
    EXPECT_EQ(ds::selected_shape({4, 6}, {1, {{0, 2}, {4, 5}}}, "p"), (Shape{4, 3}));
}

// ---- the save plan ----

ds::CensusParam param(const std::string& name, Shape full, ShardSelection sel, uint64_t order,
                      std::vector<std::pair<int64_t, int64_t>> held = {}) {
    ds::CensusParam p;
    p.name = name;
    p.full_shape = full;
    p.sel = sel;
    p.trainable = true;
    p.order = order;
    p.local_numel = ds::checked_numel(ds::selected_shape(full, sel, name), name.c_str());
    p.held = std::move(held);
    return p;
}

ds::RankCensus rank(int32_t r, int32_t group, std::vector<ds::CensusParam> params) {
    ds::RankCensus c;
    c.rank = r;
    c.group = group;
    c.state = "global_steps 3";
    c.params = std::move(params);
    return c;
}

std::string refusal(const std::vector<ds::RankCensus>& census) {
    try {
        ds::plan_sharded_save(census, true);
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_INTERNAL);
        return e.what();
    }
    return "(no error)";
}

// 4 ranks: tp 2 (ranks r and r+1 of a replica) x 2 data-parallel replicas at
// ZeRO-1 ({0, 2} and {1, 3} are the data groups). "w" is split in rows, "ln"
// replicated, "wte" replicated and registered first.
std::vector<ds::RankCensus> tp2_data2() {
    std::vector<ds::RankCensus> c;
    for (int r = 0; r < 4; ++r) {
        const int tp = r % 2, d = r / 2;
        const ShardSelection rows{0, {{tp * 2, tp * 2 + 2}}};
        // ZeRO-1 splits each data group's 8 + 3 + 6 local elements between its two ranks
        std::vector<std::pair<int64_t, int64_t>> w = d == 0 ? std::vector<std::pair<int64_t, int64_t>>{{0, 5}}
                                                             : std::vector<std::pair<int64_t, int64_t>>{{5, 3}};
        std::vector<std::pair<int64_t, int64_t>> ln = d == 0 ? std::vector<std::pair<int64_t, int64_t>>{}
                                                              : std::vector<std::pair<int64_t, int64_t>>{{0, 3}};
        c.push_back(rank(r, tp, {param("wte", {2, 3}, {}, (1ull << 32) | 0, d == 0 ? decltype(w){{0, 6}} : decltype(w){}),
                                 param("w", {4, 4}, rows, (5ull << 32) | 0, w), param("ln", {3}, {}, (4ull << 32) | 1, ln)}));
    }
    return c;
}

TEST(ShardPlan, OneSourcePerPieceOneWriterPerParameterInRegistrationOrder) {
    const std::vector<ds::PlannedParam> plan = ds::plan_sharded_save(tp2_data2(), true);
    ASSERT_EQ(plan.size(), 3u);
    EXPECT_EQ(plan[0].name, "wte");  // by module id, then position
    EXPECT_EQ(plan[1].name, "ln");
    EXPECT_EQ(plan[2].name, "w");
    // replicated on both tp ranks: the lowest data group (0: ranks 0 and 2) is the source
    ASSERT_EQ(plan[1].pieces.size(), 1u);
    EXPECT_EQ(plan[1].pieces[0].working_from, 0);
    ASSERT_EQ(plan[1].pieces[0].optimizer.size(), 1u);
    EXPECT_EQ(plan[1].pieces[0].optimizer[0].first, 2);  // rank 2 holds ln's state in group 0
    // split: one piece per tp rank, each from its own data group, optimizer ranges from both members
    ASSERT_EQ(plan[2].pieces.size(), 2u);
    EXPECT_EQ(plan[2].full_shape, (Shape{4, 4}));
    EXPECT_EQ(plan[2].numel, 16);
    EXPECT_EQ(plan[2].pieces[0].sel.ranges[0].first, 0);
    EXPECT_EQ(plan[2].pieces[0].working_from, 0);
    EXPECT_EQ(plan[2].pieces[1].working_from, 1);
    ASSERT_EQ(plan[2].pieces[1].optimizer.size(), 2u);
    EXPECT_EQ(plan[2].pieces[1].optimizer[0].first, 1);
    EXPECT_EQ(plan[2].pieces[1].optimizer[1].first, 3);
    // the k-th trainable parameter is written by rank k mod 4
    EXPECT_EQ(plan[0].writer, 0);
    EXPECT_EQ(plan[1].writer, 1);
    EXPECT_EQ(plan[2].writer, 2);
    // without optimizer state: no writers, no range checks
    for (const ds::PlannedParam& p : ds::plan_sharded_save(tp2_data2(), false)) EXPECT_EQ(p.writer, -1);
}

TEST(ShardPlan, InconsistentCensusesAreRefusedNamingParameterAndRanks) {
    auto c = tp2_data2();
    c[3].state = "global_steps 4";
    std::string m = refusal(c);
    EXPECT_NE(m.find("rank 3 has global_steps 4"), std::string::npos) << m;

    c = tp2_data2();
    c[1].params[1].full_shape = {4, 5};
    c[1].params[1].local_numel = 10;
    m = refusal(c);
    EXPECT_NE(m.find("'w' has logical shape [4, 4] on rank 0 and [4, 5] on rank 1"), std::string::npos) << m;

    c = tp2_data2();
    c[2].params[2].trainable = false;
    m = refusal(c);
    EXPECT_NE(m.find("'ln' is trainable on rank 0 and frozen on rank 2"), std::string::npos) << m;

    c = tp2_data2();  // tp rank 1's rows overlap rank 0's
    for (int r : {1, 3}) c[static_cast<size_t>(r)].params[1].sel = {0, {{1, 3}}};
    m = refusal(c);
    EXPECT_NE(m.find("pieces of parameter 'w' (shape [4, 4]) overlap"), std::string::npos) << m;

    c = tp2_data2();  // ... or leave rows 3 uncovered
    for (int r : {1, 3}) c[static_cast<size_t>(r)].params[1].sel = {0, {{2, 3}}};
    m = refusal(c);
    EXPECT_NE(m.find("'w' cover 3 of the 4 indices of dim 0"), std::string::npos) << m;

    c = tp2_data2();  // whole copies next to split ones
    for (int r : {1, 3}) {
        ds::CensusParam& w = c[static_cast<size_t>(r)].params[1];
        w.sel = {};
        w.local_numel = 16;
        w.held = r == 1 ? decltype(w.held){{0, 8}} : decltype(w.held){{8, 8}};
    }
    m = refusal(c);
    EXPECT_NE(m.find("'w' is held as whole on rank 1 and as dim 0 [0, 2) on rank 0"), std::string::npos) << m;

    c = tp2_data2();  // ZeRO ranges with a gap
    c[3].params[1].held = {{6, 2}};
    m = refusal(c);
    EXPECT_NE(m.find("optimizer ranges of parameter 'w' (dim 0 [2, 4)) leave a gap at element 5"), std::string::npos)
        << m;
}

}  // namespace
