// The flat buffers behind each DS_OFFLOAD_* state (ds_engine_offload_states,
// state_swap.h): the optimizer moments, the fp32 master partition, the
// working weights (ZeRO-3: this rank's partition of them) and the gradient
// buffer or partition. What is on NVMe already (offload_optimizer "nvme")
// and ZeRO-3's gathered whole copies are not listed.
#include "core/error.h"
#include "deepspeed_c.h"
#include "zero/flat_strategy.h"

namespace ds::zero {

namespace {

void add(std::vector<StateBuffer>& out, uint32_t kind, MemCategory c, const Tensor& t, const char* what) {
    if (!t.defined() || t.numel() == 0) return;
    DS_CHECK(t.device().is_cpu(), DS_ERR_UNSUPPORTED,
             "ds_engine_offload_states: the %s live on a CUDA device; moving device memory to NVMe is not built",
             what);
    StateBuffer b;
    b.kind = kind;
    b.category = c;
    b.data = t.data_ptr();
    b.bytes = static_cast<size_t>(t.numel()) * t.element_size();
    b.what = what;
    out.push_back(std::move(b));
}

}  // namespace

std::vector<StateBuffer> FlatStrategy::state_buffers(uint32_t kinds) {
    std::vector<StateBuffer> out;
    if (kinds & DS_OFFLOAD_OPTIM_STATES)
        for (const Tensor& s : flat_.state) add(out, DS_OFFLOAD_OPTIM_STATES, MemCategory::OptimizerState, s, "optimizer states");
    // fp32 weights that are the master itself: one buffer, moved as the working weights.
    const bool shared = flat_.master.defined() && flat_.working.defined() &&
                        flat_.master.data_ptr() == flat_.working.data_ptr();
    if ((kinds & DS_OFFLOAD_HP_PARAMS) && !shared)
        add(out, DS_OFFLOAD_HP_PARAMS, MemCategory::Params, flat_.master, "fp32 master weights");
    if (kinds & DS_OFFLOAD_LP_PARAMS)
        add(out, DS_OFFLOAD_LP_PARAMS, MemCategory::Params, flat_.working,
            shared ? "working weights (the fp32 master weights themselves)" : "working weights");
    if (kinds & DS_OFFLOAD_LP_GRADS) add(out, DS_OFFLOAD_LP_GRADS, MemCategory::Grads, flat_.grad, "gradients");
    return out;
}

}  // namespace ds::zero
