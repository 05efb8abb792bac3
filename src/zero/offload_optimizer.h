// Optimizer state on NVMe for every ZeRO stage (stage3.cpp gives it the
// rank's concatenated chunks): zero_optimization.offload_optimizer.device "nvme". The
// rank's fp32 master weights and optimizer state of the range it updates
// live in an NvmeSwapper file, in sub-groups of sub_group_size elements;
// ds_step streams them through the fused optimizer kernels and writes the
// working weights (fp32 or 16-bit) as it goes. A failed step restores the
// working weights of the sub-groups it had already updated from the
// committed master (which the swapper left untouched), so the model is as
// it was — with the two-slot file. With dsc_atomic_step false (one slot per
// sub-group, written in place) a step that fails after updating sub-groups
// leaves them updated: the state is marked lost (lost() says why) until a
// checkpoint is loaded, and the engine refuses to train on it.
// FlatStrategy owns one when the config asks for it.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "core/allocator.h"
#include "core/kernel_backend.h"
#include "optim/optimizer.h"
#include "zero/nvme_swapper.h"

namespace ds::zero {

class OffloadOptimizer {
public:
    // True when the config puts optimizer state on NVMe.
    static bool wanted(const config::Config& c);

    // `range`: elements of the rank's master/state range. `param_spans`:
    // (offset, length) of each trainable parameter inside it, used only
    // when the configured optimizer is not elementwise (Lamb: a sub-group
    // then holds whole parameters).
    OffloadOptimizer(const config::Config& c, int32_t rank, int64_t range, size_t n_states, DType state_dtype,
                     std::vector<std::pair<int64_t, int64_t>> param_spans, Allocator& alloc, const Kernels& kernels);

    // Writes the initial master weights (`fill(begin, count, dst)` sets
    // elements [begin, begin + count) of the range) and zeroed state.
    void initialize(const std::function<void(int64_t begin, int64_t count, float* dst)>& fill);

    // The optimizer over elements [0, n) of the range: `grad` and `working`
    // point at element 0 of the range in their buffers. The working
    // weights get the updated master (converted to `working_dtype`). When
    // `written` is given it is called with each sub-group's elements
    // [begin, begin + count) of the range as soon as their working weights
    // are written (an engine on a GPU copies them while the next sub-group
    // steps); if the step then fails, the working weights it restores
    // include ranges already handed over.
    void step(optim::Optimizer& opt, const optim::StepContext& sc, int64_t n, const char* grad, DType grad_dtype,
              char* working, DType working_dtype,
              const std::function<void(int64_t begin, int64_t count)>& written = {});

    // Committed master (t = 0) or state t - 1, elements [begin, begin + count), as stored.
    void read(size_t t, int64_t begin, int64_t count, void* dst) { swapper_->read_range(t, begin, count, dst); }
    void write(size_t t, int64_t begin, int64_t count, const void* src) { swapper_->write_range(t, begin, count, src); }
    DType dtype(size_t t) const { return t == 0 ? DType::F32 : state_dtype_; }

    const NvmeSwapper& swapper() const { return *swapper_; }

    // Why the state in the file is not one step's (a failed single-slot
    // step), or empty; clear_lost() after a checkpoint rewrote all of it.
    const std::string& lost() const { return lost_; }
    void clear_lost() { lost_.clear(); }

private:
    std::vector<SubGroup> make_groups(int64_t range, int64_t sub_group_size) const;
    [[noreturn]] void in_place_failure(const std::exception_ptr& e, size_t done);

    DType state_dtype_;
    size_t n_states_;
    bool elementwise_ = true;
    std::vector<std::pair<int64_t, int64_t>> param_spans_;
    Kernels kernels_;
    std::unique_ptr<NvmeSwapper> swapper_;
    std::vector<void*> state_ptrs_;  // scratch, no allocation per step
    std::string lost_;
};

}  // namespace ds::zero
