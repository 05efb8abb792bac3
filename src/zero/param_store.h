// ParamStore: the engine's named parameters (name -> Param). Trainable
// parameters live in the flat buffers of the ZeRO strategy
// (zero/flat_buffers.h, laid out by zero::Strategy::materialize): a Param's
// tensors are views into them where the whole parameter is held on this
// rank, and undefined where it is partitioned. Frozen parameters keep their
// own tensors.
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
    int64_t flat_offset = -1;  // start in the flat buffers (trainable only)
    int64_t trainable_index = -1;  // index among trainable params (the layout's param index)
    Tensor master;             // fp32, contiguous
    Tensor working;            // model dtype; the master itself for fp32
    Tensor grad;               // grad-accumulation dtype (trainable only)
    bool grad_stale = true;    // holds no gradient of this window: reads as zeros
    // The gradient buffer's sum of squares and Inf/NaN flag, computed while
    // ds_engine_accumulate_grad wrote it (valid until anything else writes it).
    bool norm_cached = false;
    // A gradient view was handed out (ds_engine_grad_view): the host may write
    // the buffer at any time while the view lives (views outlive steps), so
    // the cached norm is never trusted again for this parameter — ds_step
    // reads the buffer itself.
    bool grad_viewed = false;
    bool norm_nonfinite = false;
    double norm_sumsq = 0.0;
    // Left out of the gradient norm on this rank: another rank counts the
    // same values (a pipeline's tied weight on its non-owning stage, as
    // DeepSpeed's ds_pipe_replicated), so the norm across stages counts it once.
    bool norm_excluded = false;
    // A built-in MoE layer's expert parameter (DeepSpeed's is_moe_param):
    // reported as DS_PARAM_EXPERT; the expert-parallel engine reduces it over
    // its expert-data-parallel group only.
    bool expert = false;
    // ZeRO-3: the whole working weights exist only while gathered (or always
    // when persistent); `full` is their padded buffer (chunk x world).
    bool persistent = false;
    int32_t gather_count = 0;
    Tensor full;
    std::vector<Tensor> state; // optimizer state, in Optimizer::state_names() order
};

class ParamStore {
public:
    // Registers a parameter; `init` is copied (rounded through the working
    // dtype, as DeepSpeed converts the module before copying fp32 masters).
    void add(const std::string& name, const Tensor& init, bool trainable, DType working_dtype,
             Allocator& alloc);

    // Numbers the trainable parameters in registration order (their layout
    // index, Param::trainable_index) and returns their sizes in that order.
    std::vector<int64_t> index_trainable();
    // A frozen parameter's working copy: its master, or a rounded copy.
    static void materialize_frozen(Param& p, DType working_dtype, Allocator& alloc);

    Param& get(const char* name);  // DS_ERR_NOT_FOUND naming the parameter
    const Param& get(const char* name) const;
    bool contains(const std::string& name) const { return index_.count(name) > 0; }
    std::vector<Param>& all() { return params_; }
    const std::vector<Param>& all() const { return params_; }
    size_t size() const { return params_.size(); }
    size_t trainable_count() const;

    // Zero a stale gradient (the buffer then holds this window's gradient).
    static void clear_if_stale(Param& p);
    // Mark every parameter's gradient stale (after a step or an overflow;
    // the ZeRO strategy marks its flat partition itself).
    void drop_gradients();

private:
    std::vector<Param> params_;
    std::unordered_map<std::string, size_t> index_;
};

}  // namespace ds
