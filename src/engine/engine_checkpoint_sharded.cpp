// Checkpoints of sharded engines (a pipeline stage, a tensor- or
// expert-parallel shard: Engine::shard_layout): the files describe the
// LOGICAL model, as one process holding it whole would write them
// (docs/CHECKPOINTS.md, "Pipeline, tensor- and expert-parallel engines";
// DeepSpeed's universal checkpoint, DEEPSPEED_SEMANTICS.md §7.6, is the same
// idea: full unsplit tensors per parameter that any layout loads).
//
// Saving moves each logical parameter's pieces to the rank that writes it
// (sharded_save_plan.h) with blocking send/recv over the layout's world.
// Every rank walks the same plan in the same order and takes part only in
// the transfers naming it, so the earliest unfinished transfer always has
// both of its ranks at it: no cycle of waits can form. A rank whose write
// fails keeps moving data (skipping its writes) so the others finish; the
// caller's agreement then fails the save everywhere.
//
// Loading extracts each local parameter's selection from the full tensors
// of the verified, staged checkpoint (any fragmentation of the optimizer
// state: one plain ZeRO-2 run's files load into a tensor-parallel engine).
#include <algorithm>
#include <cstring>
#include <map>

#include "ckpt/safetensors.h"
#include "core/error.h"
#include "engine/engine_checkpoint.h"
#include "engine/shard_census.h"
#include "engine/wire_codec.h"

namespace ds {

namespace {

constexpr int kTag = 0x5c;                        // the transfers' tag on the layout's world
constexpr size_t kChunkBytes = size_t{1} << 26;  // one message at most: 64 MiB

class Mover {
public:
    explicit Mover(comm::Communicator& world) : w_(world), me_(world.rank()) {}
    int me() const { return me_; }
    // `from` sends n bytes at `src`, `to` receives them at `dst`; every rank
    // calls this for every transfer, in the same order.
    void move(int from, int to, const void* src, void* dst, size_t n) {
        if (n == 0) return;
        if (from == to) {
            if (me_ == from) std::memcpy(dst, src, n);
            return;
        }
        for (size_t off = 0; off < n; off += kChunkBytes) {
            const size_t c = std::min(kChunkBytes, n - off);
            if (me_ == from) w_.send(static_cast<const uint8_t*>(src) + off, c, DType::U8, to, kTag);
            else if (me_ == to) w_.recv(static_cast<uint8_t*>(dst) + off, c, DType::U8, from, kTag);
        }
    }

private:
    comm::Communicator& w_;
    int me_;
};

// This rank's first failure to write; it goes on moving data so that the
// other ranks finish the plan, and throws at the end.
class FirstFailure {
public:
    template <class F>
    void attempt(F&& f) {
        if (failed_) return;
        try {
            f();
        } catch (const Error& e) {
            failed_ = e;
        }
    }
    bool failed() const { return failed_.has_value(); }
    void rethrow() const {
        if (failed_) throw *failed_;
    }

private:
    std::optional<Error> failed_;
};

// The whole working weights of `pp` on rank `to`, into `full` (numel x es
// bytes; nullptr on the other ranks).
void gather_working(Engine& e, Mover& mv, const PlannedParam& pp, int to, uint8_t* full) {
    const size_t es = dtype_size(e.working_dtype());
    std::vector<uint8_t> piece;
    for (const PlannedPiece& pc : pp.pieces) {
        const void* src = nullptr;
        if (mv.me() == pc.working_from) src = e.params().get(pp.name.c_str()).working.data_ptr();
        uint8_t* dst = nullptr;
        if (mv.me() == to) {
            if (pc.sel.whole()) {
                dst = full;
            } else {
                piece.resize(static_cast<size_t>(pc.numel) * es);
                dst = piece.data();
            }
        }
        mv.move(pc.working_from, to, src, dst, static_cast<size_t>(pc.numel) * es);
        if (mv.me() == to && !pc.sel.whole())
            for_each_run(pp.full_shape, pc.sel, 0, pc.numel, [&](int64_t l, int64_t f, int64_t n) {
                std::memcpy(full + f * es, dst + l * es, static_cast<size_t>(n) * es);
            });
    }
}

// Tensor `t` (0: the fp32 master, 1 + i: optimizer state i; `es` bytes per
// element) of `pp`, whole, on its writer, into `full`.
void gather_optimizer(Engine& e, Mover& mv, const PlannedParam& pp, size_t t, size_t es, uint8_t* full,
                      FirstFailure& failure) {
    const int64_t chunk = static_cast<int64_t>(kChunkBytes / es);
    std::vector<uint8_t> bounce, recv;
    for (const PlannedPiece& pc : pp.pieces) {
        for (const auto& [rank, ranges] : pc.optimizer) {
            zero::Holding h;
            if (mv.me() == rank) h = e.strategy().holding(e.params().get(pp.name.c_str()));
            for (size_t j = 0; j < ranges.size(); ++j) {
                const auto [off, len] = ranges[j];
                for (int64_t c = 0; c < len; c += chunk) {
                    const int64_t n = std::min(chunk, len - c);
                    const uint8_t* src = nullptr;
                    if (mv.me() == rank) {
                        const zero::OwnedRange& r = h.ranges.at(j);
                        if (h.read) {  // NVMe optimizer state: read through the strategy
                            bounce.assign(static_cast<size_t>(n) * es, 0);
                            failure.attempt([&] { h.read(t, r.dst + c, n, bounce.data()); });
                            src = bounce.data();
                        } else if (t == 0) {
                            src = reinterpret_cast<const uint8_t*>(h.master + r.dst + c);
                        } else {
                            src = static_cast<const uint8_t*>(h.states[t - 1].data_ptr()) + (r.dst + c) * es;
                        }
                    }
                    uint8_t* dst = nullptr;
                    if (mv.me() == pp.writer) {
                        recv.resize(static_cast<size_t>(n) * es);
                        dst = recv.data();
                    }
                    mv.move(rank, pp.writer, src, dst, static_cast<size_t>(n) * es);
                    if (mv.me() == pp.writer)
                        for_each_run(pp.full_shape, pc.sel, off + c, off + c + n, [&](int64_t l, int64_t f, int64_t k) {
                            std::memcpy(full + f * es, dst + (l - off - c) * es, static_cast<size_t>(k) * es);
                        });
                }
            }
        }
    }
}

// Elements [full, full + count) of tensor `which` of a parameter, from the
// saved fragments (sorted by offset, tiling it), into `dst`.
void copy_from_fragments(const std::vector<zero::SavedFragment>& frags, int which, size_t es, int64_t full,
                         int64_t count, uint8_t* dst) {
    auto it = std::upper_bound(frags.begin(), frags.end(), full,
                               [](int64_t x, const zero::SavedFragment& g) { return x < g.offset + g.numel; });
    while (count > 0) {
        DS_CHECK(it != frags.end() && it->offset <= full, DS_ERR_INTERNAL,
                 "staged fragments do not cover element %lld", static_cast<long long>(full));
        const uint8_t* src = which < 0 ? it->master : it->states[static_cast<size_t>(which)];
        const int64_t n = std::min(count, it->offset + it->numel - full);
        std::memcpy(dst, src + (full - it->offset) * static_cast<int64_t>(es), static_cast<size_t>(n) * es);
        dst += n * static_cast<int64_t>(es);
        full += n;
        count -= n;
        ++it;
    }
}

}  // namespace

namespace ckpt_io {

std::vector<PlannedParam> plan_sharded(Engine& e, bool with_optimizer) {
    const std::vector<RankCensus> census = take_census(e, *e.shard_layout(), with_optimizer);
    return plan_sharded_save(census, with_optimizer && e.optimizer() != nullptr);
}

void describe_logical(ckpt::Manifest& m, const std::vector<PlannedParam>& plan, int32_t world) {
    m.world_size = world;
    m.params.clear();
    for (const PlannedParam& p : plan)
        m.params.push_back(ckpt::ManifestParam{p.name, p.full_shape, p.numel, m.working_dtype, p.trainable});
}

ShardedFiles write_sharded_files(Engine& e, const std::vector<PlannedParam>& plan, const std::string& dir) {
    Mover mv(e.shard_layout()->world());
    const int me = mv.me();
    const DType wd = e.working_dtype();
    const size_t wes = dtype_size(wd);
    const optim::Optimizer* opt = e.optimizer();
    const std::vector<std::string> names = opt ? opt->state_names() : std::vector<std::string>{};
    const DType sd = opt ? dtype_from_kernel(opt->state_dtype()) : DType::F32;
    FirstFailure failure;

    std::optional<ckpt::SafetensorsWriter> model;
    if (me == 0)
        failure.attempt([&] {
            std::vector<ckpt::StTensorSpec> specs;
            for (const PlannedParam& p : plan) specs.push_back({p.name, wd, p.full_shape});
            model.emplace(ckpt::join_path(dir, ckpt::kModelFile), specs,
                          std::map<std::string, std::string>{{"format", "pt"}});
        });
    ckpt::RankPartition part;
    part.rank = me;
    part.file = ckpt::optim_file_name(me);
    std::vector<ckpt::StTensorSpec> ospecs;
    for (const PlannedParam& p : plan) {
        if (p.writer != me) continue;
        part.fragments.push_back({p.name, 0, p.numel});
        ospecs.push_back({ckpt::fragment_key(p.name, 0, "master"), DType::F32, {p.numel}});
        for (const std::string& n : names) ospecs.push_back({ckpt::fragment_key(p.name, 0, n), sd, {p.numel}});
    }
    std::optional<ckpt::SafetensorsWriter> optim;
    if (!part.fragments.empty())
        failure.attempt([&] {
            optim.emplace(ckpt::join_path(dir, part.file), ospecs,
                          std::map<std::string, std::string>{{"rank", std::to_string(me)}});
        });

    std::vector<uint8_t> full;
    for (const PlannedParam& p : plan) {
        if (me == 0) full.resize(static_cast<size_t>(p.numel) * wes);
        gather_working(e, mv, p, 0, full.data());
        if (me == 0 && model) failure.attempt([&] { model->write(full.data(), full.size()); });
        if (p.writer < 0) continue;
        for (size_t t = 0; t <= names.size(); ++t) {
            const size_t es = t == 0 ? sizeof(float) : dtype_size(sd);
            if (me == p.writer) full.resize(static_cast<size_t>(p.numel) * es);
            gather_optimizer(e, mv, p, t, es, full.data(), failure);
            if (me == p.writer && optim) failure.attempt([&] { optim->write(full.data(), full.size()); });
        }
    }
    ShardedFiles out;
    if (model)
        failure.attempt([&] {
            const ckpt::FileSummary s = model->finish();
            out.model = ckpt::ManifestFile{ckpt::kModelFile, s.size, s.crc32c};
        });
    if (optim)
        failure.attempt([&] {
            const ckpt::FileSummary s = optim->finish();
            out.optim = std::make_pair(part, ckpt::ManifestFile{part.file, s.size, s.crc32c});
        });
    failure.rethrow();
    return out;
}

std::optional<ckpt::ManifestFile> write_sharded_weights(Engine& e, const std::vector<PlannedParam>& plan,
                                                        const std::string& path, const std::string& name,
                                                        bool exclude_frozen) {
    Mover mv(e.shard_layout()->world());
    const DType wd = e.working_dtype();
    FirstFailure failure;
    std::optional<ckpt::SafetensorsWriter> f;
    if (mv.me() == 0)
        failure.attempt([&] {
            std::vector<ckpt::StTensorSpec> specs;
            for (const PlannedParam& p : plan)
                if (p.trainable || !exclude_frozen) specs.push_back({p.name, wd, p.full_shape});
            f.emplace(path, specs, std::map<std::string, std::string>{{"format", "pt"}});
        });
    std::vector<uint8_t> full;
    for (const PlannedParam& p : plan) {
        if (!p.trainable && exclude_frozen) continue;  // alike on every rank
        if (mv.me() == 0) full.resize(static_cast<size_t>(p.numel) * dtype_size(wd));
        gather_working(e, mv, p, 0, full.data());
        if (f) failure.attempt([&] { f->write(full.data(), full.size()); });
    }
    std::optional<ckpt::ManifestFile> out;
    if (f)
        failure.attempt([&] {
            const ckpt::FileSummary s = f->finish();
            out = ckpt::ManifestFile{name, s.size, s.crc32c};
        });
    failure.rethrow();
    return out;
}

std::unordered_set<std::string> logical_names(Engine& e) {
    std::string mine;
    for (const Param& p : e.params().all()) wire::put_str(mine, p.name);
    std::unordered_set<std::string> names;
    for (const std::string& blob : wire::allgather_records(e.shard_layout()->world(), mine)) {
        wire::Reader in(blob, "parameter names");
        while (!in.done()) names.insert(in.str());
    }
    return names;
}

void stage_selections(Engine& e, StagedCheckpoint& s) {
    const ShardLayout& layout = *e.shard_layout();
    const size_t wes = dtype_size(e.working_dtype());
    const size_t ses = s.load_optimizer ? ckpt::st_dtype_size(s.manifest.optimizer->state_dtype) : 0;
    for (StagedCheckpoint::Item& it : s.items) {
        const ShardedParam* sp = layout.find(it.param->name);
        DS_CHECK(sp != nullptr, DS_ERR_INTERNAL, "parameter '%s' is not in this engine's shard layout",
                 it.param->name.c_str());
        if (sp->sel.whole()) continue;  // the checkpoint's tensor is this rank's
        const int64_t n = it.param->numel;
        std::vector<uint8_t>& w = s.staging.emplace_back(static_cast<size_t>(n) * wes);
        for_each_run(sp->full_shape, sp->sel, 0, n, [&](int64_t l, int64_t f, int64_t k) {
            std::memcpy(w.data() + l * wes, it.working + f * wes, static_cast<size_t>(k) * wes);
        });
        it.working = w.data();
        if (it.frags.empty()) continue;
        // One fragment holding exactly the local selection, gathered from
        // however the saved fragments split the logical parameter.
        zero::SavedFragment local;
        local.numel = n;
        const size_t n_states = it.frags.front().states.size();
        for (int which = -1; which < static_cast<int>(n_states); ++which) {
            const size_t es = which < 0 ? sizeof(float) : ses;
            std::vector<uint8_t>& buf = s.staging.emplace_back(static_cast<size_t>(n) * es);
            for_each_run(sp->full_shape, sp->sel, 0, n, [&](int64_t l, int64_t f, int64_t k) {
                copy_from_fragments(it.frags, which, es, f, k, buf.data() + l * static_cast<int64_t>(es));
            });
            if (which < 0) local.master = buf.data();
            else local.states.push_back(buf.data());
        }
        it.frags = {std::move(local)};
    }
}

}  // namespace ckpt_io

}  // namespace ds
