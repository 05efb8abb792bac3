#include "engine/param_store.h"

#include "core/error.h"

#include <algorithm>

namespace ds {

void ParamStore::add(const std::string& name, const Tensor& init, bool trainable,
                     DType working_dtype, Allocator& alloc) {
    DS_CHECK(!name.empty(), DS_ERR_INVALID_ARGUMENT, "argument 'name' is empty");
    DS_CHECK(!contains(name), DS_ERR_INVALID_ARGUMENT, "parameter '%s' was already added",
             name.c_str());
    DS_CHECK(dtype_is_float(init.dtype()), DS_ERR_INVALID_ARGUMENT,
             "parameter '%s': init dtype %s is not a floating type (fp32, fp16 or bf16)", name.c_str(),
             dtype_name(init.dtype()));
    DS_CHECK(init.device().kind == Device::Kind::CPU, DS_ERR_INVALID_ARGUMENT,
             "parameter '%s': init must be a CPU tensor in this version, got %s", name.c_str(),
             init.device().str().c_str());
    Param p;
    p.name = name;
    p.trainable = trainable;
    p.shape = init.shape();
    p.numel = init.numel();
    p.master = Tensor::empty(p.shape, DType::F32, Device{}, alloc, MemCategory::Params);
    if (working_dtype == DType::F32) {
        p.master.copy_from(init);
    } else {
        Tensor rounded = init.to(working_dtype, alloc, MemCategory::Buffers);
        p.master.copy_from(rounded);
    }
    index_.emplace(name, params_.size());
    params_.push_back(std::move(p));
}

void ParamStore::materialize(DType working_dtype, DType grad_dtype, size_t n_states,
                             DType state_dtype, const FlatSpec& spec, Allocator& alloc) {
    std::vector<int64_t> sizes;
    trainable_pos_.clear();
    for (size_t i = 0; i < params_.size(); ++i) {
        if (!params_[i].trainable) continue;
        params_[i].trainable_index = static_cast<int64_t>(sizes.size());
        trainable_pos_.push_back(i);
        sizes.push_back(params_[i].numel);
    }
    if (spec.stage3) {
        materialize_stage3(working_dtype, grad_dtype, n_states, state_dtype, spec, alloc);
        return;
    }
    flat_.layout = zero::make_flat_partition_layout(sizes, spec.world, spec.round_robin);
    const zero::FlatPartitionLayout& L = flat_.layout;
    flat_.numel = L.numel;
    flat_.padded = L.padded_numel;
    if (!sizes.empty() && flat_.padded == 0) flat_.padded = L.alignment;  // only empty parameters
    if (spec.partition_optimizer) {
        flat_.part_begin = L.partition_begin(spec.rank);
        flat_.part_numel = L.partition_numel;
    } else {
        flat_.part_begin = 0;
        flat_.part_numel = flat_.padded;
    }
    flat_.grad_partitioned = spec.partition_grads;
    flat_.grad_stale = true;
    const Device cpu = Device::cpu();
    const bool whole = !spec.partition_optimizer;  // this rank holds every parameter's master
    if (flat_.padded > 0) {
        flat_.master = Tensor::zeros({flat_.part_numel}, DType::F32, cpu, alloc, MemCategory::Params);
        flat_.working = working_dtype == DType::F32 && whole
                            ? flat_.master
                            : Tensor::zeros({flat_.padded}, working_dtype, cpu, alloc, MemCategory::Params);
        flat_.grad = Tensor::zeros({spec.partition_grads ? flat_.part_numel : flat_.padded}, grad_dtype, cpu,
                                   alloc, MemCategory::Grads);
        for (size_t i = 0; i < n_states; ++i)
            flat_.state.push_back(
                Tensor::zeros({flat_.part_numel}, state_dtype, cpu, alloc, MemCategory::OptimizerState));
    }
    float* master = flat_.master.defined() ? flat_.master.data<float>() : nullptr;
    for (Param& p : params_) {
        if (!p.trainable) {
            materialize_frozen(p, working_dtype, alloc);
            continue;
        }
        const size_t ti = static_cast<size_t>(p.trainable_index);
        p.flat_offset = L.param_flat_offset[ti];
        // The master copies of the fragments this rank owns.
        const float* init = p.numel > 0 ? p.master.data<float>() : nullptr;
        for (const zero::FlatFragment& f : L.fragments[ti]) {
            if (!whole && f.rank != spec.rank) continue;
            const int64_t dst = whole ? f.flat_offset : f.partition_offset;
            std::copy(init + f.param_offset, init + f.param_offset + f.length, master + dst);
        }
        p.working = flat_.working.view(p.shape, p.flat_offset);
        if (!(working_dtype == DType::F32 && whole)) p.working.copy_from(p.master);
        if (whole) {
            p.master = flat_.master.view(p.shape, p.flat_offset);
            for (size_t i = 0; i < n_states; ++i) p.state.push_back(flat_.state[i].view(p.shape, p.flat_offset));
        } else {
            p.master = Tensor();  // partitioned: see flat_.layout.fragments
        }
        if (!spec.partition_grads) p.grad = flat_.grad.view(p.shape, p.flat_offset);
        p.grad_stale = true;
    }
}

void ParamStore::materialize_frozen(Param& p, DType working_dtype, Allocator& alloc) {
    if (working_dtype == DType::F32) {
        p.working = p.master;
    } else {
        p.working = Tensor::empty(p.shape, working_dtype, Device::cpu(), alloc, MemCategory::Params);
        p.working.copy_from(p.master);
    }
}

// ZeRO-3: this rank keeps chunk r of every trainable parameter (master,
// working copy, gradient, optimizer state), concatenated in parameter order.
// Whole working weights are gathered on demand (Engine::gather) or kept for
// persistent parameters (numel <= param_persistence_threshold).
void ParamStore::materialize_stage3(DType working_dtype, DType grad_dtype, size_t n_states,
                                    DType state_dtype, const FlatSpec& spec, Allocator& alloc) {
    const int32_t W = spec.world, r = spec.rank;
    std::vector<int64_t> sizes;
    for (size_t i : trainable_pos_) sizes.push_back(params_[i].numel);
    const zero::Stage3Layout L3 = zero::make_stage3_layout(sizes, W, spec.sub_group_size);
    const std::vector<uint8_t> persistent =
        zero::mark_persistent_params(sizes, spec.persistence_threshold, spec.model_persistence_threshold);
    flat_.stage3 = true;
    flat_.chunk.assign(sizes.size(), 0);
    flat_.rank_offset.assign(sizes.size(), 0);
    flat_.layout = zero::FlatPartitionLayout{};
    flat_.layout.dp = W;
    flat_.layout.param_numel = sizes;
    flat_.layout.fragments.assign(sizes.size(), {});
    int64_t offset = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
        flat_.chunk[i] = L3.params[i].partition_numel;
        flat_.rank_offset[i] = offset;
        for (int32_t q = 0; q < W; ++q) {
            const int64_t len = L3.params[i].owned_numel(q);
            if (len > 0)
                flat_.layout.fragments[i].push_back({q, -1, offset, L3.params[i].owned_begin(q), len});
        }
        offset += flat_.chunk[i];
    }
    flat_.numel = 0;
    for (int64_t n : sizes) flat_.numel += n;
    flat_.padded = offset;
    flat_.part_begin = 0;
    flat_.part_numel = offset;
    flat_.grad_partitioned = true;
    flat_.grad_stale = true;
    const Device cpu = Device::cpu();
    if (offset > 0) {
        flat_.master = Tensor::zeros({offset}, DType::F32, cpu, alloc, MemCategory::Params);
        flat_.working = working_dtype == DType::F32
                            ? flat_.master
                            : Tensor::zeros({offset}, working_dtype, cpu, alloc, MemCategory::Params);
        flat_.grad = Tensor::zeros({offset}, grad_dtype, cpu, alloc, MemCategory::Grads);
        for (size_t i = 0; i < n_states; ++i)
            flat_.state.push_back(Tensor::zeros({offset}, state_dtype, cpu, alloc, MemCategory::OptimizerState));
    }
    for (Param& p : params_) {
        if (!p.trainable) {
            materialize_frozen(p, working_dtype, alloc);
            continue;
        }
        const size_t ti = static_cast<size_t>(p.trainable_index);
        const int64_t begin = L3.params[ti].owned_begin(r), len = L3.params[ti].owned_numel(r);
        if (len > 0) {
            Tensor src = p.master.view({len}, begin);
            flat_.master.view({len}, flat_.rank_offset[ti]).copy_from(src);
            if (working_dtype != DType::F32) flat_.working.view({len}, flat_.rank_offset[ti]).copy_from(src);
        }
        p.persistent = persistent[ti] != 0;
        p.master = Tensor();
        p.working = Tensor();  // until gathered
        p.grad = Tensor();
        p.grad_stale = true;
    }
}

void ParamStore::drop_gradients() {
    for (Param& p : params_) {
        p.grad_stale = true;
        p.norm_cached = false;
    }
    flat_.grad_stale = true;
}

Param& ParamStore::get(const char* name) {
    auto it = index_.find(name);
    DS_CHECK(it != index_.end(), DS_ERR_NOT_FOUND, "no parameter named '%s'", name);
    return params_[it->second];
}

const Param& ParamStore::get(const char* name) const {
    return const_cast<ParamStore*>(this)->get(name);
}

size_t ParamStore::trainable_count() const {
    size_t n = 0;
    for (const Param& p : params_) n += p.trainable ? 1 : 0;
    return n;
}

void ParamStore::clear_if_stale(Param& p) {
    if (p.grad_stale) {
        p.grad.zero();
        p.grad_stale = false;
        p.norm_cached = true;  // all zeros
        p.norm_nonfinite = false;
        p.norm_sumsq = 0.0;
    }
}

}  // namespace ds
