// What a ZeRO stage decides, behind one interface (DESIGN.md §4): the flat
// buffers and how they are split across ranks, where a micro-batch gradient
// goes, what is reduced when, the global gradient norm, the range the
// optimizer updates, how weights come back after the step, ZeRO-3's
// gathering, and what a rank's checkpoint fragment is. The engine keeps the
// micro-step state machine, the counters, the loss scaler, the schedule and
// the clip factor, and calls a strategy per call, per parameter or per step
// (never per element).
//
// Implementations (one per stage family, chosen once by create()):
// stage0.cpp  ZeRO-0, and any stage in a world of one: whole buffers.
// stage12.cpp ZeRO-1/2: optimizer state (and at 2 the gradient) partitioned.
// stage3.cpp  ZeRO-3: every parameter split into chunks, gathered on demand.
// An offload strategy (optimizer state on the host or NVMe, stepped in
// sub-groups) is one more implementation of run_optimizer().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "config/config.h"
#include "core/allocator.h"
#include "core/kernel_backend.h"
#include "core/tensor.h"
#include "optim/optimizer.h"
#include "zero/param_store.h"
#include "zero/state_swap.h"

namespace ds {

// Which full fp32 copy a debugging get/set addresses.
enum class FullTensor { Param, Grad, OptimizerState };

}  // namespace ds

namespace ds::zero {

// What a strategy is built from; `config` and `alloc` outlive it.
struct StrategyContext {
    // The ranks' host communicator: agreements, norms, host buffers.
    std::shared_ptr<comm::Communicator> comm;
    // The one that moves the flat buffers (null: `comm`). A device-resident
    // engine with several ranks gives a device (NCCL) communicator over the
    // same ranks, in the same rank order.
    std::shared_ptr<comm::Communicator> data_comm;
    // The communicator of the flat buffers: data_comm, else comm.
    const std::shared_ptr<comm::Communicator>& buffer_comm() const { return data_comm ? data_comm : comm; }
    const config::Config* config = nullptr;
    DType working_dtype = DType::F32;
    DType grad_dtype = DType::F32;
    Allocator* alloc = nullptr;
    Kernels kernels = cpu_kernels();  // the table for the device the buffers live on
    Device device = Device::cpu();    // where the flat buffers live (cuda:N: a device-resident engine)
    // The host buffer of the working weights that crosses to a GPU is
    // page-locked (Allocator::allocate_pinned_block): ZeRO-Offload on cuda:N
    // with offload_optimizer.pin_memory (copied after every step), or a
    // device-resident ZeRO-3 with offload_param "cpu" and its pin_memory
    // (the 16-bit partitions, copied for every gather).
    bool pin_working = false;
};

// Engine calls that may run collectives under some strategies (the engine
// makes the ranks agree first when collective() says so).
enum class Collective { Backward, Gather, GetFull };

// Elements [param_offset, param_offset + length) of a parameter that this
// rank holds, at index `dst` of the buffers in Holding.
struct OwnedRange {
    int64_t param_offset;
    int64_t length;
    int64_t dst;
};

// A rank's checkpoint fragment of one parameter: the ranges of its fp32
// master and optimizer state held here, and the buffers they index.
struct Holding {
    std::vector<OwnedRange> ranges;
    float* master = nullptr;
    std::vector<Tensor> states;  // Optimizer::state_names() order
    // Set instead of master/states where they are not in memory (NVMe
    // optimizer state): copies elements [dst, dst + count) of tensor t
    // (0 = master, 1 + i = state i) into `out`; the saver streams through it.
    std::function<void(size_t t, int64_t dst, int64_t count, void* out)> read;
};

// One fragment of a parameter as a checkpoint holds it (any world size):
// elements [offset, offset + numel), fp32 master and optimizer-state bytes.
struct SavedFragment {
    int64_t offset = 0;
    int64_t numel = 0;
    const uint8_t* master = nullptr;
    std::vector<const uint8_t*> states;  // Optimizer::state_names() order
};

class Strategy {
public:
    static std::unique_ptr<Strategy> create(const StrategyContext& ctx);
    virtual ~Strategy() = default;

    virtual int stage() const = 0;  // zero_optimization.stage as configured
    virtual bool collective(Collective call) const = 0;

    // ---- init ----
    // Rank 0's initial values to every rank (DeepSpeed broadcasts the model).
    virtual void broadcast_initial(ParamStore& params) = 0;
    // Lays out the flat buffers (working copies, gradients, `n_states` zeroed
    // optimizer-state buffers of `state_dtype`) and points the Params at them.
    virtual void materialize(ParamStore& params, size_t n_states, DType state_dtype) = 0;

    // ---- micro-steps ----
    // One micro-batch gradient of `p` (gdtype: DSK_*), times `scale`.
    virtual void accumulate(Param& p, const void* grad, int gdtype, float scale) = 0;
    virtual void on_backward() = 0;  // ds_backward
    // A failed ds_step already reduced this window's gradients across ranks.
    virtual bool window_reduced() const = 0;
    // Reduced gradients wait in a partition for ds_step.
    virtual bool gradients_pending() const = 0;

    // ---- the optimizer step at a boundary ----
    // Finishes this window's gradients: pending buckets, zeros for
    // parameters that got none, the boundary reduction across ranks.
    virtual void reduce() = 0;
    // Sum of squares of the (scaled) gradient over every rank, and whether
    // any element is Inf/NaN; the same on every rank.
    virtual void grad_norm(double* sumsq, bool* overflow) = 0;
    // Runs `opt` over the range of the flat buffers this rank updates.
    virtual void run_optimizer(optim::Optimizer& opt, const optim::StepContext& ctx) = 0;
    // Brings the updated working weights back to every rank.
    virtual void after_step() = 0;
    // The gradient buffers hold nothing of the next window.
    virtual void drop_gradients() = 0;

    // ---- whole weights (ZeRO-3; no-ops where they are always whole) ----
    // ds_engine_gather / ds_engine_release of one parameter (validated).
    virtual void gather(Param& p) = 0;
    virtual void release(Param& p) = 0;
    // DS_ERR_INVALID_STATE when `p` is released without a matching gather.
    virtual void check_release(const Param& p) const = 0;
    // Whole working weights of a parameter that has none now, for one save;
    // drop_temporary() frees them again. Collective where they gather.
    virtual void gather_temporary(Param& p) = 0;
    virtual void drop_temporary(Param& p) = 0;

    // ---- full fp32 copies (ds_engine_get_full_* / set_full_*) ----
    // `state`: the optimizer state index. read_full is collective where
    // collective(GetFull); write_full writes this rank's part only.
    virtual void read_full(Param& p, FullTensor which, size_t state, Tensor& dst) = 0;
    virtual void write_full(Param& p, FullTensor which, size_t state, const Tensor& src) = 0;

    // ---- checkpoints ----
    virtual bool writes_optimizer_file() const = 0;  // this rank holds a part of the optimizer state
    virtual Holding holding(Param& p) = 0;
    // The working weights from a checkpoint (`bytes`: the whole parameter in
    // the working dtype): where this rank holds them.
    virtual void load_working(Param& p, const uint8_t* bytes) = 0;
    // The master weights and optimizer state of the ranges this rank holds,
    // from every saved fragment that overlaps them; the master from the
    // `working` weights (whole parameter, working dtype) widened, or from
    // the fragments' fp32 masters when `master_from_fp32`.
    virtual void load_fragments(Param& p, const uint8_t* working, const std::vector<SavedFragment>& saved,
                                bool master_from_fp32) = 0;
    // ds_save_16bit_model refused by the configuration (DS_ERR_INVALID_CONFIG).
    virtual void check_save_16bit_model() const = 0;

    // ---- storage outside memory ----
    // Bytes of fp32 master weights and of optimizer state this rank keeps
    // in NVMe swap files (offload_optimizer.h); 0 where none.
    virtual void disk_bytes(int64_t* params, int64_t* optimizer_state) const {
        *params = *optimizer_state = 0;
    }
    // Why the optimizer state on disk is not one step's state (a failed
    // in-place NVMe step, offload_optimizer.h), or empty; cleared when a
    // checkpoint's optimizer state was loaded over it.
    virtual std::string state_lost() const { return {}; }
    virtual void clear_state_lost() {}

    // ---- ds_engine_offload_states / ds_engine_empty_partition_cache ----
    // This rank's host buffers that hold the DS_OFFLOAD_* states in `kinds`,
    // each buffer once (a buffer serving two states is listed under the one
    // whose absence the engine can check: the working weights).
    virtual std::vector<StateBuffer> state_buffers(uint32_t kinds) {
        (void)kinds;
        return {};
    }
    // Bytes of this strategy's buffers that are allocated but not in memory
    // now (offload_param "nvme": pages of the working partition on disk).
    virtual int64_t released_bytes(MemCategory c) const {
        (void)c;
        return 0;
    }
    // Keeps reduction buckets between steps (DS_OFFLOAD_CONTIGUOUS_GRAD_BUFFER).
    virtual bool has_reduction_buckets() const { return false; }
    // Frees the whole working weights of every gathered, non-persistent
    // parameter (ZeRO-3); where weights are always whole, nothing.
    virtual void empty_partition_cache() {}
    // ZeRO-3: `p` is not gathered for the host (its whole copy may still be
    // there, kept for a use soon after: max_reuse_distance).
    virtual bool released(const Param& p) const {
        (void)p;
        return false;
    }

    // The host buffer every trainable Param's working weights are views of
    // (at Param::flat_offset, in the working dtype), or an undefined Tensor
    // where there is none (ZeRO-3 partitions the working weights). An
    // engine's device front mirrors it with one copy (engine/device_front.h).
    virtual Tensor flat_working() const { return {}; }
    // Called during run_optimizer each time elements [begin, begin + count)
    // of flat_working() hold their final values of the step, so an engine on
    // a GPU copies them while the step goes on (engine/device_front.h): the
    // pieces of an elementwise optimizer's pass, the sub-groups of an NVMe
    // optimizer state. A step that is neither (an optimizer that is not
    // elementwise, held in memory) never calls it: the engine copies the
    // buffer after the step. A step that fails after calling it has
    // restored the host buffer (DeviceFront::retract_uploads).
    using StepSink = std::function<void(int64_t begin, int64_t count)>;
    virtual void set_step_sink(StepSink sink) { (void)sink; }

    // ---- device-resident buffers (StrategyContext::device cuda:N) ----
    // park_on_host: host copies of every buffer stand in for the device ones
    // (the Params' views point at them, the CPU kernels run on them), so the
    // checkpoint code, which reads and writes host memory, runs unchanged.
    // unpark: back to the device buffers, which never moved
    // (a view taken before parking stays valid), after copying the host
    // copies into them when `write_back`. ZeRO-3 parks its gathered whole
    // copies too (a view of one is valid while it stays gathered).
    virtual void park_on_host() = 0;
    virtual void unpark(bool write_back) = 0;
    virtual bool parked() const = 0;
};

}  // namespace ds::zero
