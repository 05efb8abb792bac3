// ds_engine_gather / ds_engine_release (DeepSpeed's GatheredParameters):
// the argument checks and the agreement across ranks; what gathering means
// is the ZeRO strategy's (zero/strategy.h; below ZeRO-3 weights are whole).
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "engine/device_front.h"
#include "engine/engine.h"
#include "engine/rank_agreement.h"

namespace ds {

void Engine::gather(const char* const* names, int32_t n) {
    auto checks = [&] {
        require_initialized("ds_engine_gather", DS_OFFLOAD_LP_PARAMS);
        DS_CHECK(n >= 0, DS_ERR_INVALID_ARGUMENT, "n = %d is negative", n);
        DS_CHECK(n == 0 || names != nullptr, DS_ERR_INVALID_ARGUMENT, "argument 'names' is NULL");
        agree::CallArgs a;
        a.args = agree::kHashBasis;
        for (int32_t i = 0; i < n; ++i) {  // check every name before any collective
            DS_CHECK(names[i] != nullptr, DS_ERR_INVALID_ARGUMENT, "names[%d] is NULL", i);
            params_.get(names[i]);
            a.args = agree::hash_str(names[i], a.args);
        }
        a.detail = n;
        a.detail_name = "n";
        a.what = "parameter names in the same order";
        return a;
    };
    // Collective at stage 3: the ranks agree on the call and the names first.
    if (strategy_->collective(zero::Collective::Gather)) agree::enter(*comm_, agree::Call::Gather, checks);
    else checks();
    std::vector<Param*> ps;
    for (int32_t i = 0; i < n; ++i) ps.push_back(&params_.get(names[i]));
    gather_params(ps);
}

bool Engine::stages_gathered_weights() const { return front_ && !front_->mirrors_flat(); }

void Engine::gather_params(const std::vector<Param*>& ps, bool ahead) {
    size_t done = 0;
    try {
        for (; done < ps.size(); ++done) strategy_->gather(*ps[done]);
        // ZeRO-Offload at ZeRO-3: their copies to the device start now, not at the first use.
        if (stages_gathered_weights()) front_->stage_gathered({ps.begin(), ps.end()}, ahead);
    } catch (...) {
        try {
            for (size_t j = 0; j < done; ++j) strategy_->release(*ps[j]);
            drop_released_device_weights();
        } catch (...) {  // the gather's own error is the one to report
        }
        throw;
    }
}

void Engine::release(const char* const* names, int32_t n) {
    require_initialized("ds_engine_release", 0);
    DS_CHECK(n >= 0, DS_ERR_INVALID_ARGUMENT, "n = %d is negative", n);
    DS_CHECK(n == 0 || names != nullptr, DS_ERR_INVALID_ARGUMENT, "argument 'names' is NULL");
    for (int32_t i = 0; i < n; ++i) {
        DS_CHECK(names[i] != nullptr, DS_ERR_INVALID_ARGUMENT, "names[%d] is NULL", i);
        strategy_->check_release(params_.get(names[i]));
    }
    for (int32_t i = 0; i < n; ++i) strategy_->release(params_.get(names[i]));
    drop_released_device_weights();
}

}  // namespace ds
