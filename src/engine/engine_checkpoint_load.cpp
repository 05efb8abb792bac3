// Loading: ds_load_checkpoint. Everything is read, checksummed and matched
// against this engine into staging buffers first (ckpt_io::stage);
// only then is it copied in (apply), so a failed load changes nothing.
#include <unordered_map>

#include "ckpt/commit.h"
#include "ckpt/reader.h"
#include "core/error.h"
#include "engine/engine_checkpoint.h"
#include "engine/engine_model.h"
#include "engine/rank_agreement.h"
#include "engine/shard_layout.h"

namespace ds {

namespace {

std::string join_names(const std::vector<std::string>& names) {
    std::string s;
    for (size_t i = 0; i < names.size() && i < 8; ++i) s += (i ? ", '" : "'") + names[i] + "'";
    if (names.size() > 8) s += format(" and %zu more", names.size() - 8);
    return s;
}

constexpr uint32_t kKnownFlags =
    DS_LOAD_NO_OPTIMIZER_STATES | DS_LOAD_NO_LR_SCHEDULER_STATES | DS_LOAD_MODULE_ONLY | DS_LOAD_NON_STRICT;

}  // namespace

namespace ckpt_io {

void stage(Engine& e, StagedCheckpoint& s, uint32_t flags) {
    const bool module_only = (flags & DS_LOAD_MODULE_ONLY) != 0;
    const bool strict = (flags & DS_LOAD_NON_STRICT) == 0;
    const optim::Optimizer* opt = e.optimizer();
    const sched::LrScheduler* sched = e.scheduler();
    s.load_optimizer = !module_only && !(flags & DS_LOAD_NO_OPTIMIZER_STATES) && opt != nullptr;
    s.load_scheduler = !module_only && !(flags & DS_LOAD_NO_LR_SCHEDULER_STATES) && sched != nullptr;
    s.load_counters = !module_only;
    s.master_from_fp32 = s.load_optimizer && e.config().zero_optimization.load_from_fp32_weights;

    s.manifest = ckpt::read_manifest(s.where.dir);
    const ckpt::Manifest& m = s.manifest;
    const std::string mpath = ckpt::join_path(s.where.dir, ckpt::kManifestFile);
    const std::string working = ckpt::st_dtype_name(e.working_dtype());

    // The model: names (strict or not), then shapes and dtypes (always).
    std::unordered_map<std::string, const ckpt::ManifestParam*> saved;
    for (const ckpt::ManifestParam& p : m.params) saved.emplace(p.name, &p);
    std::vector<std::string>& missing = s.missing;
    std::vector<std::string>& unexpected = s.unexpected;
    for (const Param& p : e.params().all())
        if (!saved.count(p.name)) missing.push_back(p.name);
    // A sharded engine's rank holds part of the model: a name is unexpected
    // when no rank of its world holds it.
    for (const ckpt::ManifestParam& p : m.params)
        if (s.logical_names ? !s.logical_names->count(p.name) : !e.params().contains(p.name))
            unexpected.push_back(p.name);
    if (strict) {
        DS_CHECK(missing.empty(), DS_ERR_FORMAT,
                 "checkpoint '%s' does not match this model: missing parameter(s) %s (DS_LOAD_NON_STRICT "
                 "loads the others)",
                 s.where.dir.c_str(), join_names(missing).c_str());
        DS_CHECK(unexpected.empty(), DS_ERR_FORMAT,
                 "checkpoint '%s' does not match this model: unexpected parameter(s) %s (DS_LOAD_NON_STRICT "
                 "ignores them)",
                 s.where.dir.c_str(), join_names(unexpected).c_str());
    }
    const ShardLayout* layout = e.shard_layout();
    for (Param& p : e.params().all()) {
        auto it = saved.find(p.name);
        if (it == saved.end()) continue;
        const ckpt::ManifestParam& sp = *it->second;
        // A sharded engine's parameter is compared as the logical one it is part of.
        const Shape& logical = layout ? layout->find(p.name)->full_shape : p.shape;
        DS_CHECK(sp.shape == logical, DS_ERR_FORMAT,
                 "checkpoint '%s': parameter '%s' has shape %s, this model's is %s", s.where.dir.c_str(),
                 p.name.c_str(), shape_to_string(sp.shape).c_str(), shape_to_string(logical).c_str());
        DS_CHECK(sp.dtype == working, DS_ERR_FORMAT,
                 "checkpoint '%s': parameter '%s' is %s, this engine's working dtype is %s", s.where.dir.c_str(),
                 p.name.c_str(), sp.dtype.c_str(), working.c_str());
        if (s.load_optimizer && p.trainable)
            DS_CHECK(sp.trainable, DS_ERR_FORMAT,
                     "checkpoint '%s': parameter '%s' is trainable here but frozen in the checkpoint, so it has "
                     "no optimizer state (DS_LOAD_NO_OPTIMIZER_STATES loads the weights only)",
                     s.where.dir.c_str(), p.name.c_str());
        s.items.push_back(StagedCheckpoint::Item{&p, nullptr, {}});
    }

    // The non-tensor state.
    if (s.load_optimizer) {
        DS_CHECK(m.optimizer.has_value(), DS_ERR_FORMAT,
                 "checkpoint '%s' has no optimizer state (DS_LOAD_NO_OPTIMIZER_STATES loads the weights only)",
                 s.where.dir.c_str());
        const std::vector<std::string> names = opt->state_names();
        DS_CHECK(m.optimizer->state_names == names, DS_ERR_FORMAT,
                 "checkpoint '%s': optimizer %s keeps state [%s], this engine's %s keeps [%s]", s.where.dir.c_str(),
                 m.optimizer->type.c_str(), join_names(m.optimizer->state_names).c_str(), opt->name(),
                 join_names(names).c_str());
        // Same state names (Adam / AdamW / Lamb) do not make the state interchangeable.
        DS_CHECK(m.optimizer->type == opt->name(), DS_ERR_FORMAT,
                 "%s: key 'optimizer.type' is \"%s\" but this engine's optimizer is \"%s\" (its state does not "
                 "apply; DS_LOAD_NO_OPTIMIZER_STATES loads the weights only)",
                 mpath.c_str(), m.optimizer->type.c_str(), opt->name());
        const std::string sd = ckpt::st_dtype_name(dtype_from_kernel(opt->state_dtype()));
        DS_CHECK(m.optimizer->state_dtype == sd, DS_ERR_FORMAT,
                 "checkpoint '%s': optimizer state is %s, this engine keeps it in %s", s.where.dir.c_str(),
                 m.optimizer->state_dtype.c_str(), sd.c_str());
        s.scaler = e.scaler();
        try {
            s.scaler.set_state(m.loss_scaler);
        } catch (const Error& err) {
            fail(DS_ERR_FORMAT, "%s: loss_scaler: %s", mpath.c_str(), err.what());
        }
    }
    if (s.load_scheduler) {
        DS_CHECK(m.scheduler.has_value(), DS_ERR_FORMAT,
                 "checkpoint '%s' has no lr_scheduler state but this engine has %s "
                 "(DS_LOAD_NO_LR_SCHEDULER_STATES keeps the engine's)",
                 s.where.dir.c_str(), sched->name());
        DS_CHECK(m.scheduler->type == sched->name(), DS_ERR_FORMAT,
                 "%s: key 'lr_scheduler.type' is \"%s\" but this engine's scheduler is \"%s\" "
                 "(DS_LOAD_NO_LR_SCHEDULER_STATES keeps the engine's schedule)",
                 mpath.c_str(), m.scheduler->type.c_str(), sched->name());
    }
    if (s.load_counters) {
        if (e.model_binding() == nullptr) {
            DS_CHECK(m.rng_states.empty(), DS_ERR_FORMAT,
                     "checkpoint '%s' holds %zu random stream states but this engine has none (it has no built-in "
                     "model)",
                     s.where.dir.c_str(), m.rng_states.size());
        } else if (!m.rng_states.empty()) {
            DS_CHECK(m.rng_states.size() == 1, DS_ERR_FORMAT,
                     "%s: key 'rng_states' holds %zu streams; a built-in model has one (dropout)", mpath.c_str(),
                     m.rng_states.size());
            ModelBinding::parse_stream_state(m.rng_states[0], mpath, &s.stream_seed, &s.stream_forward_index);
            s.has_stream = true;
        }  // none saved (a host-driven checkpoint): the engine keeps its own stream
    }

    // The tensors: whole files, checksummed, headers checked, then pointers.
    s.model = ckpt::load_verified(s.where.dir, m, ckpt::kModelFile);
    ckpt::check_model_header(m, s.model.header, s.model.path);
    for (StagedCheckpoint::Item& it : s.items) {
        const ckpt::ManifestParam& sp = *saved.at(it.param->name);
        it.working = s.model.tensor(sp.name, sp.dtype, sp.shape);
    }
    if (!s.load_optimizer) {
        if (layout) stage_selections(e, s);
        return;
    }
    std::unordered_map<std::string, size_t> file_index;
    for (const ckpt::RankPartition& r : m.partitions) {
        s.optim.push_back(ckpt::load_verified(s.where.dir, m, r.file));
        ckpt::check_optim_header(m, r, s.optim.back().header, s.optim.back().path);
        file_index.emplace(r.file, s.optim.size() - 1);
    }
    const ckpt::FragmentIndex frags = ckpt::index_fragments(m);
    const std::string sd = m.optimizer->state_dtype;
    for (StagedCheckpoint::Item& it : s.items) {
        if (!it.param->trainable) continue;
        auto fi = frags.find(it.param->name);
        if (fi == frags.end()) continue;  // no elements (the manifest checked coverage)
        for (const ckpt::FragmentRef& ref : fi->second) {
            const ckpt::LoadedFile& f = s.optim[file_index.at(ref.part->file)];
            const ckpt::Fragment& fr = *ref.frag;
            StagedCheckpoint::Frag g;
            g.offset = fr.offset;
            g.numel = fr.numel;
            g.master = f.tensor(ckpt::fragment_key(fr.param, fr.offset, "master"), "F32", {fr.numel});
            for (const std::string& n : m.optimizer->state_names)
                g.states.push_back(f.tensor(ckpt::fragment_key(fr.param, fr.offset, n), sd, {fr.numel}));
            it.frags.push_back(std::move(g));
        }
    }
    if (layout) stage_selections(e, s);
}

void apply(Engine& e, StagedCheckpoint& s) {
    const ckpt::Manifest& m = s.manifest;
    const bool fp32 = e.working_dtype() == DType::F32;
    zero::Strategy& z = e.strategy();
    for (StagedCheckpoint::Item& it : s.items) {
        Param& p = *it.param;
        // The working weights, where this rank holds them (ZeRO-3: its chunk).
        z.load_working(p, it.working);
        if (!p.trainable) {
            if (!fp32) p.master.copy_from(p.working);  // a frozen parameter's master follows its weights
            continue;
        }
        // The master and the optimizer state of the ranges this rank owns:
        // from every saved fragment that overlaps them (any world size).
        z.load_fragments(p, it.working, it.frags, s.master_from_fp32 && !it.frags.empty());
    }
    // The optimizer state was rewritten whole: a failed in-place step's mix is gone.
    if (s.load_optimizer) z.clear_state_lost();
    Counters k = e.counters();
    if (s.load_optimizer) {
        e.restore_hyperparameters(m.optimizer->lr, m.optimizer->beta1, m.optimizer->beta2);
        k.optimizer_steps = m.optimizer->step;
        e.restore_scaler(s.scaler);
    }
    // Without the saved param groups the schedule's value at the restored
    // index is the next step's lr (not the fresh engine's).
    if (s.load_scheduler) e.restore_schedule(m.scheduler->last_batch_iteration, /*take_lr=*/!s.load_optimizer);
    if (s.load_counters) {
        k.global_steps = m.global_steps;
        k.global_samples = m.global_samples;
        k.micro_steps = m.micro_steps;
        k.skipped_steps = m.skipped_steps;
        // Saved at the end of a window of the saver's gradient_accumulation_steps;
        // another layout (a pipeline's micro-batches, a data-parallel run's
        // share of them) may accumulate another number: this engine's next
        // window starts whole (DeepSpeed does not restore micro_steps at all).
        const int64_t gas = e.config().gradient_accumulation_steps;
        if (e.config().managed_gradient_accumulation && gas > 1 && k.micro_steps % gas != 0)
            k.micro_steps += gas - k.micro_steps % gas;
    }
    e.restore_counters(k);
    if (ModelBinding* b = e.model_binding()) {
        b->reset();  // a forward in flight (and ZeRO-3 weights it gathered) belongs to the old state
        if (s.has_stream) b->restore_stream(s.stream_seed, s.stream_forward_index);
    }
    // Gradients of a window in flight belong to the state being replaced.
    e.reset_window();
}

}  // namespace ckpt_io

const std::string& Engine::load_checkpoint(const char* load_dir, const char* tag, uint32_t flags) {
    const HostParking on_host(*this, /*write_back=*/true);  // a device-resident engine's buffers
    // Collective: the ranks agree on the call, the tag and the flags first
    // (rank_agreement.h); a sharded engine's over its layout's world.
    comm::Communicator& cc = checkpoint_comm();
    agree::enter(cc, agree::Call::LoadCheckpoint, [&] {
        require_initialized("ds_load_checkpoint");
        DS_CHECK((flags & ~kKnownFlags) == 0, DS_ERR_INVALID_ARGUMENT, "flags: unknown bits 0x%x",
                 flags & ~kKnownFlags);
        agree::CallArgs a;
        a.args = agree::hash_str(tag);
        a.detail = static_cast<int64_t>(flags);
        a.detail_name = "flags";
        a.what = "tag and flags";
        return a;
    });
    require_initialized("ds_load_checkpoint");
    DS_CHECK((flags & ~kKnownFlags) == 0, DS_ERR_INVALID_ARGUMENT,
             "flags: unknown bits 0x%x (DS_LOAD_NO_OPTIMIZER_STATES, DS_LOAD_NO_LR_SCHEDULER_STATES, "
             "DS_LOAD_MODULE_ONLY and DS_LOAD_NON_STRICT are defined)",
             flags & ~kKnownFlags);
    // Every rank reads and verifies the whole checkpoint (any world size may
    // load any other's: each rank picks the fragments its partition needs);
    // nothing changes anywhere unless every rank staged it.
    StagedCheckpoint s;
    // A sharded engine's strict check needs every rank's names: exchanged
    // here, before anything that can fail on one rank alone.
    std::unordered_set<std::string> names;
    if (shard_layout_) {
        names = ckpt_io::logical_names(*this);
        s.logical_names = &names;
    }
    Error local(DS_OK, "");
    const Error* err = nullptr;
    try {
        const ckpt::FileLock reading = ckpt::lock_for_reading(load_dir);  // no commit swaps the tag meanwhile
        s.where = ckpt::resolve_tag(load_dir, tag);
        ckpt_io::stage(*this, s, flags);
    } catch (const Error& e) {
        local = e;
        err = &local;
    }
    agree_across_ranks(cc, "ds_load_checkpoint", err);
    if (!s.missing.empty())
        DS_LOG(logger_, DS_LOG_WARN, "load_checkpoint (non-strict) %s: missing parameter(s) %s keep their values",
               s.where.dir.c_str(), join_names(s.missing).c_str());
    if (!s.unexpected.empty())
        DS_LOG(logger_, DS_LOG_WARN, "load_checkpoint (non-strict) %s: unexpected parameter(s) %s ignored",
               s.where.dir.c_str(), join_names(s.unexpected).c_str());
    // Applying writes memory, and with NVMe offload the swap files: a write
    // there can fail half-way. The state is then a mix, so training is
    // refused (require_state_whole) until a load succeeds.
    try {
        ckpt_io::apply(*this, s);
    } catch (const Error& e) {
        load_failed_ = "ds_load_checkpoint of '" + s.where.dir + "' failed while writing the engine's state (" +
                       e.what() + "), which is now partly the checkpoint's";
        throw;
    }
    load_failed_.clear();
    refresh_device_weights(/*trained_only=*/false);  // ZeRO-Offload on cuda:N: the loaded weights to the device
    loaded_client_state_ = s.manifest.client_state_json;
    DS_LOG(logger_, DS_LOG_INFO, "checkpoint loaded: %s (global_steps=%lld)", s.where.dir.c_str(),
           static_cast<long long>(counters_.global_steps));
    return loaded_client_state_;
}

}  // namespace ds
