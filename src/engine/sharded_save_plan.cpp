#include "engine/sharded_save_plan.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <iterator>
#include <map>
#include <tuple>

#include "core/error.h"

namespace ds {

namespace {

// One rank's copy of a piece.
struct Copy {
    int32_t rank, group;
    const CensusParam* param;
};

struct Logical {
    const CensusParam* first = nullptr;  // the first copy seen (shape, trainable)
    int32_t first_rank = 0;
    uint64_t order = UINT64_MAX;
    std::vector<std::pair<ShardSelection, std::vector<Copy>>> pieces;
};

void check_pieces_tile(const std::string& name, const Shape& full, const std::vector<PlannedPiece>& pieces) {
    if (pieces.size() == 1 && pieces[0].sel.whole()) return;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    const PlannedPiece& last = pieces.back();  // split (a whole piece sorts first)
    for (const PlannedPiece& p : pieces) {
        DS_CHECK(!p.sel.whole() && p.sel.dim == last.sel.dim, DS_ERR_INTERNAL,
                 "sharded checkpoint: parameter '%s' is held as %s on rank %d and as %s on rank %d", name.c_str(),
                 selection_to_string(p.sel).c_str(), p.working_from, selection_to_string(last.sel).c_str(),
                 last.working_from);
        ranges.insert(ranges.end(), p.sel.ranges.begin(), p.sel.ranges.end());
    }
    std::sort(ranges.begin(), ranges.end());
    const int64_t extent = full[static_cast<size_t>(pieces[0].sel.dim)];
    int64_t pos = 0;
    for (const auto& r : ranges) {
        DS_CHECK(r.first == pos, DS_ERR_INTERNAL,
                 "sharded checkpoint: the ranks' pieces of parameter '%s' (shape %s) %s at index %lld of dim %d",
                 name.c_str(), shape_to_string(full).c_str(), r.first < pos ? "overlap" : "leave a gap",
                 static_cast<long long>(pos), pieces[0].sel.dim);
        pos = r.second;
    }
    DS_CHECK(pos == extent, DS_ERR_INTERNAL,
             "sharded checkpoint: the ranks' pieces of parameter '%s' cover %lld of the %lld indices of dim %d",
             name.c_str(), static_cast<long long>(pos), static_cast<long long>(extent), pieces[0].sel.dim);
}

void check_optimizer_tiles(const std::string& name, const PlannedPiece& piece) {
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (const auto& src : piece.optimizer) ranges.insert(ranges.end(), src.second.begin(), src.second.end());
    std::sort(ranges.begin(), ranges.end());
    int64_t pos = 0;
    for (const auto& r : ranges) {
        DS_CHECK(r.first == pos, DS_ERR_INTERNAL,
                 "sharded checkpoint: the optimizer ranges of parameter '%s' (%s) %s at element %lld",
                 name.c_str(), selection_to_string(piece.sel).c_str(), r.first < pos ? "overlap" : "leave a gap",
                 static_cast<long long>(pos));
        pos = r.first + r.second;
    }
    DS_CHECK(pos == piece.numel, DS_ERR_INTERNAL,
             "sharded checkpoint: the optimizer ranges of parameter '%s' (%s) cover %lld of its %lld elements",
             name.c_str(), selection_to_string(piece.sel).c_str(), static_cast<long long>(pos),
             static_cast<long long>(piece.numel));
}

}  // namespace

std::vector<PlannedParam> plan_sharded_save(const std::vector<RankCensus>& census, bool with_optimizer) {
    DS_CHECK(!census.empty(), DS_ERR_INTERNAL, "sharded checkpoint: empty census");
    for (const RankCensus& c : census)
        DS_CHECK(c.state == census[0].state, DS_ERR_INTERNAL,
                 "sharded checkpoint: the ranks' training states differ (a checkpoint holds one): rank %d has %s; "
                 "rank %d has %s",
                 census[0].rank, census[0].state.c_str(), c.rank, c.state.c_str());
    std::map<std::string, Logical> by_name;
    for (const RankCensus& c : census)
        for (const CensusParam& p : c.params) {
            Logical& l = by_name[p.name];
            if (!l.first) {
                l.first = &p;
                l.first_rank = c.rank;
            }
            DS_CHECK(p.full_shape == l.first->full_shape, DS_ERR_INTERNAL,
                     "sharded checkpoint: parameter '%s' has logical shape %s on rank %d and %s on rank %d",
                     p.name.c_str(), shape_to_string(l.first->full_shape).c_str(), l.first_rank,
                     shape_to_string(p.full_shape).c_str(), c.rank);
            DS_CHECK(p.trainable == l.first->trainable, DS_ERR_INTERNAL,
                     "sharded checkpoint: parameter '%s' is %s on rank %d and %s on rank %d", p.name.c_str(),
                     l.first->trainable ? "trainable" : "frozen", l.first_rank, p.trainable ? "trainable" : "frozen",
                     c.rank);
            l.order = std::min(l.order, p.order);
            auto it = std::find_if(l.pieces.begin(), l.pieces.end(), [&](const auto& e) { return e.first == p.sel; });
            if (it == l.pieces.end()) {
                l.pieces.emplace_back(p.sel, std::vector<Copy>{});
                it = std::prev(l.pieces.end());
            }
            it->second.push_back(Copy{c.rank, c.group, &p});
        }
    std::vector<const std::pair<const std::string, Logical>*> order;
    for (const auto& e : by_name) order.push_back(&e);
    std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
        return std::tie(a->second.order, a->first) < std::tie(b->second.order, b->first);
    });

    const int32_t world = static_cast<int32_t>(census.size());
    std::vector<PlannedParam> plan;
    int64_t trainable_index = 0;
    for (const auto* e : order) {
        const Logical& l = e->second;
        PlannedParam pp;
        pp.name = e->first;
        pp.full_shape = l.first->full_shape;
        pp.numel = checked_numel(pp.full_shape, pp.name.c_str());
        pp.trainable = l.first->trainable;
        for (const auto& [sel, copies] : l.pieces) {
            PlannedPiece piece;
            piece.sel = sel;
            piece.numel = copies[0].param->local_numel;
            // The source: the lowest data-parallel group holding the piece.
            int32_t group = INT32_MAX;
            for (const Copy& c : copies) group = std::min(group, c.group);
            piece.working_from = INT32_MAX;
            for (const Copy& c : copies) {
                if (c.group != group) continue;
                piece.working_from = std::min(piece.working_from, c.rank);
                if (!c.param->held.empty()) piece.optimizer.push_back({c.rank, c.param->held});
            }
            std::sort(piece.optimizer.begin(), piece.optimizer.end());
            if (with_optimizer && pp.trainable && piece.numel > 0) check_optimizer_tiles(pp.name, piece);
            pp.pieces.push_back(std::move(piece));
        }
        std::sort(pp.pieces.begin(), pp.pieces.end(), [](const PlannedPiece& a, const PlannedPiece& b) {
            return a.sel.ranges < b.sel.ranges;
        });
        check_pieces_tile(pp.name, pp.full_shape, pp.pieces);
        if (with_optimizer && pp.trainable && pp.numel > 0) pp.writer = static_cast<int32_t>(trainable_index++ % world);
        plan.push_back(std::move(pp));
    }
    return plan;
}

}  // namespace ds
