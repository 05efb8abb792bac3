// ModelBinding (engine_model.h): binding the model's parameters to the
// engine's weights, for a pass (bind_weights / release_weights) and per
// transformer layer (LayerHooks: enter / leave), with ZeRO-3's gathers.
#include <cstddef>
#include <vector>

#include "core/dlpack_interop.h"
#include "core/error.h"
#include "core/kernel_backend.h"
#include "deepspeed_c.h"
#include "engine/engine.h"
#include "engine/engine_model.h"

namespace ds {

namespace {

// dst (fp32) = src (working weights on dst's device), widened exactly; on a
// GPU by its conversion kernel, so nothing crosses to the host.
void widen_into(Tensor& dst, const Tensor& src) {
    if (dst.device().is_cpu() || src.dtype() == dst.dtype()) {
        dst.copy_from(src);
        return;
    }
    kernels_for(dst.device())
        .convert(src.data_ptr(), dtype_to_kernel(src.dtype()), dst.data_ptr(), dtype_to_kernel(dst.dtype()),
                 static_cast<size_t>(src.numel()));
}

}  // namespace

// LayerHooks (nn/layer_scope.h): layer k's fp32 weights converted into the
// reusable buffer while it runs; its gradients in the other reusable buffer
// during its backward, handed to the engine as soon as it returns.
void ModelBinding::enter(size_t k, bool backward) {
    const auto& params = model_->params();
    if (stage3_ && !layer_gathered_[k]) {  // collective: every rank runs the same layers in order
        gather_all(layers_[k]);
        layer_gathered_[k] = 1;
    }
    if (prefetch_layers_) prefetch_next(k, backward);
    // The half of the gradient buffer this layer uses; its last user's
    // copies to the host must have read it first (grad_halves_ == 2 only).
    const size_t half = k % static_cast<size_t>(grad_halves_);
    int64_t w = 0, g = static_cast<int64_t>(half) * grad_stride_;
    if (backward && half_ticket_[half] != 0) {
        e_.fence_model_grad(half_ticket_[half]);
        half_ticket_[half] = 0;
    }
    for (size_t i : layers_[k]) {
        nn::Param& p = *params[i];
        const int64_t n = checked_numel(p.shape, p.name.c_str());
        if (stage3_ && direct16_[i]) p.value = e_.model_weights(e_.params().get(p.name.c_str()));
        if (layer_weights_ && !direct16_[i]) {
            Tensor v = weight_scratch_.view(p.shape, w);
            widen_into(v, e_.model_weights(e_.params().get(p.name.c_str())));
            p.value = v;
            w += n;
        }
        if (backward && handoff(i)) {
            p.grad = grad_scratch_.view(p.shape, g);
            p.grad.zero();
            g += n;
        }
    }
}

void ModelBinding::leave(size_t k, bool backward) {
    const auto& params = model_->params();
    for (size_t i : layers_[k]) {
        nn::Param& p = *params[i];
        if (backward && handoff(i)) {
            DLTensor g;
            fill_view(p.grad, &g);
            handed_ = true;
            const uint64_t ticket = e_.accumulate_model_grad(p.name.c_str(), &g);
            if (ticket != 0) half_ticket_[k % static_cast<size_t>(grad_halves_)] = ticket;
            p.grad = Tensor();
        }
        if (layer_weights_ && !direct16_[i]) p.value = Tensor();
        if (stage3_ && direct16_[i]) p.value = Tensor();
    }
    if (stage3_) release_layer(k);
}

// All or nothing (Engine::gather_params): a failed gather leaves the
// caller's flag unset and nothing to release.
void ModelBinding::gather_all(const std::vector<size_t>& which, bool ahead) {
    const auto& params = model_->params();
    std::vector<Param*> ps;
    for (size_t i : which) ps.push_back(&e_.params().get(params[i]->name.c_str()));
    e_.gather_params(ps, ahead);
}

void ModelBinding::prefetch_next(size_t k, bool backward) {
    if (backward != in_backward_) return;  // a recomputation: not the pass's order
    if (backward ? k == 0 : k + 1 >= layers_.size()) return;
    const size_t n = backward ? k - 1 : k + 1;
    if (layer_gathered_[n]) return;
    gather_all(layers_[n], /*ahead=*/true);  // collective, in the same order on every rank
    layer_gathered_[n] = 1;
    ++prefetched_;
}

void ModelBinding::release_layer(size_t k) noexcept {
    if (!layer_gathered_[k]) return;
    layer_gathered_[k] = 0;
    const auto& params = model_->params();
    for (size_t i : layers_[k]) {
        try {
            e_.strategy().release(e_.params().get(params[i]->name.c_str()));
        } catch (...) {  // the names were registered by this binding: cannot fail
        }
    }
    e_.drop_released_device_weights();
}


void ModelBinding::bind_weights() {
    const auto& params = model_->params();
    if (stage3_ && !gathered_) {  // the layers gather their own as they run (enter)
        std::vector<size_t> outside;
        for (size_t i = 0; i < params.size(); ++i)
            if (layer_of_[i] < 0) outside.push_back(i);
        gather_all(outside);
        gathered_ = true;
    }
    if (fp32_views_) return;
    for (size_t i = 0; i < params.size(); ++i) {
        if (layer_weights_ && layer_of_[i] >= 0) continue;  // converted when its layer runs
        nn::Param& p = *params[i];
        const Param& ep = e_.params().get(p.name.c_str());
        if (direct16_[i]) {  // the (gathered) bf16 working weights in place
            p.value = e_.model_weights(ep);
            continue;
        }
        if (!fp32_copies_[i].defined())
            fp32_copies_[i] = Tensor::empty(p.shape, DType::F32, dev_, e_.allocator(), MemCategory::Buffers);
        widen_into(fp32_copies_[i], e_.model_weights(ep));
        p.value = fp32_copies_[i];
    }
}

void ModelBinding::release_weights() noexcept {
    if (!stage3_) return;
    // A layer that threw before leaving keeps its gather until here.
    for (size_t k = 0; k < layers_.size(); ++k) release_layer(k);
    if (!gathered_) return;
    for (size_t i = 0; i < model_->params().size(); ++i) {
        nn::Param& p = *model_->params()[i];
        p.value = Tensor();
        fp32_copies_[i] = Tensor();
        if (layer_of_[i] >= 0) continue;  // released when its layer left
        try {
            e_.strategy().release(e_.params().get(p.name.c_str()));
        } catch (...) {  // the names were registered by this binding: cannot fail
        }
    }
    e_.drop_released_device_weights();
    gathered_ = false;
}

}  // namespace ds
