// C ABI: built-in models (ds_model_*), ds_engine_create_with_model,
// ds_forward, ds_engine_eval. Argument checks and handle validation; the
// logic lives in src/nn (models) and src/engine/engine_model.cpp.
#include <memory>
#include <mutex>
#include <unordered_set>

#include "api/api_guard.h"
#include "api/engine_create.h"
#include "api/handles.h"
#include "nn/model.h"
#include "engine/expert_parallel_engine.h"
#include "engine/pipeline_engine.h"
#include "engine/tensor_parallel_engine.h"

// A model handle: the caller's reference on the model. Engines made with it
// hold their own reference (shared_ptr), so ds_model_destroy never frees a
// model an engine trains.
struct ds_model {
    static constexpr uint32_t kMagic = 0x4C444D44u;  // "DMDL"
    uint32_t magic = kMagic;
    std::shared_ptr<ds::nn::Model> impl;
};

using ds::api::engine_of;
using ds::api::require_arg;

namespace {

std::mutex& model_mutex() {
    static std::mutex m;
    return m;
}
std::unordered_set<const void*>& model_registry() {
    static auto* s = new std::unordered_set<const void*>();  // never destroyed: safe at exit
    return *s;
}

// The model behind a live handle (a reference, so a concurrent
// ds_model_destroy cannot free it under the call).
std::shared_ptr<ds::nn::Model> model_of(const ds_model_t* m, const char* arg) {
    DS_CHECK(m != nullptr, DS_ERR_INVALID_HANDLE, "argument '%s' is NULL", arg);
    std::lock_guard<std::mutex> lock(model_mutex());
    DS_CHECK(model_registry().count(m) > 0 && m->magic == ds_model::kMagic, DS_ERR_INVALID_HANDLE,
             "argument '%s' is not a live model (destroyed or never created)", arg);
    return m->impl;
}

}  // namespace

extern "C" {

DS_API ds_status_t ds_model_create(const char* spec_json, ds_model_t** out) {
    if (out) *out = nullptr;
    return DS_GUARDED({
        require_arg(spec_json, "spec_json");
        require_arg(out, "out");
        auto h = std::make_unique<ds_model>();
        h->impl = std::shared_ptr<ds::nn::Model>(ds::nn::build_model(spec_json));
        {
            std::lock_guard<std::mutex> lock(model_mutex());
            model_registry().insert(h.get());
        }
        *out = h.release();
    });
}

DS_API void ds_model_destroy(ds_model_t* model) {
    if (!model) return;
    {
        std::lock_guard<std::mutex> lock(model_mutex());
        if (model_registry().erase(model) == 0) return;  // not live: a no-op
    }
    model->magic = 0;
    delete model;
}

DS_API ds_status_t ds_model_num_params(const ds_model_t* model, int64_t* out) {
    return DS_GUARDED({
        std::shared_ptr<ds::nn::Model> m = model_of(model, "model");
        require_arg(out, "out");
        *out = m->num_params();
    });
}

DS_API ds_status_t ds_engine_create_with_model(const char* config_json, ds_model_t* model,
                                               const ds_engine_options_t* opts, ds_engine_t** out) {
    return DS_GUARDED_CREATE(out, {
        require_arg(config_json, "config_json");
        std::shared_ptr<ds::nn::Model> m = model_of(model, "model");
        if (ds::pipe::is_pipeline_model(*m))  // one stage of a pipeline, maybe split (engine/pipeline_engine.h)
            return ds::api::create_engine_with(opts, [&](const ds::EngineOptions& o,
                                                         std::shared_ptr<ds::comm::Communicator> c) {
                return ds::pipe::create_stage_engine(config_json, o, std::move(c), m);
            });
        if (ds::ep::is_expert_parallel_model(*m))  // this rank's experts (engine/expert_parallel_engine.h)
            return ds::api::create_engine_with(opts, [&](const ds::EngineOptions& o,
                                                         std::shared_ptr<ds::comm::Communicator> c) {
                return ds::ep::create_ep_engine(config_json, o, std::move(c), m);
            });
        const int64_t tp = ds::tp::autotp_size(config_json);
        if (tp > 1)  // this rank's shard of the model (engine/tensor_parallel_engine.h)
            return ds::api::create_engine_with(opts, [&](const ds::EngineOptions& o,
                                                         std::shared_ptr<ds::comm::Communicator> c) {
                return ds::tp::create_tp_engine(config_json, o, std::move(c), m, tp);
            });
        return ds::api::create_engine(config_json, opts, [&](ds::Engine& e) { e.attach_model(m); });
    });
}

DS_API ds_status_t ds_forward(ds_engine_t* engine, const DLTensor* inputs, int32_t n_inputs, DLTensor* out) {
    return DS_GUARDED({
        ds::Engine& e = engine_of(engine);
        e.require_not_pipeline("ds_forward");
        e.forward(inputs, n_inputs, out);
    });
}

DS_API ds_status_t ds_engine_eval(ds_engine_t* engine, int32_t on) {
    return DS_GUARDED({
        ds::Engine& e = engine_of(engine);
        DS_CHECK(on == 0 || on == 1, DS_ERR_INVALID_ARGUMENT, "on = %d: must be 0 (train) or 1 (eval)", on);
        e.set_eval(on == 1);
    });
}

}  // extern "C"
