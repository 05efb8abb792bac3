#include "engine/shard_census.h"

#include <algorithm>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/engine_model.h"
#include "engine/wire_codec.h"

namespace ds {

namespace {

constexpr const char* kWhat = "sharded checkpoint census";

void put_shape(std::string& out, const Shape& s) {
    wire::put_u64(out, s.size());
    for (int64_t d : s) wire::put_i64(out, d);
}
Shape get_shape(wire::Reader& in) {
    Shape s(in.u64());
    for (int64_t& d : s) d = in.i64();
    return s;
}

std::string encode(const RankCensus& c) {
    std::string out;
    wire::put_i64(out, c.rank);
    wire::put_i64(out, c.group);
    wire::put_str(out, c.state);
    wire::put_u64(out, c.params.size());
    for (const CensusParam& p : c.params) {
        wire::put_str(out, p.name);
        put_shape(out, p.full_shape);
        wire::put_i64(out, p.sel.dim);
        wire::put_u64(out, p.sel.ranges.size());
        for (const auto& r : p.sel.ranges) {
            wire::put_i64(out, r.first);
            wire::put_i64(out, r.second);
        }
        wire::put_u64(out, p.trainable ? 1 : 0);
        wire::put_u64(out, p.order);
        wire::put_i64(out, p.local_numel);
        wire::put_u64(out, p.held.size());
        for (const auto& h : p.held) {
            wire::put_i64(out, h.first);
            wire::put_i64(out, h.second);
        }
    }
    return out;
}

RankCensus decode(const std::string& blob) {
    wire::Reader in(blob, kWhat);
    RankCensus c;
    c.rank = static_cast<int32_t>(in.i64());
    c.group = static_cast<int32_t>(in.i64());
    c.state = in.str();
    c.params.resize(in.u64());
    for (CensusParam& p : c.params) {
        p.name = in.str();
        p.full_shape = get_shape(in);
        p.sel.dim = static_cast<int32_t>(in.i64());
        p.sel.ranges.resize(in.u64());
        for (auto& r : p.sel.ranges) {
            r.first = in.i64();
            r.second = in.i64();
        }
        p.trainable = in.u64() != 0;
        p.order = in.u64();
        p.local_numel = in.i64();
        p.held.resize(in.u64());
        for (auto& h : p.held) {
            h.first = in.i64();
            h.second = in.i64();
        }
    }
    return c;
}

}  // namespace

std::string training_state_text(const Engine& e) {
    const Counters& k = e.counters();
    const ckpt::LossScalerRecord s = e.scaler().state();
    std::string text = format(
        "global_steps %lld, global_samples %lld, micro_steps %lld, skipped_steps %lld, optimizer steps %lld, "
        "lr %.17g, betas (%.17g, %.17g), loss scale %.17g (iter %lld, last overflow %lld, hysteresis %lld)",
        static_cast<long long>(k.global_steps), static_cast<long long>(k.global_samples),
        static_cast<long long>(k.micro_steps), static_cast<long long>(k.skipped_steps),
        static_cast<long long>(k.optimizer_steps), e.lr(), e.beta1(), e.beta2(), s.cur_scale,
        static_cast<long long>(s.cur_iter), static_cast<long long>(s.last_overflow_iter),
        static_cast<long long>(s.cur_hysteresis));
    if (const sched::LrScheduler* sc = e.scheduler())
        text += format(", schedule index %lld", static_cast<long long>(sc->last_batch_iteration()));
    if (const ModelBinding* b = e.model_binding()) text += ", dropout stream " + b->stream_state_json();
    return text;
}

std::vector<RankCensus> take_census(Engine& e, const ShardLayout& layout, bool with_holdings) {
    comm::Communicator& world = layout.world();
    RankCensus mine;
    mine.rank = world.rank();
    // The data-parallel group: the ranks of the engine's own communicator.
    const int32_t me = world.rank();
    std::vector<int32_t> members(static_cast<size_t>(e.comm().size()), me);
    if (e.comm().size() > 1) e.comm().allgather(&me, members.data(), 1, DType::I32);
    mine.group = *std::min_element(members.begin(), members.end());
    mine.state = training_state_text(e);
    zero::Strategy& z = e.strategy();
    const bool holds = with_holdings && e.optimizer() != nullptr && z.writes_optimizer_file();
    for (Param& p : e.params().all()) {
        const ShardedParam* sp = layout.find(p.name);
        DS_CHECK(sp != nullptr, DS_ERR_INTERNAL, "parameter '%s' is not in this engine's shard layout",
                 p.name.c_str());
        CensusParam c;
        c.name = p.name;
        c.full_shape = sp->full_shape;
        c.sel = sp->sel;
        c.trainable = p.trainable;
        c.order = sp->order;
        c.local_numel = p.numel;
        if (holds && p.trainable)
            for (const zero::OwnedRange& r : z.holding(p).ranges) c.held.push_back({r.param_offset, r.length});
        mine.params.push_back(std::move(c));
    }
    std::vector<RankCensus> all;
    for (const std::string& blob : wire::allgather_records(world, encode(mine))) all.push_back(decode(blob));
    return all;
}

}  // namespace ds
