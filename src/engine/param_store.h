// ParamStore: the engine's named parameters. Trainable parameters live in
// flat buffers laid out by zero::FlatPartitionLayout (registration order, or
// DeepSpeed's round-robin order; padded to 2 x world size): the working copy
// is whole on every rank; the fp32 master and the optimizer state hold only
// this rank's partition when the optimizer state is partitioned (ZeRO >= 1),
// and the gradient too at ZeRO-2. A Param's tensors are views into the flat
// buffers where the whole parameter is held here (master/state/grad are left
// undefined when partitioned). Frozen parameters keep their own tensors.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"
#include "core/tensor.h"
#include "zero/partition.h"

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
    // ZeRO-3: the whole working weights exist only while gathered (or always
    // when persistent); `full` is their padded buffer (chunk x world).
    bool persistent = false;
    int32_t gather_count = 0;
    Tensor full;
    std::vector<Tensor> state; // optimizer state, in Optimizer::state_names() order
};

// How the flat buffers are split across ranks.
struct FlatSpec {
    int32_t rank = 0;
    int32_t world = 1;              // data-parallel size (the layout's alignment)
    bool partition_optimizer = false;  // ZeRO >= 1: master + state hold one partition
    bool partition_grads = false;      // ZeRO 2: the gradient holds one partition
    bool stage3 = false;               // ZeRO 3: every parameter split in world chunks
    int64_t sub_group_size = 1000000000;
    int64_t persistence_threshold = 100000;
    int64_t model_persistence_threshold = INT64_MAX;
    bool round_robin = false;
};

// The flat buffers behind the trainable parameters.
struct FlatBuffers {
    int64_t numel = 0;       // trainable elements
    int64_t padded = 0;      // working/full-gradient elements (numel rounded up to the alignment)
    int64_t part_begin = 0;  // flat offset of the range this rank updates
    int64_t part_numel = 0;  // its length (P, or padded when not partitioned)
    Tensor working;          // padded
    Tensor master;           // part_numel (fp32)
    Tensor grad;             // padded, or part_numel at ZeRO-2
    std::vector<Tensor> state;  // part_numel each
    bool grad_partitioned = false;
    bool grad_stale = true;  // ZeRO-2/3: the partition gradient holds nothing of this window
    // Which rank holds which elements of each trainable parameter: the flat
    // layout's fragments at ZeRO 1/2; at ZeRO-3 one fragment per rank, its
    // chunk, at partition_offset = rank_offset[param] (flat_offset unused).
    zero::FlatPartitionLayout layout;
    bool stage3 = false;
    std::vector<int64_t> chunk;        // ZeRO-3: ceil(numel / world) per trainable param
    std::vector<int64_t> rank_offset;  // ZeRO-3: the chunk's offset in this rank's partition
};

class ParamStore {
public:
    // Registers a parameter; `init` is copied (rounded through the working
    // dtype, as DeepSpeed converts the module before copying fp32 masters).
    void add(const std::string& name, const Tensor& init, bool trainable, DType working_dtype,
             Allocator& alloc);

    // Lays out the flat buffers: working copies, gradient buffers and
    // `n_states` zeroed state tensors of `state_dtype`.
    void materialize(DType working_dtype, DType grad_dtype, size_t n_states, DType state_dtype,
                     const FlatSpec& spec, Allocator& alloc);

private:
    void materialize_stage3(DType working_dtype, DType grad_dtype, size_t n_states, DType state_dtype,
                            const FlatSpec& spec, Allocator& alloc);
    void materialize_frozen(Param& p, DType working_dtype, Allocator& alloc);

public:

    Param& get(const char* name);  // DS_ERR_NOT_FOUND naming the parameter
    const Param& get(const char* name) const;
    bool contains(const std::string& name) const { return index_.count(name) > 0; }
    std::vector<Param>& all() { return params_; }
    const std::vector<Param>& all() const { return params_; }
    size_t size() const { return params_.size(); }
    size_t trainable_count() const;
    FlatBuffers& flat() { return flat_; }
    const FlatBuffers& flat() const { return flat_; }

    // Zero a stale gradient (the buffer then holds this window's gradient).
    static void clear_if_stale(Param& p);
    // Mark every gradient stale (after a step or an overflow).
    void drop_gradients();
    // The trainable parameter with layout index i.
    Param& trainable(size_t i) { return params_[trainable_pos_[i]]; }

private:
    std::vector<Param> params_;
    std::unordered_map<std::string, size_t> index_;
    std::vector<size_t> trainable_pos_;  // layout index -> position in params_
    FlatBuffers flat_;
};

}  // namespace ds
