// ZeRO-3 parameter gathering (reference §6.2): each rank keeps one chunk of
// every parameter; whole working weights exist while gathered — DeepSpeed's
// GatheredParameters — or always for persistent parameters (numel <=
// param_persistence_threshold), and are re-gathered after each step.
#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/rank_agreement.h"

namespace ds {

void Engine::gather_param(Param& p) {
    FlatBuffers& flat = params_.flat();
    const size_t ti = static_cast<size_t>(p.trainable_index);
    const int64_t chunk = flat.chunk[ti];
    if (!p.full.defined())
        p.full = Tensor::empty({chunk * world_size_}, working_dtype_, Device::cpu(), alloc_, MemCategory::Params);
    const int64_t es = static_cast<int64_t>(p.full.element_size());
    const char* mine = static_cast<const char*>(flat.working.data_ptr()) + flat.rank_offset[ti] * es;
    if (chunk > 0) comm_->allgather(mine, p.full.data_ptr(), static_cast<size_t>(chunk), working_dtype_);
    p.working = p.full.view(p.shape, 0);
}

void Engine::refresh_gathered(bool include_persistent) {
    for (Param& p : params_.all())
        if (p.trainable && ((include_persistent && p.persistent) || p.gather_count > 0)) gather_param(p);
}

void Engine::gather(const char* const* names, int32_t n) {
    auto checks = [&] {
        require_initialized("ds_engine_gather");
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
    if (zero_stage_ == 3) agree::enter(*comm_, agree::Call::Gather, checks);
    else checks();
    if (!params_.flat().stage3) return;  // everything is whole already
    for (int32_t i = 0; i < n; ++i) {
        Param& p = params_.get(names[i]);
        if (!p.trainable) continue;
        if (p.gather_count == 0 && !p.persistent) gather_param(p);
        ++p.gather_count;
    }
}

void Engine::release(const char* const* names, int32_t n) {
    require_initialized("ds_engine_release");
    DS_CHECK(n >= 0, DS_ERR_INVALID_ARGUMENT, "n = %d is negative", n);
    DS_CHECK(n == 0 || names != nullptr, DS_ERR_INVALID_ARGUMENT, "argument 'names' is NULL");
    for (int32_t i = 0; i < n; ++i) {
        DS_CHECK(names[i] != nullptr, DS_ERR_INVALID_ARGUMENT, "names[%d] is NULL", i);
        const Param& p = params_.get(names[i]);
        if (params_.flat().stage3 && p.trainable)
            DS_CHECK(p.gather_count > 0, DS_ERR_INVALID_STATE,
                     "ds_engine_release('%s') without a matching ds_engine_gather", names[i]);
    }
    if (!params_.flat().stage3) return;
    for (int32_t i = 0; i < n; ++i) {
        Param& p = params_.get(names[i]);
        if (!p.trainable) continue;
        if (--p.gather_count == 0 && !p.persistent) {
            p.working = Tensor();
            p.full = Tensor();  // frees the whole copy
        }
    }
}

}  // namespace ds
