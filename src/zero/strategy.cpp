// Strategy::create: the stage family for the configured stage and world.
#include "zero/strategy.h"

#include "zero/flat_strategy.h"

namespace ds::zero {

std::unique_ptr<Strategy> Strategy::create(const StrategyContext& ctx) {
    // In a world of one there is nothing to partition: every stage trains
    // as stage 0 (its config checks still apply).
    const int64_t stage = ctx.config->zero_optimization.stage;
    // Parameters on NVMe are swapped per ZeRO-3 partition, also in a world of
    // one; so are a device-resident engine's kept in host memory.
    const config::ZeroConfig& z = ctx.config->zero_optimization;
    if (stage == 3 && (z.offloads_params_to("nvme") || (z.offloads_params_to("cpu") && ctx.device.is_cuda())))
        return make_stage3(ctx);
    if (ctx.comm->size() == 1 || stage == 0) return make_stage0(ctx);
    if (stage == 3) return make_stage3(ctx);
    return make_stage12(ctx);
}

}  // namespace ds::zero
