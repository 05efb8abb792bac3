// Saving: ds_save_checkpoint (the commit protocol of ckpt/commit.h) and
// ds_save_16bit_model, plus the accumulation-window check.
#include <cstring>
#include <map>
#include <optional>

#include "ckpt/commit.h"
#include "ckpt/output_guard.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "engine/engine_checkpoint.h"
#include "engine/engine_model.h"
#include "engine/rank_agreement.h"
#include "engine/shard_layout.h"

namespace ds {

comm::Communicator& Engine::checkpoint_comm() const { return shard_layout_ ? shard_layout_->world() : *comm_; }

namespace {
// Sharded engines save the logical model's weights whole: they never hold
// ZeRO-3 chunks (their create functions refuse stage 3; checked here too,
// before any rank starts moving data).
void require_whole_weights(const Engine& e, const char* call) {
    DS_CHECK(!e.shard_layout() || e.zero_stage() < 3, DS_ERR_UNSUPPORTED,
             "%s: a sharded engine (pipeline stage, tensor- or expert-parallel shard) at ZeRO stage 3", call);
}
}  // namespace

void Engine::require_window_boundary(const char* call) const {
    DS_CHECK(!backward_since_step_, DS_ERR_INVALID_STATE,
             "%s inside a gradient accumulation window: ds_backward was called since the last ds_step "
             "(call ds_step first)",
             call);
    if (config_.managed_gradient_accumulation && forced_boundary_ < 0)
        DS_CHECK(counters_.micro_steps % config_.gradient_accumulation_steps == 0, DS_ERR_INVALID_STATE,
                 "%s inside a gradient accumulation window: micro_steps = %lld is not a multiple of "
                 "gradient_accumulation_steps = %lld (finish the window with ds_step first)",
                 call, static_cast<long long>(counters_.micro_steps),
                 static_cast<long long>(config_.gradient_accumulation_steps));
    DS_CHECK(!strategy_->gradients_pending(), DS_ERR_INVALID_STATE,
             "%s inside a gradient accumulation window: reduced gradients are waiting for ds_step", call);
    for (const Param& p : params_.all())
        DS_CHECK(!p.trainable || p.grad_stale, DS_ERR_INVALID_STATE,
                 "%s inside a gradient accumulation window: parameter '%s' holds gradients no optimizer "
                 "step has applied yet (finish the window with ds_backward + ds_step first)",
                 call, p.name.c_str());
}

namespace ckpt_io {

ckpt::Manifest describe(const Engine& e) {
    ckpt::Manifest m;
    m.library_version = format("%d.%d.%d", DS_VERSION_MAJOR, DS_VERSION_MINOR, DS_VERSION_PATCH);
    m.world_size = e.world_size();
    m.zero_stage = e.zero_stage();
    m.working_dtype = ckpt::st_dtype_name(e.working_dtype());
    m.grad_accum_dtype = ckpt::st_dtype_name(e.grad_dtype());
    const Counters& k = e.counters();
    m.global_steps = k.global_steps;
    m.global_samples = k.global_samples;
    m.micro_steps = k.micro_steps;
    m.skipped_steps = k.skipped_steps;
    if (const optim::Optimizer* opt = e.optimizer()) {
        ckpt::OptimizerRecord o;
        o.type = opt->name();
        o.step = k.optimizer_steps;
        o.state_names = opt->state_names();
        o.state_dtype = ckpt::st_dtype_name(dtype_from_kernel(opt->state_dtype()));
        o.lr = e.lr();
        o.beta1 = e.beta1();
        o.beta2 = e.beta2();
        m.optimizer = o;
    }
    if (const sched::LrScheduler* sc = e.scheduler())
        m.scheduler = ckpt::SchedulerRecord{sc->name(), sc->last_batch_iteration()};
    m.loss_scaler_dynamic = e.scaler().dynamic();
    m.loss_scaler = e.scaler().state();
    // The built-in model's dropout stream (docs/CHECKPOINTS.md, "rng_states").
    m.rng_states.clear();
    if (const ModelBinding* b = e.model_binding()) m.rng_states.push_back(b->stream_state_json());
    for (const Param& p : e.params().all())
        m.params.push_back(ckpt::ManifestParam{p.name, p.shape, p.numel, m.working_dtype, p.trainable});
    m.config_json = ckpt::compact_json(e.resolved_config_json(), "resolved config");
    return m;
}

std::optional<ckpt::ManifestFile> write_model_file(Engine& e, const std::string& dir) {
    return write_weights(e, ckpt::join_path(dir, ckpt::kModelFile), ckpt::kModelFile);
}

std::optional<ckpt::ManifestFile> write_weights(Engine& e, const std::string& path, const std::string& name,
                                                bool exclude_frozen) {
    const bool writer = e.rank() == 0;  // the working weights are the same on every rank; rank 0 writes
    std::vector<ckpt::StTensorSpec> specs;
    for (const Param& p : e.params().all())
        if (p.trainable || !exclude_frozen) specs.push_back({p.name, e.working_dtype(), p.shape});
    std::optional<ckpt::SafetensorsWriter> f;
    if (writer) f.emplace(path, specs, std::map<std::string, std::string>{{"format", "pt"}});
    // A write failure on rank 0 must not stop it from taking part in the
    // remaining ZeRO-3 gathers (the other ranks would wait for it).
    std::optional<Error> failed;
    auto write = [&](const Tensor& t) {
        if (!writer || failed) return;
        try {
            f->write(t.data_ptr(), t.nbytes());
        } catch (const Error& e) {
            failed = e;
        }
    };
    for (Param& p : e.params().all()) {
        if (!p.trainable && exclude_frozen) continue;  // the same on every rank: no rank gathers it
        if (p.working.defined()) {
            write(p.working);
            continue;
        }
        // ZeRO-3, not gathered: every rank takes part in gathering it.
        e.strategy().gather_temporary(p);
        write(p.working);
        e.strategy().drop_temporary(p);
    }
    if (failed) throw *failed;
    if (!writer) return std::nullopt;
    ckpt::FileSummary sum = f->finish();
    return ckpt::ManifestFile{name, sum.size, sum.crc32c};
}

std::optional<std::pair<ckpt::RankPartition, ckpt::ManifestFile>> write_optim_file(Engine& e,
                                                                                      const std::string& dir) {
    const optim::Optimizer* opt = e.optimizer();
    if (!opt) return std::nullopt;
    // Unpartitioned state is the same on every rank: rank 0 writes it.
    zero::Strategy& z = e.strategy();
    if (!z.writes_optimizer_file()) return std::nullopt;
    ckpt::RankPartition part;
    part.rank = e.rank();
    part.file = ckpt::optim_file_name(e.rank());
    const DType sd = dtype_from_kernel(opt->state_dtype());
    const std::vector<std::string> names = opt->state_names();
    struct Piece {
        zero::OwnedRange r;
        size_t holding;  // index in `held`
    };
    std::vector<zero::Holding> held;
    std::vector<Piece> pieces;
    std::vector<ckpt::StTensorSpec> specs;
    for (Param& p : e.params().all()) {
        zero::Holding h = z.holding(p);
        if (h.ranges.empty()) continue;
        for (const zero::OwnedRange& r : h.ranges) {
            part.fragments.push_back({p.name, r.param_offset, r.length});
            pieces.push_back({r, held.size()});
            specs.push_back({ckpt::fragment_key(p.name, r.param_offset, "master"), DType::F32, {r.length}});
            for (const std::string& n : names) specs.push_back({ckpt::fragment_key(p.name, r.param_offset, n), sd, {r.length}});
        }
        held.push_back(std::move(h));
    }
    if (pieces.empty()) return std::nullopt;
    ckpt::SafetensorsWriter f(ckpt::join_path(dir, part.file), specs, {{"rank", std::to_string(e.rank())}});
    const size_t ses = dtype_size(sd);
    std::vector<uint8_t> bounce;  // NVMe optimizer state: streamed in bounded pieces
    for (const Piece& pc : pieces) {
        const zero::Holding& h = held[pc.holding];
        if (h.read) {
            constexpr int64_t kChunk = 1 << 20;  // elements per read
            for (size_t t = 0; t <= names.size(); ++t) {
                const size_t es = t == 0 ? sizeof(float) : ses;
                for (int64_t off = 0; off < pc.r.length; off += kChunk) {
                    const int64_t n = std::min(kChunk, pc.r.length - off);
                    bounce.resize(static_cast<size_t>(n) * es);
                    h.read(t, pc.r.dst + off, n, bounce.data());
                    f.write(bounce.data(), bounce.size());
                }
            }
            continue;
        }
        f.write(h.master + pc.r.dst, static_cast<size_t>(pc.r.length) * sizeof(float));
        for (size_t i = 0; i < names.size(); ++i)
            f.write(static_cast<const char*>(h.states[i].data_ptr()) + pc.r.dst * static_cast<int64_t>(ses),
                    static_cast<size_t>(pc.r.length) * ses);
    }
    ckpt::FileSummary sum = f.finish();
    return std::make_pair(std::move(part), ckpt::ManifestFile{part.file, sum.size, sum.crc32c});
}

}  // namespace ckpt_io

void Engine::save_checkpoint(const char* save_dir, const char* tag, const char* client_state_json) {
    const HostParking on_host(*this, /*write_back=*/false);  // a device-resident engine's buffers
    // Collective: every rank runs the checks that could fail on it alone, then
    // all agree on the call before anything is communicated (rank_agreement.h);
    // a sharded engine's ranks over its layout's world.
    comm::Communicator& cc = checkpoint_comm();
    const int32_t crank = cc.rank(), cworld = cc.size();
    agree::enter(cc, agree::Call::SaveCheckpoint, [&] {
        require_initialized("ds_save_checkpoint");
        require_whole_weights(*this, "ds_save_checkpoint");
        require_window_boundary("ds_save_checkpoint");
        require_state_whole("ds_save_checkpoint");
        DS_CHECK(save_dir[0] != '\0', DS_ERR_INVALID_ARGUMENT, "argument 'save_dir' is empty");
        ckpt::check_tag(tag ? std::string(tag) : std::string("global_step0"), "tag");
        if (client_state_json) ckpt::compact_json(client_state_json, "client_state_json");
        return agree::CallArgs{};
    });
    require_initialized("ds_save_checkpoint");
    require_window_boundary("ds_save_checkpoint");
    DS_CHECK(save_dir[0] != '\0', DS_ERR_INVALID_ARGUMENT, "argument 'save_dir' is empty");
    const std::string t = tag ? std::string(tag) : format("global_step%lld", static_cast<long long>(counters_.global_steps));
    ckpt::check_tag(t, "tag");
    ckpt::Manifest m = ckpt_io::describe(*this);
    m.tag = t;
    if (client_state_json) m.client_state_json = ckpt::compact_json(client_state_json, "client_state_json");
    // checkpoint.tag_validation: every rank must save under the same tag.
    if (cworld > 1 && config_.sections.checkpoint.tag_validation != "IGNORE") {
        uint64_t h = agree::hash_bytes(t.data(), t.size());
        std::vector<uint64_t> all(static_cast<size_t>(cworld));
        cc.allgather(&h, all.data(), 1, DType::I64);
        for (int r = 0; r < cworld; ++r)
            if (all[static_cast<size_t>(r)] != all[0]) {
                if (config_.sections.checkpoint.tag_validation == "FAIL")
                    fail(DS_ERR_INVALID_ARGUMENT, "tag '%s': rank %d saves under a different tag than rank 0 "
                         "(checkpoint.tag_validation = FAIL)", t.c_str(), r);
                DS_LOG(logger_, DS_LOG_WARN, "tag '%s': rank %d saves under a different tag than rank 0", t.c_str(), r);
                break;
            }
    }
    // A sharded engine's files describe the logical model: who sends and
    // writes what is decided alike on every rank from one exchange.
    std::vector<PlannedParam> plan;
    if (shard_layout_) {
        plan = ckpt_io::plan_sharded(*this, /*with_optimizer=*/true);
        ckpt_io::describe_logical(m, plan, cworld);
    }
    // 1. Rank 0 opens the temporary directory and tells the others where it is.
    std::optional<ckpt::TagWriter> w;
    std::string dir;
    Error* err = nullptr;
    Error local(DS_OK, "");
    try {
        if (crank == 0) {
            w.emplace(save_dir, t);
            dir = w->tmp_dir();
        }
    } catch (const Error& e) {
        local = e;
        err = &local;
    }
    agree_across_ranks(cc, "ds_save_checkpoint", err);
    if (cworld > 1) {
        int64_t len = static_cast<int64_t>(dir.size());
        cc.broadcast(&len, 1, DType::I64, 0);
        dir.resize(static_cast<size_t>(len));
        cc.broadcast(dir.data(), static_cast<size_t>(len), DType::U8, 0);
    }
    // 2. Every rank writes its files (the model file is collective at ZeRO-3).
    std::optional<ckpt::ManifestFile> model;
    std::optional<std::pair<ckpt::RankPartition, ckpt::ManifestFile>> optim;
    if (shard_layout_) {
        try {
            ckpt_io::ShardedFiles files = ckpt_io::write_sharded_files(*this, plan, dir);
            model = std::move(files.model);
            optim = std::move(files.optim);
        } catch (const Error& e) {
            local = e;
            err = &local;
        }
    } else {
        try {
            model = ckpt_io::write_model_file(*this, dir);
        } catch (const Error& e) {
            if (!err) {
                local = e;
                err = &local;
            }
        }
        try {
            if (!err) optim = ckpt_io::write_optim_file(*this, dir);
        } catch (const Error& e) {
            local = e;
            err = &local;
        }
    }
    agree_across_ranks(cc, "ds_save_checkpoint", err);
    // 3. Rank 0 gathers every rank's partition and file, writes the manifest, commits.
    std::vector<std::pair<ckpt::RankPartition, ckpt::ManifestFile>> parts = exchange_partitions(cc, optim);
    err = nullptr;
    try {
        if (crank == 0) {
            if (model) w->add_file(model->name, ckpt::FileSummary{model->size, model->crc32c});
            for (auto& pr : parts) {
                w->add_file(pr.second.name, ckpt::FileSummary{pr.second.size, pr.second.crc32c});
                m.partitions.push_back(std::move(pr.first));
            }
            m.files = w->files();
            const std::string manifest = ckpt::manifest_to_json(m);
            DS_CHECK(manifest.size() <= ckpt::kMaxManifestBytes, DS_ERR_INVALID_ARGUMENT,
                     "checkpoint '%s': its manifest would be %zu bytes, more than the %llu a reader accepts "
                     "(too many parameter fragments or too long names / client state)",
                     t.c_str(), manifest.size(), static_cast<unsigned long long>(ckpt::kMaxManifestBytes));
            // What is written must read back: the reader's own checks on
            // the manifest text (JSON nesting and text rules, every key),
            // so a save never commits a checkpoint a load would refuse.
            try {
                (void)ckpt::parse_manifest(manifest, ckpt::join_path(t, ckpt::kManifestFile));
            } catch (const Error& e) {
                fail(DS_ERR_INVALID_ARGUMENT, "checkpoint '%s' not saved: its manifest would not load (%s)",
                     t.c_str(), e.what());
            }
            w->commit(manifest);
        }
    } catch (const Error& e) {
        // A path vanishing under a save (someone else removing it) is an I/O failure here.
        local = e.status() == DS_ERR_NOT_FOUND ? Error(DS_ERR_IO, e.what()) : e;
        err = &local;
    }
    agree_across_ranks(cc, "ds_save_checkpoint", err);
    DS_LOG(logger_, DS_LOG_INFO, "checkpoint saved: %s/%s (global_steps=%lld)", save_dir, t.c_str(),
           static_cast<long long>(counters_.global_steps));
}

void Engine::save_16bit_model(const char* save_dir, const char* filename, uint32_t flags) {
    const HostParking on_host(*this, /*write_back=*/false);  // a device-resident engine's buffers
    const std::string name = filename ? filename : ckpt::kModelFile;
    comm::Communicator& cc = checkpoint_comm();  // a sharded engine's: its layout's world
    const int32_t crank = cc.rank();
    agree::enter(cc, agree::Call::Save16bitModel, [&] {  // collective: rank_agreement.h
        require_initialized("ds_save_16bit_model");
        require_whole_weights(*this, "ds_save_16bit_model");
        DS_CHECK(save_dir[0] != '\0', DS_ERR_INVALID_ARGUMENT, "argument 'save_dir' is empty");
        DS_CHECK((flags & ~DS_SAVE_EXCLUDE_FROZEN) == 0, DS_ERR_INVALID_ARGUMENT,
                 "flags: unknown bits 0x%x (only DS_SAVE_EXCLUDE_FROZEN is defined)", flags & ~DS_SAVE_EXCLUDE_FROZEN);
        ckpt::check_output_name(name, "filename");  // before anything is created
        strategy_->check_save_16bit_model();
        agree::CallArgs a;
        a.args = flags;
        a.detail = flags;
        a.detail_name = "flags";
        a.what = "flags";
        return a;
    });
    const bool exclude_frozen = (flags & DS_SAVE_EXCLUDE_FROZEN) != 0;
    // A sharded engine writes the logical model (engine_checkpoint_sharded.cpp).
    std::vector<PlannedParam> plan;
    if (shard_layout_) plan = ckpt_io::plan_sharded(*this, /*with_optimizer=*/false);
    // Rank 0 writes the whole working weights; at ZeRO-3 every rank takes
    // part in gathering each parameter for it. The file is written inside a
    // locked temporary directory (a concurrent save's cleanup leaves it
    // alone) and renamed into place: readers never see half a file.
    Error local(DS_OK, "");
    const Error* err = nullptr;
    ckpt::FileLock tmp_lock;
    std::string tmp_dir;
    try {
        if (crank == 0) {
            ckpt::make_dirs(save_dir);
            ckpt::check_output_file(save_dir, name, "filename");
            tmp_dir = ckpt::make_locked_temp_dir(save_dir, name, tmp_lock);
        }
    } catch (const Error& e) {
        local = e;
        err = &local;
    }
    agree_across_ranks(cc, "ds_save_16bit_model", err);  // before any collective gather
    try {
        if (shard_layout_) ckpt_io::write_sharded_weights(*this, plan, ckpt::join_path(tmp_dir, name), name, exclude_frozen);
        else ckpt_io::write_weights(*this, ckpt::join_path(tmp_dir, name), name, exclude_frozen);
        if (crank == 0) {
            ckpt::check_output_file(save_dir, name, "filename");  // still not a FIFO, directory, ...
            ckpt::rename_path(ckpt::join_path(tmp_dir, name), ckpt::join_path(save_dir, name));
            ckpt::remove_tree(tmp_dir);
            ckpt::fsync_dir(save_dir);
        }
    } catch (const Error& e) {
        local = e.status() == DS_ERR_NOT_FOUND ? Error(DS_ERR_IO, e.what()) : e;
        err = &local;
        if (crank == 0) {
            try {
                ckpt::remove_tree(tmp_dir);
            } catch (const Error&) {
            }
        }
    }
    agree_across_ranks(cc, "ds_save_16bit_model", err);
}

}  // namespace ds
