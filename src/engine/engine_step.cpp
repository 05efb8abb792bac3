// The micro-step state machine and the optimizer step at an accumulation
// boundary (DEEPSPEED_SEMANTICS.md §4–§5): overflow check, loss-scaler update (before
// unscaling, as DeepSpeed's ZeRO optimizers do), global norm, one fused
// unscale x clip factor, the optimizer, the LR schedule, the counters.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/dlpack_interop.h"
#include "deepspeed_c.h"
#include "core/error.h"
#include "engine/device_front.h"
#include "engine/engine.h"
#include "engine/engine_model.h"
#include "engine/progress_report.h"
#include "engine/rank_agreement.h"

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
    accumulate_grad_impl(name, grad, flags, /*queue=*/false);
}

uint64_t Engine::accumulate_model_grad(const char* name, const DLTensor* grad) {
    return accumulate_grad_impl(name, grad, DS_GRAD_PREDIVIDED, /*queue=*/front_ != nullptr);
}

void Engine::fence_model_grad(uint64_t ticket) {
    if (front_ && ticket != 0) front_->grads().fence(ticket);
}

void Engine::drain_model_grads() {
    if (front_) front_->grads().drain();
}

void Engine::discard_model_grads() noexcept {
    if (front_) front_->grads().discard();
}

uint64_t Engine::accumulate_grad_impl(const char* name, const DLTensor* grad, uint32_t flags, bool queue) {
    require_initialized("ds_engine_accumulate_grad");
    DS_CHECK((flags & ~DS_GRAD_PREDIVIDED) == 0, DS_ERR_INVALID_ARGUMENT,
             "ds_engine_accumulate_grad_ex('%s'): flags = 0x%x has unknown bits (known: DS_GRAD_PREDIVIDED = 0x%x)",
             name, flags, DS_GRAD_PREDIVIDED);
    Param& p = trainable_param(name, "gradient");
    require_on_device();
    char what[160];  // no heap allocation on this hot path
    std::snprintf(what, sizeof what, "grad (parameter '%.100s')", name);
    validate_dltensor(grad, what);  // also: strides >= 0, the strided extent fits the address space
    expect_device(grad, device_, what);
    expect_shape(grad, p.shape, what);
    const DType gdtype = dtype_from_dl(grad->dtype, what);
    DS_CHECK(gdtype == DType::F32 || gdtype == working_dtype_, DS_ERR_INVALID_ARGUMENT,
             "%s.dtype is %s: expected fp32 or the working dtype %s", what, dtype_name(gdtype),
             dtype_name(working_dtype_));
    DS_CHECK(!strategy_->window_reduced(), DS_ERR_INVALID_STATE,
             "ds_engine_accumulate_grad('%s'): this window's gradients were already reduced across ranks "
             "by a failed ds_step; call ds_step again to finish the window",
             name);
    const void* gdata = dltensor_data(grad);
    const size_t es = dtype_size(gdtype);
    // DeepSpeed divides the loss by gradient_accumulation_steps; we divide
    // each micro-batch gradient, which averages the window the same way —
    // unless the host already did (its loss times ds_engine_loss_multiplier).
    const float scale = (flags & DS_GRAD_PREDIVIDED) != 0
                            ? 1.0f
                            : 1.0f / static_cast<float>(config_.gradient_accumulation_steps);
    if (device_.is_cuda()) {
        DS_CHECK(dltensor_is_contiguous(grad) && reinterpret_cast<uintptr_t>(gdata) % es == 0,
                 DS_ERR_INVALID_ARGUMENT,
                 "%s: a gradient in %s memory must be contiguous (row-major) and aligned to its element size", what,
                 device_.str().c_str());
        // ZeRO-Offload: accumulated on the host (device_front.h); device-resident: on the device.
        if (front_ && queue) {
            const int kd = dtype_to_kernel(gdtype);
            Param* pp = &p;  // ParamStore's parameters do not move after init
            return front_->grads().submit(
                gdata, static_cast<size_t>(p.numel) * es,
                [this, pp, kd, scale](const void* host) { strategy_->accumulate(*pp, host, kd, scale); }, what);
        }
        if (front_) gdata = front_->to_host(gdata, static_cast<size_t>(p.numel) * es, what);
    }
    const auto on = device_scope();  // a device-resident engine's kernels run on its device
    // Strided (e.g. column-major) or not aligned to its element size: read
    // through a row-major, aligned copy; the kernels load typed vectors.
    if (!dltensor_is_contiguous(grad) || reinterpret_cast<uintptr_t>(gdata) % es != 0)
        gdata = stage_gradient(grad, es, p.numel);
    strategy_->accumulate(p, gdata, dtype_to_kernel(gdtype), scale);
    return 0;
}

double Engine::loss_multiplier() const {
    return scaler_.scale() / static_cast<double>(config_.gradient_accumulation_steps);
}

// A failed single-slot NVMe step, or a checkpoint load that failed while
// writing the state, left the state a mix of two.
void Engine::require_state_whole(const char* call) const {
    DS_CHECK(load_failed_.empty(), DS_ERR_INVALID_STATE,
             "%s refused: %s; load a checkpoint with ds_load_checkpoint first", call, load_failed_.c_str());
    const std::string why = strategy_->state_lost();
    DS_CHECK(why.empty(), DS_ERR_INVALID_STATE,
             "%s refused: a failed ds_step left the optimizer state partly updated (%s); load a checkpoint with "
             "ds_load_checkpoint (with its optimizer states) first",
             call, why.c_str());
}

void Engine::backward(const DLTensor* out_grad) {
    auto checks = [&] {
        require_initialized("ds_backward");
        require_state_whole("ds_backward");
        if (model_)
            model_->check_backward(out_grad);
        else
            DS_CHECK(out_grad == nullptr, DS_ERR_INVALID_ARGUMENT,
                     "out_grad must be NULL in host-driven mode (the engine has no built-in model)");
        return agree::CallArgs{};
    };
    monitor::MonitorHub::Scope timed(*monitors_, monitor::Phase::Backward);  // wall_clock_breakdown
    comm::CallerScope caller("backward");  // comms_logger.debug
    // ZeRO 2/3 reduce here: collective, so the ranks agree first (rank_agreement.h).
    if (strategy_->collective(zero::Collective::Backward)) agree::enter(*comm_, agree::Call::Backward, checks);
    else checks();
    require_on_device();
    {
        // A built-in model's backward, each gradient handed to accumulate_grad
        // (host-driven: the host computed the gradients before ds_backward).
        monitor::MonitorHub::Scope inner(*monitors_, monitor::Phase::BackwardInner);
        const auto on = model_device_scope();  // a built-in model's kernels run on the engine's GPU
        if (model_) model_->run_backward(out_grad);
    }
    {
        monitor::MonitorHub::Scope reduce(*monitors_, monitor::Phase::BackwardAllreduce);
        strategy_->on_backward();
    }
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

void Engine::drop_gradients() noexcept {
    discard_model_grads();
    params_.drop_gradients();
    strategy_->drop_gradients();
    if (front_) front_->drop_released();  // ZeRO-3's copies kept for reuse went with the window
}

void Engine::reset_window() noexcept {
    drop_gradients();
    backward_since_step_ = false;
    backward_calls_since_step_ = 0;
}

StepResult Engine::step() {
    const bool boundary = is_gradient_accumulation_boundary();
    const int64_t steps_at_entry = counters_.global_steps;
    StepResult r = timed_step(boundary);
    if (boundary) report_progress(*this);  // steps_per_print (progress_report.cpp)
    monitor::StepInfo info;
    info.boundary = boundary;
    info.steps_at_entry = steps_at_entry;
    info.global_steps = counters_.global_steps;
    info.global_samples = counters_.global_samples;
    info.lr = lr_;
    if (config_.fp16.enabled) info.loss_scale = scaler_.scale();
    monitors_->step_end(info);  // events, wall_clock_breakdown lines
    return r;
}

StepResult Engine::timed_step(bool boundary) {
    monitor::MonitorHub::Scope timed(*monitors_, monitor::Phase::Step);  // wall_clock_breakdown
    require_on_device();
    const auto on = device_scope();  // a device-resident engine's kernels run on its device
    comm::CallerScope caller("step");  // comms_logger.debug
    // Collective at a boundary: every rank checks its own state, then all
    // agree on the call and on whether this is a boundary (rank_agreement.h).
    agree::enter(*comm_, agree::Call::Step, [&] {
        require_initialized("ds_step");
        require_state_whole("ds_step");
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
            counters_.global_samples += config_.train_micro_batch_size_per_gpu * batch_world_size_ *
                                        backward_calls_since_step_;
        backward_calls_since_step_ = 0;
    }
    ++counters_.micro_steps;
    backward_since_step_ = false;
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

    if (pre_reduce_) pre_reduce_();  // expert parallelism: gradients across the expert group
    strategy_->reduce();  // this window's gradients, complete and reduced across ranks
    double sumsq = 0.0;
    bool overflow = false;
    strategy_->grad_norm(&sumsq, &overflow);
    if (norm_combiner_) norm_combiner_(&sumsq, &overflow);  // the other pipeline stages'
    // A non-finite norm is always an overflow (skip), never a clip
    // coefficient: DeepSpeed's -1 sentinel would flip or keep NaN updates.
    overflow = overflow || !std::isfinite(sumsq);

    const double old_scale = scaler_.scale();
    const precision::LossScaler scaler_before = scaler_;
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

    // Unscale and clip as one factor (DEEPSPEED_SEMANTICS.md §5.4), with the scale as
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

    optim::StepContext ctx;
    ctx.step = counters_.optimizer_steps + 1;
    ctx.lr = lr_;
    ctx.beta1 = beta1_;
    ctx.beta2 = beta2_;
    ctx.grad_scale = static_cast<float>(1.0 / combined);
    try {
        strategy_->run_optimizer(*optimizer_, ctx);  // over the range this rank updates
    } catch (...) {
        // A failed update (NVMe optimizer state: an I/O error) left the
        // weights and state as they were: so are the counters and the scale.
        if (front_) {  // copies the step queued before it failed: the device gets the restored weights again
            try {
                front_->retract_uploads();
            } catch (const std::exception& x) {
                DS_LOG(logger_, DS_LOG_ERROR,
                       "after the failed step, copying the restored weights to %s failed too (%s): its weights may "
                       "hold part of the failed update until the next step or load refreshes them",
                       front_->device().str().c_str(), x.what());
            }
        }
        restore_scaler(scaler_before);
        throw;
    }
    ++counters_.optimizer_steps;
    strategy_->after_step();                     // the updated weights back on every rank
    refresh_device_weights(/*trained_only=*/true);  // ZeRO-Offload on cuda:N: and to the device
    drop_gradients();
    if (scheduler_) {
        scheduler_->step();
        apply_schedule();
    }
    return r;
}

}  // namespace ds
