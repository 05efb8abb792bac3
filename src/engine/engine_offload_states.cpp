// ds_engine_offload_states / ds_engine_reload_states /
// ds_engine_empty_partition_cache (DeepSpeed's engine.offload_states,
// reload_states, empty_partition_cache): which states move, where, and the
// calls refused while they are out. The moving itself is zero::StateSwap's
// (zero/state_swap.h); which buffers hold a state is the ZeRO strategy's.
//
// DeepSpeed does not reload on its own: a step with states offloaded fails
// there, so here the calls that would read an offloaded state return
// DS_ERR_INVALID_STATE naming ds_engine_reload_states.
#include <cstdio>
#include <string>

#include "core/error.h"
#include "deepspeed_c.h"
#include "engine/engine.h"

namespace ds {

namespace {

// "optimizer states, fp32 master weights" for the flags in `kinds`.
std::string state_names(uint32_t kinds) {
    static const struct {
        uint32_t flag;
        const char* name;
    } kNames[] = {{DS_OFFLOAD_OPTIM_STATES, "optimizer states"},
                  {DS_OFFLOAD_HP_PARAMS, "fp32 master weights"},
                  {DS_OFFLOAD_LP_PARAMS, "working weights"},
                  {DS_OFFLOAD_LP_GRADS, "gradients"},
                  {DS_OFFLOAD_CONTIGUOUS_GRAD_BUFFER, "reduction buckets"}};
    std::string out;
    for (const auto& n : kNames) {
        if (!(kinds & n.flag)) continue;
        if (!out.empty()) out += ", ";
        out += n.name;
    }
    return out;
}

}  // namespace

uint32_t Engine::offloaded_states() const {
    uint32_t k = 0;
    for (const auto& s : state_swaps_) k |= s->kinds();
    return k;
}

int64_t Engine::offloaded_disk_bytes(MemCategory c) const {
    int64_t n = 0;
    for (const auto& s : state_swaps_) n += s->disk_bytes(c);
    return n;
}

int64_t Engine::offloaded_released_bytes(MemCategory c) const {
    int64_t n = strategy_ ? strategy_->released_bytes(c) : 0;  // offload_param "nvme"
    for (const auto& s : state_swaps_) n += s->released_bytes(c);
    return n;
}

void Engine::require_states_resident(const char* call, uint32_t needs) const {
    const uint32_t out = offloaded_states() & needs;
    DS_CHECK(out == 0, DS_ERR_INVALID_STATE,
             "%s: this engine's %s are offloaded (ds_engine_offload_states); call ds_engine_reload_states first",
             call, state_names(out).c_str());
}

void Engine::offload_states(uint32_t which, int32_t device, const char* nvme_path) {
    DS_CHECK(initialized_, DS_ERR_INVALID_STATE,
             "ds_engine_offload_states called before ds_engine_init: there are no states to move yet");
    require_cpu_engine("ds_engine_offload_states");
    DS_CHECK((which & ~DS_OFFLOAD_ALL_STATES) == 0, DS_ERR_INVALID_ARGUMENT,
             "ds_engine_offload_states: 'which' has unknown bits 0x%x (DS_OFFLOAD_* flags, 0 = all)",
             which & ~DS_OFFLOAD_ALL_STATES);
    DS_CHECK(device == DS_OFFLOAD_DEVICE_CPU || device == DS_OFFLOAD_DEVICE_NVME, DS_ERR_INVALID_ARGUMENT,
             "ds_engine_offload_states: 'device' = %d is not DS_OFFLOAD_DEVICE_CPU (1) or DS_OFFLOAD_DEVICE_NVME (2)",
             device);
    const bool buckets = strategy_->has_reduction_buckets();
    DS_CHECK(!(which & DS_OFFLOAD_CONTIGUOUS_GRAD_BUFFER) || !buckets, DS_ERR_UNSUPPORTED,
             "ds_engine_offload_states: DS_OFFLOAD_CONTIGUOUS_GRAD_BUFFER: moving ZeRO-%d's reduction buckets is not "
             "built in this version (name the other states, or 0 for every state that can move)",
             strategy_->stage());
    // The states already live in host memory on this engine: nothing to move.
    if (device == DS_OFFLOAD_DEVICE_CPU) return;
    std::string path;
    if (nvme_path) {
        path = nvme_path;
    } else {
        const config::ZeroConfig& z = config_.zero_optimization;
        if (z.offload_optimizer && z.offload_optimizer->nvme_path) path = *z.offload_optimizer->nvme_path;
        else if (z.offload_param && z.offload_param->nvme_path) path = *z.offload_param->nvme_path;
    }
    DS_CHECK(!path.empty(), DS_ERR_INVALID_ARGUMENT,
             "ds_engine_offload_states: 'nvme_path' is NULL and the config sets neither "
             "zero_optimization.offload_optimizer.nvme_path nor zero_optimization.offload_param.nvme_path");
    uint32_t kinds = which == 0 ? DS_OFFLOAD_ALL_STATES : which;
    kinds &= ~offloaded_states();  // already out: skipped
    std::vector<zero::StateBuffer> buffers = strategy_->state_buffers(kinds);
    if (buffers.empty()) return;  // nothing of these in memory (e.g. optimizer state on NVMe already)
    zero::AioOptions aio;
    aio.block_size = config_.sections.aio.block_size;
    aio.queue_depth = config_.sections.aio.queue_depth;
    aio.single_submit = config_.sections.aio.single_submit;
    auto swap = std::make_unique<zero::StateSwap>(path, aio, std::move(buffers), alloc_);
    int64_t moved = 0;
    for (int c = 0; c < static_cast<int>(MemCategory::Count); ++c) moved += swap->disk_bytes(static_cast<MemCategory>(c));
    char msg[512];
    std::snprintf(msg, sizeof msg, "offload_states: %s moved to %s (%lld bytes)", state_names(swap->kinds()).c_str(),
                  path.c_str(), static_cast<long long>(moved));
    state_swaps_.push_back(std::move(swap));
    logger_.log(DS_LOG_INFO, msg);
}

void Engine::reload_states() {
    // Newest first; each one back is dropped at once, so a failure leaves
    // exactly the ones not yet read back offloaded (and retryable).
    while (!state_swaps_.empty()) {
        state_swaps_.back()->reload();
        state_swaps_.pop_back();
    }
}

void Engine::empty_partition_cache() {
    if (!initialized_) return;
    strategy_->empty_partition_cache();
    drop_released_device_weights();
}

}  // namespace ds
