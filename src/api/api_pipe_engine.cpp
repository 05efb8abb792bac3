// C ABI: the pipeline engine over a built-in GPT (ds_train_batch,
// ds_eval_batch, ds_engine_pipe_info). Argument checks; the schedule runs in
// src/engine/pipeline_engine.cpp.
#include <cstring>

#include "api/api_guard.h"
#include "api/handles.h"
#include "api/struct_abi.h"
#include "core/dlpack_interop.h"
#include "engine/pipeline_engine.h"

using ds::api::engine_of;

namespace {

ds::pipe::PipeEngine& pipe_of(ds::Engine& e, const char* call) {
    DS_CHECK(e.pipeline() != nullptr, DS_ERR_INVALID_STATE,
             "%s: this engine is not a pipeline stage (create it with ds_engine_create_with_model from a GPT spec "
             "whose pipeline.stages > 1)",
             call);
    return *e.pipeline();
}

// A batch argument as a contiguous host tensor the call reads (copied:
// the schedule slices it into micro-batches), or undefined for NULL.
ds::Tensor batch_arg(ds::Engine& e, const DLTensor* t, const char* name) {
    if (t == nullptr) return ds::Tensor();
    ds::expect_device(t, ds::Device::cpu(), name);
    ds::Tensor v = ds::from_dltensor(t, name, false);
    return v.to(v.dtype(), e.allocator(), ds::MemCategory::Buffers);
}

}  // namespace

extern "C" {

DS_API ds_status_t ds_train_batch(ds_engine_t* engine, const DLTensor* inputs, const DLTensor* targets,
                                  float* loss, ds_step_info_t* info) {
    return DS_GUARDED({
        ds::Engine& e = engine_of(engine);
        ds::pipe::PipeEngine& p = pipe_of(e, "ds_train_batch");
        if (info) ds::api::checked_output_size(info, DS_STEP_INFO_SIZE_V0, "info");  // before training
        ds::StepResult r;
        const float l = p.train_batch(batch_arg(e, inputs, "inputs"), batch_arg(e, targets, "targets"), &r);
        if (loss) *loss = l;
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

DS_API ds_status_t ds_eval_batch(ds_engine_t* engine, const DLTensor* inputs, const DLTensor* targets,
                                 float* loss) {
    return DS_GUARDED({
        ds::Engine& e = engine_of(engine);
        ds::pipe::PipeEngine& p = pipe_of(e, "ds_eval_batch");
        const float l = p.eval_batch(batch_arg(e, inputs, "inputs"), batch_arg(e, targets, "targets"));
        if (loss) *loss = l;
    });
}

DS_API ds_status_t ds_engine_pipe_info(const ds_engine_t* engine, ds_pipe_info_t* out) {
    return DS_GUARDED({
        const ds::Engine& e = engine_of(engine);
        DS_CHECK(e.pipeline() != nullptr, DS_ERR_INVALID_STATE,
                 "ds_engine_pipe_info: this engine is not a pipeline stage");
        DS_CHECK(out != nullptr, DS_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
        ds::api::checked_output_size(out, DS_PIPE_INFO_SIZE_V0, "out");
        const ds::pipe::PipeEngine& p = *e.pipeline();
        ds_pipe_info_t local;
        std::memset(&local, 0, sizeof local);
        local.stage_id = p.stage();
        local.num_stages = p.num_stages();
        local.first_layer = p.first_layer();
        local.last_layer = p.last_layer();
        local.num_layers = p.parts().back();
        local.micro_batches = p.micro_batches();
        local.data_parallel_size = p.data_parallel_size();  // the stage's replicas (with experts split, more
                                                            // than the engine's own ranks)
        local.batch_seconds = p.last_stats().wall_seconds;
        local.compute_seconds = p.last_stats().compute_seconds;
        local.recompute_seconds = p.last_stats().recompute_seconds;
        ds::api::write_versioned(out, DS_PIPE_INFO_SIZE_V0, sizeof local, "out", &local);
    });
}

}  // extern "C"
