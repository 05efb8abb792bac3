// Saving: ds_save_checkpoint (the commit protocol of ckpt/commit.h) and
// ds_save_16bit_model, plus the accumulation-window check.
#include <cstring>

#include "ckpt/commit.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "engine/engine_checkpoint.h"

namespace ds {

// Each rank's fragments and the gathered manifest (DESIGN.md §5) are the
// format's design for several ranks; the collective save/load is not built.
void require_world_of_one(const char* call, int32_t world_size) {
    DS_CHECK(world_size == 1, DS_ERR_UNSUPPORTED,
             "%s with a world of %d ranks is not supported in this version (checkpoints are saved and "
             "loaded by single-rank engines; ds-to-fp32 reads multi-rank layouts)",
             call, world_size);
}

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
    for (const Param& p : params_.all())
        DS_CHECK(!p.trainable || p.grad_stale, DS_ERR_INVALID_STATE,
                 "%s inside a gradient accumulation window: parameter '%s' holds gradients no optimizer "
                 "step has applied yet (finish the window with ds_backward + ds_step first)",
                 call, p.name.c_str());
}

ckpt::Manifest CheckpointAccess::describe(const Engine& e) {
    ckpt::Manifest m;
    m.library_version = format("%d.%d.%d", DS_VERSION_MAJOR, DS_VERSION_MINOR, DS_VERSION_PATCH);
    m.world_size = e.world_size_;
    m.zero_stage = e.config_.zero_optimization.stage;
    m.working_dtype = ckpt::st_dtype_name(e.working_dtype_);
    m.grad_accum_dtype = ckpt::st_dtype_name(e.grad_dtype_);
    m.global_steps = e.counters_.global_steps;
    m.global_samples = e.counters_.global_samples;
    m.micro_steps = e.counters_.micro_steps;
    m.skipped_steps = e.counters_.skipped_steps;
    if (e.optimizer_) {
        ckpt::OptimizerRecord o;
        o.type = e.optimizer_->name();
        o.step = e.counters_.optimizer_steps;
        o.state_names = e.optimizer_->state_names();
        o.state_dtype = ckpt::st_dtype_name(dtype_from_kernel(e.optimizer_->state_dtype()));
        o.lr = e.lr_;
        o.beta1 = e.beta1_;
        o.beta2 = e.beta2_;
        m.optimizer = o;
    }
    if (e.scheduler_) m.scheduler = ckpt::SchedulerRecord{e.scheduler_->name(), e.scheduler_->last_batch_iteration()};
    m.loss_scaler_dynamic = e.scaler_.dynamic();
    m.loss_scaler = e.scaler_.state();
    // The engine has no random streams yet; the slot keeps the format ready for them.
    m.rng_states.clear();
    for (const Param& p : e.params_.all())
        m.params.push_back(ckpt::ManifestParam{p.name, p.shape, p.numel, m.working_dtype, p.trainable});
    m.config_json = ckpt::compact_json(e.resolved_json_, "resolved config");
    return m;
}

void CheckpointAccess::write_files(const Engine& e, ckpt::TagWriter& w, ckpt::Manifest& m) {
    if (e.rank_ == 0) {  // the working weights are whole on every rank; rank 0 writes them
        std::vector<ckpt::StTensorSpec> specs;
        for (const Param& p : e.params_.all()) specs.push_back({p.name, e.working_dtype_, p.shape});
        ckpt::SafetensorsWriter f(w.file_path(ckpt::kModelFile), specs, {{"format", "pt"}});
        for (const Param& p : e.params_.all()) f.write(p.working.data_ptr(), p.working.nbytes());
        w.add_file(ckpt::kModelFile, f.finish());
    }
    if (!e.optimizer_) return;
    // This rank's fragments: at world size 1 (no partitioning) each trainable
    // parameter whole, [0, numel).
    ckpt::RankPartition part;
    part.rank = e.rank_;
    part.file = ckpt::optim_file_name(e.rank_);
    const DType sd = dtype_from_kernel(e.optimizer_->state_dtype());
    const std::vector<std::string> names = e.optimizer_->state_names();
    std::vector<ckpt::StTensorSpec> specs;
    std::vector<const Param*> owned;
    for (const Param& p : e.params_.all()) {
        if (!p.trainable || p.numel == 0) continue;
        part.fragments.push_back({p.name, 0, p.numel});
        owned.push_back(&p);
        specs.push_back({ckpt::fragment_key(p.name, 0, "master"), DType::F32, {p.numel}});
        for (const std::string& s : names) specs.push_back({ckpt::fragment_key(p.name, 0, s), sd, {p.numel}});
    }
    ckpt::SafetensorsWriter f(w.file_path(part.file), specs, {{"rank", std::to_string(e.rank_)}});
    for (const Param* p : owned) {
        f.write(p->master.data_ptr(), p->master.nbytes());
        for (const Tensor& s : p->state) f.write(s.data_ptr(), s.nbytes());
    }
    w.add_file(part.file, f.finish());
    m.partitions.push_back(std::move(part));
}

void Engine::save_checkpoint(const char* save_dir, const char* tag, const char* client_state_json) {
    require_initialized("ds_save_checkpoint");
    require_world_of_one("ds_save_checkpoint", world_size_);
    require_window_boundary("ds_save_checkpoint");
    DS_CHECK(save_dir[0] != '\0', DS_ERR_INVALID_ARGUMENT, "argument 'save_dir' is empty");
    const std::string t = tag ? std::string(tag) : format("global_step%lld", static_cast<long long>(counters_.global_steps));
    ckpt::check_tag(t, "tag");
    // checkpoint.tag_validation compares the tag across ranks; a world of
    // one has nothing to compare, so every mode (IGNORE/WARN/FAIL) passes.
    ckpt::Manifest m = CheckpointAccess::describe(*this);
    m.tag = t;
    if (client_state_json) m.client_state_json = ckpt::compact_json(client_state_json, "client_state_json");
    try {
        ckpt::TagWriter w(save_dir, t);
        CheckpointAccess::write_files(*this, w, m);
        m.files = w.files();
        w.commit(ckpt::manifest_to_json(m));
    } catch (const Error& err) {
        // A path vanishing under a save (someone else removing it) is an I/O failure here.
        if (err.status() == DS_ERR_NOT_FOUND) fail(DS_ERR_IO, "%s", err.what());
        throw;
    }
    DS_LOG(logger_, DS_LOG_INFO, "checkpoint saved: %s/%s (global_steps=%lld)", save_dir, t.c_str(),
           static_cast<long long>(counters_.global_steps));
}

void Engine::save_16bit_model(const char* save_dir, const char* filename) {
    require_initialized("ds_save_16bit_model");
    DS_CHECK(save_dir[0] != '\0', DS_ERR_INVALID_ARGUMENT, "argument 'save_dir' is empty");
    const std::string name = filename ? filename : ckpt::kModelFile;
    DS_CHECK(!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..",
             DS_ERR_INVALID_ARGUMENT, "filename '%s' must be a plain file name (no '/')", name.c_str());
    if (rank_ != 0) return;  // rank 0 writes the (whole) working weights
    ckpt::make_dirs(save_dir);
    std::vector<ckpt::StTensorSpec> specs;
    for (const Param& p : params_.all()) specs.push_back({p.name, working_dtype_, p.shape});
    // Written under a temporary name and renamed: readers never see half a file.
    const std::string tmp = ckpt::join_path(save_dir, name + ".tmp-" + ckpt::random_nonce());
    try {
        ckpt::SafetensorsWriter f(tmp, specs, {{"format", "pt"}});
        for (const Param& p : params_.all()) f.write(p.working.data_ptr(), p.working.nbytes());
        f.finish();
        ckpt::rename_path(tmp, ckpt::join_path(save_dir, name));
    } catch (const Error& err) {
        try {
            ckpt::remove_tree(tmp);
        } catch (const Error&) {
        }
        if (err.status() == DS_ERR_NOT_FOUND) fail(DS_ERR_IO, "%s", err.what());
        throw;
    } catch (...) {
        try {
            ckpt::remove_tree(tmp);
        } catch (const Error&) {
        }
        throw;
    }
    ckpt::fsync_dir(save_dir);
}

}  // namespace ds
