// C ABI: host-driven training (parameters, gradients, backward, step,
// counters, learning rate, debugging copies). Argument checks only.
#include "api/api_guard.h"
#include "api/handles.h"
#include "api/struct_abi.h"

#include <cstddef>
#include <cstring>

static_assert(sizeof(ds_step_info_t) == DS_STEP_INFO_SIZE_V0 && offsetof(ds_step_info_t, loss_scale) == 16 &&
                  offsetof(ds_step_info_t, reserved0) == 20 && offsetof(ds_step_info_t, grad_norm) == 24,
              "ds_step_info_t v0 layout is frozen");

using ds::api::engine_of;
using ds::api::require_arg;

namespace {

// The param_view / grad_view bodies: the engine, then name and out are checked.
void view(ds_engine_t* engine, void (ds::Engine::*method)(const char*, DLTensor*), const char* name, DLTensor* out) {
    ds::Engine& e = engine_of(engine);
    require_arg(name, "name");
    require_arg(out, "out");
    (e.*method)(name, out);
}

// The get_full_* / set_full_* bodies: the engine, then the name, the state
// key (optimizer state only) and the tensor ("out" to read into, "value" to
// write from) are checked in that order.
enum class Access { Get, Set };
void full_tensor(ds_engine_t* engine, Access access, ds::FullTensor what, const char* name, const char* key,
                 const DLTensor* tensor) {
    ds::Engine& e = engine_of(engine);
    require_arg(name, "name");
    if (what == ds::FullTensor::OptimizerState) require_arg(key, "key");
    require_arg(tensor, access == Access::Set ? "value" : "out");
    if (access == Access::Set)
        e.set_full(what, name, key, tensor);
    else
        e.get_full(what, name, key, tensor);
}

}  // namespace

extern "C" {

DS_API ds_status_t ds_engine_add_param(ds_engine_t* engine, const char* name, const DLTensor* init,
                                       uint32_t flags) {
    return DS_GUARDED({
        ds::Engine& e = engine_of(engine);
        require_arg(name, "name");
        require_arg(init, "init");
        e.add_param(name, init, flags);
    });
}

DS_API ds_status_t ds_engine_init(ds_engine_t* engine) {
    return DS_GUARDED({ engine_of(engine).init(); });
}

DS_API ds_status_t ds_engine_param_view(ds_engine_t* engine, const char* name, DLTensor* out) {
    return DS_GUARDED({ view(engine, &ds::Engine::param_view, name, out); });
}

DS_API ds_status_t ds_engine_grad_view(ds_engine_t* engine, const char* name, DLTensor* out) {
    return DS_GUARDED({ view(engine, &ds::Engine::grad_view, name, out); });
}

// The body of ds_engine_accumulate_grad(_ex); each runs it in its own guard,
// so an error names the function the host called.
static void accumulate_grad(ds_engine_t* engine, const char* name, const DLTensor* grad, uint32_t flags) {
    ds::Engine& e = engine_of(engine);
    e.require_not_pipeline("ds_engine_accumulate_grad");
    require_arg(name, "name");
    require_arg(grad, "grad");
    e.accumulate_grad(name, grad, flags);
}

DS_API ds_status_t ds_engine_accumulate_grad(ds_engine_t* engine, const char* name, const DLTensor* grad) {
    return DS_GUARDED({ accumulate_grad(engine, name, grad, 0); });
}

DS_API ds_status_t ds_engine_accumulate_grad_ex(ds_engine_t* engine, const char* name, const DLTensor* grad,
                                                uint32_t flags) {
    return DS_GUARDED({ accumulate_grad(engine, name, grad, flags); });
}

DS_API ds_status_t ds_backward(ds_engine_t* engine, const DLTensor* out_grad) {
    return DS_GUARDED({
        ds::Engine& e = engine_of(engine);
        e.require_not_pipeline("ds_backward");
        e.backward(out_grad);
    });
}

DS_API ds_status_t ds_step(ds_engine_t* engine, ds_step_info_t* info) {
    return DS_GUARDED({
        ds::Engine& e = engine_of(engine);
        e.require_not_pipeline("ds_step");
        if (info) ds::api::checked_output_size(info, DS_STEP_INFO_SIZE_V0, "info");  // before stepping
        ds::StepResult r = e.step();
        if (info) {
            ds_step_info_t local;
            std::memset(&local, 0, sizeof local);
            local.stepped = r.stepped ? 1 : 0;
            local.skipped = r.skipped ? 1 : 0;
            local.loss_scale = static_cast<float>(e.loss_scale());
            local.grad_norm = r.grad_norm;
            local.lr = r.lr;
            local.global_step = e.counters().global_steps;
            ds::api::write_versioned(info, DS_STEP_INFO_SIZE_V0, sizeof local, "info", &local);
        }
    });
}

#define DS_GETTER(fn, type, expr)                                  \
    DS_API ds_status_t fn(const ds_engine_t* engine, type* out) {  \
        return DS_GUARDED({                                        \
            const ds::Engine& e = engine_of(engine);               \
            require_arg(out, "out");                               \
            *out = (expr);                                         \
        });                                                        \
    }

DS_GETTER(ds_engine_loss_scale, float, static_cast<float>(e.loss_scale()))
DS_GETTER(ds_engine_loss_multiplier, float, static_cast<float>(e.loss_multiplier()))
DS_GETTER(ds_engine_get_lr, double, e.lr())
DS_GETTER(ds_engine_global_steps, int64_t, e.counters().global_steps)
DS_GETTER(ds_engine_global_samples, int64_t, e.counters().global_samples)
DS_GETTER(ds_engine_skipped_steps, int64_t, e.counters().skipped_steps)
DS_GETTER(ds_engine_micro_steps, int64_t, e.counters().micro_steps)
DS_GETTER(ds_engine_is_gradient_accumulation_boundary, int32_t,
          e.is_gradient_accumulation_boundary() ? 1 : 0)
#undef DS_GETTER

DS_API ds_status_t ds_engine_set_lr(ds_engine_t* engine, double lr) {
    return DS_GUARDED({ engine_of(engine).set_lr(lr); });
}

DS_API ds_status_t ds_engine_set_stream(ds_engine_t* engine, void* cuda_stream) {
    return DS_GUARDED({ engine_of(engine).set_stream(cuda_stream); });
}

DS_API ds_status_t ds_engine_set_gradient_accumulation_boundary(ds_engine_t* engine, int32_t value) {
    return DS_GUARDED({
        ds::Engine& e = engine_of(engine);
        DS_CHECK(value == 0 || value == 1, DS_ERR_INVALID_ARGUMENT, "value = %d: must be 0 or 1", value);
        e.set_gradient_accumulation_boundary(value == 1);
    });
}

DS_API ds_status_t ds_engine_get_full_fp32_param(ds_engine_t* engine, const char* name, DLTensor* out) {
    return DS_GUARDED({ full_tensor(engine, Access::Get, ds::FullTensor::Param, name, nullptr, out); });
}

DS_API ds_status_t ds_engine_get_full_grad(ds_engine_t* engine, const char* name, DLTensor* out) {
    return DS_GUARDED({ full_tensor(engine, Access::Get, ds::FullTensor::Grad, name, nullptr, out); });
}

DS_API ds_status_t ds_engine_get_full_optimizer_state(ds_engine_t* engine, const char* name,
                                                      const char* key, DLTensor* out) {
    return DS_GUARDED({ full_tensor(engine, Access::Get, ds::FullTensor::OptimizerState, name, key, out); });
}

DS_API ds_status_t ds_engine_set_full_fp32_param(ds_engine_t* engine, const char* name,
                                                 const DLTensor* value) {
    return DS_GUARDED({ full_tensor(engine, Access::Set, ds::FullTensor::Param, name, nullptr, value); });
}

DS_API ds_status_t ds_engine_set_full_grad(ds_engine_t* engine, const char* name, const DLTensor* value) {
    return DS_GUARDED({ full_tensor(engine, Access::Set, ds::FullTensor::Grad, name, nullptr, value); });
}

DS_API ds_status_t ds_engine_set_full_optimizer_state(ds_engine_t* engine, const char* name,
                                                      const char* key, const DLTensor* value) {
    return DS_GUARDED({ full_tensor(engine, Access::Set, ds::FullTensor::OptimizerState, name, key, value); });
}

}  // extern "C"

extern "C" {

DS_API ds_status_t ds_engine_gather(ds_engine_t* engine, const char* const* names, int32_t n) {
    return DS_GUARDED({ engine_of(engine).gather(names, n); });
}

DS_API ds_status_t ds_engine_release(ds_engine_t* engine, const char* const* names, int32_t n) {
    return DS_GUARDED({ engine_of(engine).release(names, n); });
}

}  // extern "C"
