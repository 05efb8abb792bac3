// OffloadOptimizer (offload_optimizer.h): sub-groups, initial state, and
// the streamed optimizer step with its restore on failure.
#include "zero/offload_optimizer.h"

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <exception>

#include "core/error.h"

namespace ds::zero {

namespace {

// Sub-group sizes are multiples of this many elements: every sub-group
// starts on a 4 KiB boundary of each fp32 tensor and on the same SIMD
// lane as in one whole-range kernel call (bit-identical to no offload).
constexpr int64_t kGroupQuantum = 1024;

}  // namespace

bool OffloadOptimizer::wanted(const config::Config& c) {
    const auto& o = c.zero_optimization.offload_optimizer;
    return o && o->device == "nvme";
}

OffloadOptimizer::OffloadOptimizer(const config::Config& c, int32_t rank, int64_t range, size_t n_states,
                                   DType state_dtype, std::vector<std::pair<int64_t, int64_t>> param_spans,
                                   Allocator& alloc, const Kernels& kernels)
    : state_dtype_(state_dtype), n_states_(n_states), param_spans_(std::move(param_spans)), kernels_(kernels) {
    const config::OffloadOptimizerConfig& o = *c.zero_optimization.offload_optimizer;
    DS_CHECK(o.nvme_path && !o.nvme_path->empty(), DS_ERR_INVALID_CONFIG,
             "zero_optimization.offload_optimizer.nvme_path: device \"nvme\" requires nvme_path");
    DS_CHECK(o.buffer_count >= 1, DS_ERR_INVALID_CONFIG,
             "zero_optimization.offload_optimizer.buffer_count: must be >= 1 with device \"nvme\", got %lld",
             static_cast<long long>(o.buffer_count));
    if (c.optimizer) elementwise_ = optim::Optimizer::create(*c.optimizer, c.model_dtype())->elementwise();
    SwapOptions so;
    so.nvme_path = *o.nvme_path;
    so.rank = rank;
    so.buffer_count = o.buffer_count;
    so.pipeline_read = o.pipeline_read;
    so.pipeline_write = o.pipeline_write;
    so.atomic_step = o.dsc_atomic_step;
    so.aio.block_size = c.sections.aio.block_size;
    so.aio.queue_depth = c.sections.aio.queue_depth;
    so.aio.single_submit = c.sections.aio.single_submit;
    std::vector<size_t> sizes(1 + n_states, dtype_size(state_dtype));
    sizes[0] = sizeof(float);
    swapper_ = std::make_unique<NvmeSwapper>(so, std::move(sizes), make_groups(range, c.zero_optimization.sub_group_size),
                                             alloc);
}

// Elementwise optimizers: fixed sub-groups of sub_group_size elements
// (rounded up to kGroupQuantum). Otherwise whole parameters, packed in
// registration order until a sub-group would exceed sub_group_size (a
// larger parameter is a sub-group of its own).
std::vector<SubGroup> OffloadOptimizer::make_groups(int64_t range, int64_t sub_group_size) const {
    std::vector<SubGroup> out;
    const int64_t size = std::max<int64_t>(kGroupQuantum, (std::max<int64_t>(1, sub_group_size) + kGroupQuantum - 1) /
                                                              kGroupQuantum * kGroupQuantum);
    if (elementwise_) {
        for (int64_t b = 0; b < range; b += size) out.push_back({b, std::min(size, range - b)});
        return out;
    }
    SubGroup cur{0, 0};
    int64_t end = 0;
    for (const auto& [off, len] : param_spans_) {
        if (cur.count > 0 && off + len - cur.begin > size) {
            out.push_back(cur);
            cur = {off, 0};
        }
        if (cur.count == 0) cur.begin = off;
        cur.count = off + len - cur.begin;
        end = off + len;
    }
    if (cur.count > 0) out.push_back(cur);
    if (end < range) out.push_back({end, range - end});  // padding: stored, never stepped
    return out;
}

void OffloadOptimizer::initialize(const std::function<void(int64_t, int64_t, float*)>& fill) {
    swapper_->initialize([&](size_t, const SubGroup& g, uint8_t* const* t) {
        fill(g.begin, g.count, reinterpret_cast<float*>(t[0]));  // states stay zero
    });
}

void OffloadOptimizer::step(optim::Optimizer& opt, const optim::StepContext& sc, int64_t n, const char* grad,
                            DType grad_dtype, char* working, DType working_dtype,
                            const std::function<void(int64_t begin, int64_t count)>& written) {
    const int gk = dtype_to_kernel(grad_dtype), wk = dtype_to_kernel(working_dtype);
    const int64_t ges = static_cast<int64_t>(dtype_size(grad_dtype)), wes = static_cast<int64_t>(dtype_size(working_dtype));
    const bool w16 = working_dtype != DType::F32;
    auto run = [&](float* master, uint8_t* const* t, int64_t elem0, int64_t begin, int64_t count) {
        state_ptrs_.clear();
        for (size_t s = 0; s < n_states_; ++s)
            state_ptrs_.push_back(t[1 + s] + (begin - elem0) * static_cast<int64_t>(dtype_size(state_dtype_)));
        optim::ParamBuffers b;
        b.master = master + (begin - elem0);
        b.grad = grad + begin * ges;
        b.grad_dtype = gk;
        b.w16 = w16 ? working + begin * wes : nullptr;
        b.w_dtype = w16 ? wk : DSK_F32;
        b.numel = static_cast<size_t>(count);
        b.states = state_ptrs_.data();
        opt.update(b, sc);
        if (!w16) std::memcpy(working + begin * wes, b.master, static_cast<size_t>(count) * sizeof(float));
    };
    size_t done = 0;
    try {
        swapper_->step(
            [&](size_t, const SubGroup& g, uint8_t* const* t) {
                float* master = reinterpret_cast<float*>(t[0]);
                const int64_t count = std::min(g.count, n - g.begin);
                if (elementwise_) {
                    if (count > 0) run(master, t, g.begin, g.begin, count);
                } else {
                    for (const auto& [off, len] : param_spans_)
                        if (off >= g.begin && off + len <= g.begin + g.count && len > 0)
                            run(master, t, g.begin, off, len);
                }
                if (written && count > 0) written(g.begin, count);
            },
            &done);
    } catch (...) {
        const std::exception_ptr e = std::current_exception();
        if (!swapper_->atomic_step() && done > 0) in_place_failure(e, done);
        // The committed master is the one before this step: the working
        // weights of the sub-groups already updated come back from it.
        try {
            swapper_->read_committed(done, [&](size_t, const SubGroup& g, uint8_t* const* t) {
                const int64_t count = std::min(g.count, n - g.begin);
                if (count > 0)
                    kernels_.convert(t[0], DSK_F32, working + g.begin * wes, wk, static_cast<size_t>(count));
            });
        } catch (const std::exception& r) {
            std::string first = "the step failed";
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                first = x.what();
            } catch (...) {
            }
            fail(DS_ERR_IO, "%s; restoring the working weights from %s failed as well (%s): the model's weights are "
                 "partly updated", first.c_str(), swapper_->file().c_str(), r.what());
        }
        std::rethrow_exception(e);
    }
}

// Single-slot file: sub-groups [0, done) were written in place (or were
// being written when the error came), so neither the old nor the new state
// is whole on disk and the working weights cannot be restored. Marks the
// state lost and says so in the step's error (its status kept).
void OffloadOptimizer::in_place_failure(const std::exception_ptr& e, size_t done) {
    ds_status_t status = DS_ERR_IO;
    std::string what = "the step failed";
    try {
        std::rethrow_exception(e);
    } catch (const Error& x) {
        status = x.status();
        what = x.what();
    } catch (const std::exception& x) {
        what = x.what();
    } catch (...) {
    }
    const size_t n = swapper_->groups().size();
    char head[96], rest[64] = "";
    std::snprintf(head, sizeof head, "sub-groups 0..%zu of %zu had already been updated in place in ", done - 1, n);
    if (done < n) std::snprintf(rest, sizeof rest, ", sub-groups %zu..%zu not", done, n - 1);
    lost_ = head + swapper_->file() + " (zero_optimization.offload_optimizer.dsc_atomic_step false; sub-group " +
            std::to_string(done - 1) + " possibly only in part)" + rest;
    fail(status, "%s; %s: the optimizer state and weights are a mix of two steps, training is refused until "
         "ds_load_checkpoint loads a checkpoint with its optimizer states", what.c_str(), lost_.c_str());
}

}  // namespace ds::zero
