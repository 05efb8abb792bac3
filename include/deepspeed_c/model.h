/*
 * deepspeed_c/model.h — part of the public C ABI of deepspeed_c.
 * Built-in models (ds_model_*): a model built from a JSON spec, the engine
 * that owns it (ds_engine_create_with_model), ds_forward and ds_engine_eval.
 * Include <deepspeed_c.h>; its Conventions comment applies here.
 */
#ifndef DEEPSPEED_C_MODEL_H
#define DEEPSPEED_C_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "base.h"
#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Built-in models: loss = engine(batch); engine.backward(loss); engine.step() */
/* ------------------------------------------------------------------------ */

/** A model built by the library from a JSON spec (docs/MODELS.md): a GPT
 *  ({"type": "gpt", "vocab_size", "block_size", "n_layer", "n_head", "n_embd",
 *  "dropout", "tied_embeddings", ...}) or a sequential list of layer specs
 *  ({"type": "sequential", "layers": [{"type": "linear", ...}, ...]}). */
typedef struct ds_model ds_model_t;

/** Build a model and initialise its parameters (fp32, seeded by the spec's
 *  "seed"; GPT-2's init: normal(0, initializer_range), output projections
 *  scaled by 1/sqrt(2 n_layer), biases 0, LayerNorm 1/0). *out is NULL
 *  unless the call succeeds. Thread-safe.
 *  @return DS_OK; DS_ERR_INVALID_ARGUMENT (spec_json or out NULL);
 *          DS_ERR_INVALID_CONFIG (bad spec: the key path and the rule are
 *          named, e.g. "n_head: 5 does not divide n_embd = 64");
 *          DS_ERR_OUT_OF_MEMORY. */
DS_API ds_status_t ds_model_create(const char* spec_json, ds_model_t** out);

/** Drop the caller's reference. An engine made with the model keeps it alive
 *  until ds_engine_destroy. NULL or an already destroyed handle is a no-op. */
DS_API void ds_model_destroy(ds_model_t* model);

/** Number of parameter elements of the model (trainable and frozen; a tied
 *  weight counts once).
 *  @return DS_OK; DS_ERR_INVALID_HANDLE (model NULL or destroyed);
 *          DS_ERR_INVALID_ARGUMENT (out NULL). */
DS_API ds_status_t ds_model_num_params(const ds_model_t* model, int64_t* out);

/** deepspeed.initialize(model=..., config=...): an engine that owns the
 *  model's parameters (registered under the model's names, then
 *  ds_engine_init; checkpoints use these names). A model trains in one
 *  engine at a time; the engine keeps it alive until ds_engine_destroy.
 *  activation_checkpointing in the config wraps the model's transformer
 *  layers (docs/CONFIG.md, "Activation checkpointing"). Collective with
 *  several ranks, like ds_engine_create + ds_engine_init. With
 *  options.device cuda:N the layers run on that GPU's kernels, on its legacy
 *  default stream (docs/DESIGN.md, "The engine on a GPU").
 *  @return as ds_engine_create and ds_engine_init, plus DS_ERR_INVALID_HANDLE
 *          (model NULL or destroyed); DS_ERR_INVALID_STATE (the model is in
 *          use by another engine, or a ZeRO-3 engine released its values);
 *          DS_ERR_UNSUPPORTED (options.device cuda:N with options.cuda_stream,
 *          or for a pipeline stage or a tensor- or expert-parallel model:
 *          those run on the CPU only in this version; other MoE layers run
 *          on the GPU, the "Jitter" gate included). */
DS_API ds_status_t ds_engine_create_with_model(const char* config_json, ds_model_t* model,
                                               const ds_engine_options_t* opts, ds_engine_t** out);

/** loss = engine(batch): the model's forward on this micro-batch.
 *  inputs[0]: token ids (GPT, or a sequential model starting with an
 *  embedding: int32/int64 [B, T], T <= block_size, ids in [0, vocab)) or
 *  features (sequential, fp32 [B, in]); inputs[1] (optional): targets
 *  (cross-entropy: int32/int64 class ids shaped like the input's rows, [B, T]
 *  or [B], each in [0, classes) or -100 = ignored (a sequential spec's
 *  ignore_index); mse: fp32 shaped like the output). In training mode B must
 *  equal train_micro_batch_size_per_gpu (what global_samples counts). With
 *  targets, `out` receives the mean loss (fp32, shape [] or [1]); without,
 *  the model's output (fp32, e.g. logits [B, T, vocab]). Any strides and
 *  alignment are accepted in host memory; an engine on cuda:N also takes
 *  each tensor in that GPU's memory, contiguous. A training forward draws the next dropout masks
 *  (the stream is saved in checkpoints) and keeps what backward needs; a
 *  new forward replaces one that was never backwarded. Under ZeRO-3 it is
 *  collective (the weights are gathered until the backward).
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (inputs/out
 *          NULL, n_inputs not 1 or 2, a tensor's dtype/shape/device, a token
 *          id or target out of range, a batch size other than the micro-batch:
 *          each named); DS_ERR_INVALID_STATE (engine without a built-in model). */
DS_API ds_status_t ds_forward(ds_engine_t* engine, const DLTensor* inputs, int32_t n_inputs, DLTensor* out);

/** engine.eval() (on == 1: dropout off, forward keeps nothing for backward,
 *  any batch size) and engine.train() (on == 0). Either drops a training
 *  forward that was not backwarded yet. Local.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (on not 0
 *          or 1); DS_ERR_INVALID_STATE (engine without a built-in model). */
DS_API ds_status_t ds_engine_eval(ds_engine_t* engine, int32_t on);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DEEPSPEED_C_MODEL_H */
