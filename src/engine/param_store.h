// ParamStore: the engine's named parameters. Each holds fp32 master weights,
// a working copy in the model dtype (the master itself for fp32), and, when
// trainable, a gradient accumulation buffer and the optimizer's state
// tensors. Parameters keep the order in which they were added.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"
#include "core/tensor.h"

namespace ds {

struct Param {
    std::string name;
    bool trainable = false;
    Shape shape;
    int64_t numel = 0;
    Tensor master;             // fp32, contiguous
    Tensor working;            // model dtype; shares the master's storage for fp32
    Tensor grad;               // grad-accumulation dtype (trainable only)
    bool grad_stale = true;    // the buffer holds no gradient of this window: read as zeros
    std::vector<Tensor> state; // optimizer state, in Optimizer::state_names() order
};

class ParamStore {
public:
    // Registers a parameter; `init` is copied (rounded through the working
    // dtype, as DeepSpeed converts the module before copying fp32 masters).
    void add(const std::string& name, const Tensor& init, bool trainable, DType working_dtype,
             Allocator& alloc);

    // Allocates working copies, gradient buffers and `state_names.size()`
    // zeroed state tensors of `state_dtype` for each trainable parameter.
    void materialize(DType working_dtype, DType grad_dtype, size_t n_states, DType state_dtype,
                     Allocator& alloc);

    Param& get(const char* name);  // DS_ERR_NOT_FOUND naming the parameter
    const Param& get(const char* name) const;
    bool contains(const std::string& name) const { return index_.count(name) > 0; }
    std::vector<Param>& all() { return params_; }
    const std::vector<Param>& all() const { return params_; }
    size_t size() const { return params_.size(); }
    size_t trainable_count() const;

    // A zeroed gradient buffer for a parameter whose buffer is stale.
    static void clear_if_stale(Param& p);

private:
    std::vector<Param> params_;
    std::unordered_map<std::string, size_t> index_;
};

}  // namespace ds
