#include "engine/param_store.h"

#include "core/error.h"

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
                             DType state_dtype, Allocator& alloc) {
    for (Param& p : params_) {
        if (working_dtype == DType::F32) {
            p.working = p.master;
        } else {
            p.working = Tensor::empty(p.shape, working_dtype, Device{}, alloc, MemCategory::Params);
            p.working.copy_from(p.master);
        }
        if (!p.trainable) continue;
        p.grad = Tensor::empty(p.shape, grad_dtype, Device{}, alloc, MemCategory::Grads);
        p.grad_stale = true;
        for (size_t i = 0; i < n_states; ++i)
            p.state.push_back(Tensor::zeros(p.shape, state_dtype, Device{}, alloc, MemCategory::OptimizerState));
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
    }
}

}  // namespace ds
