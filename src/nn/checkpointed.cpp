#include "nn/checkpointed.h"

#include "core/error.h"

namespace ds::nn {

Checkpointed::Checkpointed(std::unique_ptr<Module> inner, Allocator* cpu_pool)
    : inner_(std::move(inner)), cpu_pool_(cpu_pool) {
    DS_CHECK(inner_ != nullptr, DS_ERR_INTERNAL, "Checkpointed: no inner module");
    set_name(inner_->name());
}

Checkpointed::~Checkpointed() { drop_input(); }

void Checkpointed::drop_input() {
    if (meter_ != nullptr && input_bytes_ > 0) meter_->sub(input_bytes_);
    input_ = Tensor();
    input_bytes_ = 0;
    meter_ = nullptr;
}

Tensor Checkpointed::forward(const Tensor& x, RunContext& ctx) {
    drop_input();
    Tensor y = call_forward(*inner_, x, ctx);
    if (!ctx.training) return y;
    inner_->clear_saved();  // what the inner module kept for backward goes now
    if (cpu_pool_ != nullptr) {
        // cpu_checkpointing: the input waits in host memory (from a GPU too).
        input_ = Tensor::empty(x.shape(), x.dtype(), Device::cpu(), *cpu_pool_, MemCategory::Buffers);
        input_.copy_from(x);
    } else if (!x.owns_storage()) {
        // A borrowed input (the caller's memory) is copied too: it may not
        // outlive this call.
        input_ = x.to(x.dtype(), ctx.alloc != nullptr ? *ctx.alloc : Allocator::process(), MemCategory::Buffers);
    } else {
        input_ = x;
    }
    input_bytes_ = static_cast<int64_t>(input_.nbytes());
    meter_ = ctx.meter;
    if (meter_ != nullptr) meter_->add(input_bytes_);
    seed_ = ctx.seed;
    forward_index_ = ctx.forward_index;
    return y;
}

Tensor Checkpointed::backward(const Tensor& dy, RunContext& ctx) {
    DS_CHECK(input_.defined(), DS_ERR_INVALID_STATE,
             "%s: backward without a training forward (nothing was kept for recomputation)",
             name().empty() ? "checkpointed layer" : name().c_str());
    RunContext rc = ctx;
    rc.training = true;
    rc.seed = seed_;
    rc.forward_index = forward_index_;
    rc.hooks = nullptr;  // the recomputation is not a forward of the model
    Tensor x = input_;
    if (x.device() != ctx.device) {  // back from the host pool to the run's device
        x = Tensor::empty(input_.shape(), input_.dtype(), ctx.device,
                          ctx.alloc != nullptr ? *ctx.alloc : Allocator::process(), MemCategory::Buffers);
        x.copy_from(input_);
    }
    inner_->forward(x, rc);  // the same masks: (seed, forward_index, module ids) are the forward's
    Tensor dx = inner_->backward(dy, rc);
    drop_input();
    return dx;
}

void Checkpointed::clear_saved() {
    inner_->clear_saved();
    drop_input();
}

}  // namespace ds::nn
