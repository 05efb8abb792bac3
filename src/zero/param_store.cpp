#include "zero/param_store.h"

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

std::vector<int64_t> ParamStore::index_trainable() {
    std::vector<int64_t> sizes;
    for (Param& p : params_) {
        if (!p.trainable) continue;
        p.trainable_index = static_cast<int64_t>(sizes.size());
        sizes.push_back(p.numel);
    }
    return sizes;
}

void ParamStore::materialize_frozen(Param& p, DType working_dtype, Allocator& alloc) {
    if (working_dtype == DType::F32) {
        p.working = p.master;
    } else {
        p.working = Tensor::empty(p.shape, working_dtype, Device::cpu(), alloc, MemCategory::Params);
        p.working.copy_from(p.master);
    }
}

void ParamStore::drop_gradients() {
    for (Param& p : params_) {
        p.grad_stale = true;
        p.norm_cached = false;
    }
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
