// The micro-step state machine and the optimizer step at an accumulation
// boundary (reference §4–§5): overflow check, loss-scaler update (before
// unscaling, as DeepSpeed's ZeRO optimizers do), global norm, one fused
// unscale x clip factor, the optimizer, the LR schedule, the counters.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/dlpack_interop.h"
#include "deepspeed_c.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/progress_report.h"
#include "engine/rank_agreement.h"
#include "kernels.h"

namespace ds {

// Copies a strided or misaligned gradient into grad_stage_ in row-major
// order (element bytes moved with memcpy: no typed load of a misaligned
// address). The scratch grows to the largest such gradient, then is reused.
const void* Engine::stage_gradient(const DLTensor* grad, size_t es, int64_t numel) {
    const size_t bytes = static_cast<size_t>(numel) * es;
    if (grad_stage_.size() * sizeof(float) < bytes) grad_stage_.resize((bytes + sizeof(float) - 1) / sizeof(float));
    unsigned char* dst = reinterpret_cast<unsigned char*>(grad_stage_.data());
    const unsigned char* base = static_cast<const unsigned char*>(dltensor_data(grad));
    if (numel == 0) return dst;
    if (dltensor_is_contiguous(grad)) {
        std::memcpy(dst, base, bytes);  // contiguous but misaligned
        return dst;
    }
    const int nd = grad->ndim;
    int64_t idx[kMaxTensorDims] = {0};
    const int64_t inner = grad->shape[nd - 1];
    const int64_t inner_stride = grad->strides[nd - 1] * static_cast<int64_t>(es);
    for (int64_t done = 0; done < numel; done += inner) {
        int64_t off = 0;  // bytes; validate_dltensor bounded the strided extent
        for (int d = 0; d < nd - 1; ++d) off += idx[d] * grad->strides[d] * static_cast<int64_t>(es);
        const unsigned char* src = base + off;
        if (inner_stride == static_cast<int64_t>(es)) {
            std::memcpy(dst, src, static_cast<size_t>(inner) * es);
            dst += static_cast<size_t>(inner) * es;
        } else {
            for (int64_t j = 0; j < inner; ++j, dst += es) std::memcpy(dst, src + j * inner_stride, es);
        }
        for (int d = nd - 2; d >= 0; --d) {  // next row-major index of the outer dims
            if (++idx[d] < grad->shape[d]) break;
            idx[d] = 0;
        }
    }
    return grad_stage_.data();
}

void Engine::accumulate_grad(const char* name, const DLTensor* grad, uint32_t flags) {
    require_initialized("ds_engine_accumulate_grad");
    DS_CHECK((flags & ~DS_GRAD_PREDIVIDED) == 0, DS_ERR_INVALID_ARGUMENT,
             "ds_engine_accumulate_grad_ex('%s'): flags = 0x%x has unknown bits (known: DS_GRAD_PREDIVIDED = 0x%x)",
             name, flags, DS_GRAD_PREDIVIDED);
    Param& p = trainable_param(name, "gradient");
    char what[160];  // no heap allocation on this hot path
    std::snprintf(what, sizeof what, "grad (parameter '%.100s')", name);
    validate_dltensor(grad, what);  // also: strides >= 0, the strided extent fits the address space
    expect_device(grad, Device::cpu(), what);
    expect_shape(grad, p.shape, what);
    const DType gdtype = dtype_from_dl(grad->dtype, what);
    DS_CHECK(gdtype == DType::F32 || gdtype == working_dtype_, DS_ERR_INVALID_ARGUMENT,
             "%s.dtype is %s: expected fp32 or the working dtype %s", what, dtype_name(gdtype),
             dtype_name(working_dtype_));
    DS_CHECK(!reduced_this_window_, DS_ERR_INVALID_STATE,
             "ds_engine_accumulate_grad('%s'): this window's gradients were already reduced across ranks "
             "by a failed ds_step; call ds_step again to finish the window",
             name);
    const void* gdata = dltensor_data(grad);
    const size_t es = dtype_size(gdtype);
    // Strided (e.g. column-major) or not aligned to its element size: read
    // through a row-major, aligned copy; the kernels load typed vectors.
    if (!dltensor_is_contiguous(grad) || reinterpret_cast<uintptr_t>(gdata) % es != 0)
        gdata = stage_gradient(grad, es, p.numel);
    // DeepSpeed divides the loss by gradient_accumulation_steps; we divide
    // each micro-batch gradient, which averages the window the same way —
    // unless the host already did (its loss times ds_engine_loss_multiplier).
    const float scale = (flags & DS_GRAD_PREDIVIDED) != 0
                            ? 1.0f
                            : 1.0f / static_cast<float>(config_.gradient_accumulation_steps);
    if (reducer_) {
        // ZeRO-2: into the bucket, pre-divided for the data-parallel mean.
        reducer_->add(static_cast<size_t>(p.trainable_index), gdata, dtype_to_kernel(gdtype),
                      scale * reduction_scales().first);
        return;
    }
    accumulate_with_norm(p, gdata, dtype_to_kernel(gdtype), scale);
}

double Engine::loss_multiplier() const {
    return scaler_.scale() / static_cast<double>(config_.gradient_accumulation_steps);
}

// buffer += scale * grad (or buffer = scale * grad when the buffer holds
// nothing of this window yet: no zeroing pass, no read of the old values),
// and the buffer's sum of squares and Inf/NaN flag, in one streaming pass
// (dsk_axpy_sumsq), so ds_step needs no separate pass over the gradients
// (world of one; with several ranks the reduction changes the buffer and the
// step sums it).
void Engine::accumulate_with_norm(Param& p, const void* grad, int gdtype, float scale) {
    const int gk = dtype_to_kernel(grad_dtype_);
    const bool first = p.grad_stale;
    int nonfinite = 0;
    const double sumsq = dsk_axpy_sumsq(p.grad.data_ptr(), gk, grad, gdtype, scale, first ? 1 : 0,
                                        static_cast<size_t>(p.numel), &nonfinite);
    p.grad_stale = false;
    p.norm_sumsq = sumsq;
    p.norm_nonfinite = nonfinite != 0;
    p.norm_cached = true;
}

void Engine::backward(const DLTensor* out_grad) {
    auto checks = [&] {
        require_initialized("ds_backward");
        DS_CHECK(out_grad == nullptr, DS_ERR_INVALID_ARGUMENT,
                 "out_grad must be NULL in host-driven mode (the engine has no built-in model)");
        return agree::CallArgs{};
    };
    // ZeRO 2/3 reduce here: collective, so the ranks agree first (rank_agreement.h).
    if (zero_stage_ >= 2) agree::enter(*comm_, agree::Call::Backward, checks);
    else checks();
    if (reducer_) reducer_->flush();  // ZeRO-2 reduces every micro-step
    backward_since_step_ = true;
    ++backward_calls_since_step_;
}

bool Engine::is_gradient_accumulation_boundary() const {
    if (forced_boundary_ >= 0) return forced_boundary_ == 1;
    if (!config_.managed_gradient_accumulation) return true;
    return (counters_.micro_steps + 1) % config_.gradient_accumulation_steps == 0;
}

void Engine::set_gradient_accumulation_boundary(bool value) {
    DS_CHECK(config_.managed_gradient_accumulation, DS_ERR_INVALID_STATE,
             "ds_engine_set_gradient_accumulation_boundary is not allowed when "
             "managed_gradient_accumulation is false (every ds_step is a boundary)");
    forced_boundary_ = value ? 1 : 0;
}

// The norm accumulate_grad computed, when every trainable gradient still
// holds exactly what it wrote (world of one: no reduction changed them).
bool Engine::cached_norm(double* sumsq, bool* overflow) const {
    if (world_size_ != 1) return false;
    double total = 0.0;
    bool any = false;
    for (const Param& p : params_.all()) {
        if (!p.trainable) continue;
        if (!p.norm_cached || p.grad_viewed) return false;
        total += p.norm_sumsq;
        any = any || p.norm_nonfinite;
    }
    *sumsq = total;
    *overflow = any;
    return true;
}

void Engine::drop_gradients() {
    params_.drop_gradients();
    reduced_this_window_ = false;
}

StepResult Engine::step() {
    const bool boundary = is_gradient_accumulation_boundary();
    // Collective at a boundary: every rank checks its own state, then all
    // agree on the call and on whether this is a boundary (rank_agreement.h).
    agree::enter(*comm_, agree::Call::Step, [&] {
        require_initialized("ds_step");
        DS_CHECK(backward_since_step_, DS_ERR_INVALID_STATE,
                 "ds_step called without ds_backward since the last ds_step (call ds_backward first)");
        agree::CallArgs a;
        a.detail = boundary ? 1 : 0;
        a.detail_name = "boundary";
        a.what = "gradient accumulation boundary (ds_engine_set_gradient_accumulation_boundary)";
        return a;
    });
    StepResult r;
    if (boundary) r = optimizer_step();  // throws before changing anything
    if (boundary) {
        ++counters_.global_steps;
        if (config_.managed_gradient_accumulation)
            counters_.global_samples += config_.train_batch_size;
        else
            counters_.global_samples += config_.train_micro_batch_size_per_gpu * world_size_ *
                                        backward_calls_since_step_;
        backward_calls_since_step_ = 0;
    }
    ++counters_.micro_steps;
    backward_since_step_ = false;
    if (boundary) report_progress(*this);  // steps_per_print (progress_report.cpp)
    return r;
}

StepResult Engine::optimizer_step() {
    StepResult r;
    r.stepped = true;
    r.lr = lr_;
    if (!optimizer_) {  // only frozen parameters: nothing to update
        drop_gradients();
        return r;
    }

    if (reducer_ && !reducer_->idle()) reducer_->flush();
    // A parameter that got no gradient this window steps with zeros (as
    // ZeRO's zero-filled flat buffers); normally none is stale here.
    FlatBuffers& flat = params_.flat();
    if (flat.grad_partitioned) {
        if (flat.grad_stale) {
            flat.grad.zero();
            flat.grad_stale = false;
        }
    } else {
        for (Param& p : params_.all())
            if (p.trainable) ParamStore::clear_if_stale(p);
    }
    reduce_full_gradients();  // ZeRO 0/1 across ranks (once per window)
    double sumsq = 0.0;
    bool overflow = false;
    if (!cached_norm(&sumsq, &overflow)) global_norm_and_overflow(&sumsq, &overflow);
    const int gk = dtype_to_kernel(grad_dtype_);
    // A non-finite norm is always an overflow (skip), never a clip
    // coefficient: DeepSpeed's -1 sentinel would flip or keep NaN updates.
    overflow = overflow || !std::isfinite(sumsq);

    const double old_scale = scaler_.scale();
    scaler_.update(overflow);  // may throw at the minimum scale: nothing changed yet
    if (overflow) {
        ++counters_.skipped_steps;
        drop_gradients();
        r.skipped = true;
        r.grad_norm = NAN;
        DS_LOG(logger_, DS_LOG_INFO, "step %lld skipped: gradient overflow; loss scale %g -> %g",
               static_cast<long long>(counters_.global_steps + 1), old_scale, scaler_.scale());
        return r;
    }

    // Unscale and clip as one factor (reference §5.4), with the scale as
    // updated above (DeepSpeed's order: growth halves this step's gradients).
    const double scale = scaler_.scale();
    const double scaled_norm = std::sqrt(sumsq);
    r.grad_norm = scaled_norm / old_scale;
    double combined = scale;
    const double clip = config_.gradient_clipping;
    if (clip > 0.0) {
        const double c = (scaled_norm / scale + 1e-6) / clip;
        if (c > 1.0) combined = c * scale;
    }

    ++counters_.optimizer_steps;
    optim::StepContext ctx;
    ctx.step = counters_.optimizer_steps;
    ctx.lr = lr_;
    ctx.beta1 = beta1_;
    ctx.beta2 = beta2_;
    ctx.grad_scale = static_cast<float>(1.0 / combined);
    // This rank updates flat range [part_begin, part_begin + part_numel):
    // everything without partitioning (then only the real elements).
    const bool split = partitioned();
    const size_t n = static_cast<size_t>(split ? flat.part_numel : flat.numel);
    char* grad_base = static_cast<char*>(flat.grad.data_ptr()) +
                      (flat.grad_partitioned ? 0 : flat.part_begin * static_cast<int64_t>(flat.grad.element_size()));
    char* work_base = static_cast<char*>(flat.working.data_ptr()) +
                      flat.part_begin * static_cast<int64_t>(flat.working.element_size());
    const bool has_w16 = working_dtype_ != DType::F32;
    auto run = [&](float* master, void* grad, void* working, size_t count, int64_t offset) {
        std::vector<void*>& states = state_ptrs_;  // reused: no allocation per step
        states.clear();
        for (Tensor& s : flat.state)
            states.push_back(static_cast<char*>(s.data_ptr()) + offset * static_cast<int64_t>(s.element_size()));
        optim::ParamBuffers b;
        b.master = master;
        b.grad = grad;
        b.grad_dtype = gk;
        b.w16 = has_w16 ? working : nullptr;
        b.w_dtype = has_w16 ? dtype_to_kernel(working_dtype_) : DSK_F32;
        b.numel = count;
        b.states = states.data();
        optimizer_->update(b, ctx);
    };
    if (optimizer_->elementwise()) {
        // One fused pass over this rank's range of every trainable parameter.
        if (n > 0) run(flat.master.data<float>(), grad_base, work_base, n, 0);
    } else {
        for (Param& p : params_.all())
            if (p.trainable)
                run(p.master.data<float>(), p.grad.data_ptr(), p.working.data_ptr(),
                    static_cast<size_t>(p.numel), p.flat_offset);
    }
    if (split) {
        // fp32 weights are their own working copy: refresh it from the master.
        if (!has_w16 && n > 0 && work_base != flat.master.data_ptr())
            std::memcpy(work_base, flat.master.data_ptr(), n * sizeof(float));
        if (flat.stage3) refresh_gathered(/*include_persistent=*/true);
        else allgather_working();
    }
    drop_gradients();
    if (scheduler_) {
        scheduler_->step();
        apply_schedule();
    }
    return r;
}

}  // namespace ds
