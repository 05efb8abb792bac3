// What the ZeRO stage families share: the flat buffers behind the trainable
// parameters and the operations on them that each stage combines
// differently (stage0.cpp, stage12.cpp, stage3.cpp). Internal to src/zero.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "zero/bucket_reducer.h"
#include "zero/offload_optimizer.h"
#include "zero/partition.h"
#include "zero/strategy.h"

namespace ds::zero {

// The flat buffers behind the trainable parameters, laid out by
// FlatPartitionLayout (registration order, or DeepSpeed's round-robin
// order; padded to 2 x world size), or at ZeRO-3 one chunk of every
// parameter. The working copy is whole on every rank below ZeRO-3; the fp32
// master and the optimizer state hold only this rank's partition when the
// optimizer state is partitioned (ZeRO >= 1), and the gradient too at ZeRO-2.
struct FlatBuffers {
    int64_t numel = 0;       // trainable elements
    int64_t padded = 0;      // working/full-gradient elements (numel rounded up to the alignment)
    int64_t part_begin = 0;  // flat offset of the range this rank updates
    int64_t part_numel = 0;  // its length (P, or padded when not partitioned)
    Tensor working;          // padded
    Tensor master;           // part_numel (fp32)
    Tensor grad;             // padded, or part_numel at ZeRO-2/3
    std::vector<Tensor> state;  // part_numel each
    bool grad_partitioned = false;
    bool optimizer_partitioned = false;  // master/state hold one partition (else the whole padded range)
    bool grad_stale = true;  // ZeRO-2/3: the partition gradient holds nothing of this window
    bool chunked = false;    // ZeRO-3: no per-parameter views of the buffers (stage3.cpp)
    // The working weights are in host memory, the master on the device
    // (ZeRO-3, offload_param "cpu" on a device-resident engine): the step
    // leaves them to refresh_working_from_master.
    bool working_on_host = false;
    // Which rank holds which elements of each trainable parameter: the flat
    // layout's fragments at ZeRO 1/2; at ZeRO-3 one fragment per rank, its
    // chunk, at partition_offset = rank_offset[param] (flat_offset unused).
    FlatPartitionLayout layout;
    std::vector<int64_t> chunk;        // ZeRO-3: ceil(numel / world) per trainable param
    std::vector<int64_t> rank_offset;  // ZeRO-3: the chunk's offset in this rank's partition
};

class FlatStrategy : public Strategy {
public:
    explicit FlatStrategy(const StrategyContext& ctx);

    int stage() const override;
    void broadcast_initial(ParamStore& params) override;
    void on_backward() override {}
    bool window_reduced() const override { return reduced_this_window_; }
    bool gradients_pending() const override { return flat_.grad_partitioned && !flat_.grad_stale; }
    void drop_gradients() override;
    // Partitioned (ZeRO >= 1, stage0.cpp overrides): the norm of this rank's
    // partition added up across ranks, and the optimizer over the partition.
    void grad_norm(double* sumsq, bool* overflow) override;
    void run_optimizer(optim::Optimizer& opt, const optim::StepContext& ctx) override;
    // Whole weights everywhere: nothing to gather (stage3.cpp overrides).
    void gather(Param&) override {}
    void release(Param&) override {}
    void check_release(const Param&) const override {}
    void gather_temporary(Param&) override {}
    void drop_temporary(Param&) override {}
    void read_full(Param& p, FullTensor which, size_t state, Tensor& dst) override;    // flat_full_copy.cpp
    void write_full(Param& p, FullTensor which, size_t state, const Tensor& src) override;
    Holding holding(Param& p) override;
    void load_working(Param& p, const uint8_t* bytes) override;
    void load_fragments(Param& p, const uint8_t* working, const std::vector<SavedFragment>& saved,
                        bool master_from_fp32) override;
    void check_save_16bit_model() const override;
    void disk_bytes(int64_t* params, int64_t* optimizer_state) const override;
    std::string state_lost() const override { return offload_ ? offload_->lost() : std::string(); }
    void clear_state_lost() override {
        if (offload_) offload_->clear_lost();
    }
    std::vector<StateBuffer> state_buffers(uint32_t kinds) override;  // flat_state_buffers.cpp
    // ZeRO 0-2: the whole working weights (Stage3 overrides: it partitions them).
    Tensor flat_working() const override { return flat_.working; }
    void set_step_sink(StepSink sink) override { step_sink_ = std::move(sink); }
    // Tests: the elements per piece of a step that calls the sink (default
    // 1 Mi; a multiple of 1024, see run_over), so small models step in
    // several pieces too.
    static void set_step_piece_for_testing(int64_t elements) noexcept;
    // Device-resident buffers (flat_device.cpp).
    void park_on_host() override;
    void unpark(bool write_back) override;
    bool parked() const override { return parked_ != nullptr; }

protected:
    // The flat layout of ZeRO 0/1/2: master + optimizer state hold one
    // partition when `partition_optimizer`, the gradient too when `partition_grads`.
    void materialize_flat(ParamStore& params, size_t n_states, DType state_dtype, bool partition_optimizer,
                          bool partition_grads);
    // A buffer of `numel` elements for the working weights on `where`, zeroed
    // unless `zeroed` is false; on the host page-locked with
    // StrategyContext::pin_working.
    Tensor working_buffer(int64_t numel, DType dtype, Device where, bool zeroed = true) const;
    // buffer (+)= scale * grad with its sum of squares in the same pass.
    void accumulate_with_norm(Param& p, const void* grad, int gdtype, float scale);
    void clear_stale_params();     // each whole gradient that got nothing: zeros
    void clear_stale_partition();  // the gradient partition, if it got nothing: zeros
    // ZeRO 0/1: all-reduce the whole flat gradient in `bucket`-element pieces
    // with the data-parallel mean's scales (once per window).
    void allreduce_full_gradient(int64_t bucket);
    // (scale before, scale after) the reduction; `zero_reduce_scatter`: a
    // ZeRO stage whose reduce_scatter setting applies.
    std::pair<float, float> reduction_scales(bool zero_reduce_scatter) const;
    // Sum of squares / Inf-NaN of flat gradient elements [begin, begin + count).
    double local_sumsq(int64_t begin, int64_t count, int* nonfinite) const;
    // Every rank's (sumsq, overflow) added in rank order: bit-identical everywhere.
    void exchange_norm(double local, int nonfinite, double* sumsq, bool* overflow);
    // The norm ds_engine_accumulate_grad cached, when every trainable
    // gradient still holds exactly what it wrote; false otherwise.
    bool cached_norm(double* sumsq, bool* overflow) const;
    // The optimizer over `n` elements from part_begin (one fused call when
    // elementwise, else per parameter).
    void run_over(optim::Optimizer& opt, const optim::StepContext& ctx, size_t n);
    // fp32 working weights are the master itself unless partitioned: copy
    // this rank's updated range back.
    void refresh_working_from_master(size_t n);
    // Its flat_.working_on_host branch: n elements from part_begin.
    void master_to_host_working(int64_t n);
    // materialize_flat on a device: each parameter's initial master values
    // (the fragments this rank owns unless `whole`) and working copy, the
    // frozen ones' working weights (the only use at ZeRO-3).
    void place_on_device(Param& p, bool whole);

    // Optimizer state on NVMe (offload_optimizer.device "nvme"): master and
    // state live in its swap file, flat_.master / flat_.state stay empty.
    std::unique_ptr<OffloadOptimizer> offload_;
    // One piece of initial master values: range elements [dst, dst + len) from `src`.
    struct InitPiece {
        int64_t dst;
        int64_t len;
        const float* src;
    };
    // Creates offload_ over the rank's part_numel range, its masters from
    // `pieces` (the rest zero); `spans`: each parameter's (offset, length)
    // in the range (OffloadOptimizer). `written(upto)`, if given, is called
    // when range elements [0, upto) are on disk (before each sub-group is
    // filled, and at the end with part_numel): the caller may then free the
    // sources of the pieces that end there.
    void start_offload(std::vector<InitPiece> pieces, std::vector<std::pair<int64_t, int64_t>> spans, size_t n_states,
                       DType state_dtype, const std::function<void(int64_t upto)>& written = {});

    StrategyContext ctx_;
    comm::Communicator& comm_;  // host: the norm exchange, the initial broadcast, host buffers
    comm::Communicator& data_;  // the flat buffers' memory (StrategyContext::data_comm)
    int32_t rank_ = 0;
    int32_t world_ = 1;
    ParamStore* params_ = nullptr;  // set by materialize
    FlatBuffers flat_;
    // ZeRO-2/3's gradient buckets, made by the stage's materialize (null at
    // stages 0/1): drop_gradients discards what they hold.
    std::unique_ptr<BucketReducer> reducer_;
    bool reduced_this_window_ = false;  // boundary reduction done (a failed ds_step)

private:
    // materialize_flat's NVMe branch: the swap file with the initial masters.
    void materialize_offloaded(ParamStore& params, size_t n_states, DType state_dtype, bool whole);
    // read_full / write_full of the master or a state held in the swap file.
    void read_full_offloaded(Param& p, size_t t, Tensor& dst);
    void write_full_offloaded(Param& p, size_t t, const Tensor& src);
    // Checkpoint fragments streamed from / into the swap file.
    Holding offloaded_holding(Param& p);
    void load_fragments_offloaded(Param& p, const uint8_t* working, const std::vector<SavedFragment>& saved,
                                  bool master_from_fp32);
    // The whole fp32 value of a partitioned `p` into `dst` (collective):
    // `read_mine(f, out)` writes this rank's fragment `f` as f.length fp32
    // values; every rank's fragments are exchanged and unpacked.
    using FragmentReader = std::function<void(const FlatFragment& f, float* out)>;
    void gather_partitioned(Param& p, const FragmentReader& read_mine, float* dst);

    std::vector<void*> state_ptrs_;  // scratch for run_over: no allocation per step
    StepSink step_sink_;             // set_step_sink
    bool working_copied_ = false;    // run_over copied the fp32 master range into the working weights

    // The Params' views of the flat buffers (materialize_flat's rules).
    void point_views();
    void place_partitioned_on_device(Param& p, const Tensor& init);
    // While parked: the device buffers (flat_ holds their host copies) and
    // the frozen parameters' device working weights.
    struct Parked {
        FlatBuffers device;  // only its tensors
        std::vector<std::pair<Param*, Tensor>> frozen;
        Kernels kernels = cpu_kernels();  // the device's, restored by unpark
    };
    std::unique_ptr<Parked> parked_;
};

// One per stage family (Strategy::create picks).
std::unique_ptr<Strategy> make_stage0(const StrategyContext& ctx);   // stage0.cpp
std::unique_ptr<Strategy> make_stage12(const StrategyContext& ctx);  // stage12.cpp
std::unique_ptr<Strategy> make_stage3(const StrategyContext& ctx);   // stage3.cpp

}  // namespace ds::zero
