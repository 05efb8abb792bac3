/*
 * deepspeed_c/training.h — part of the public C ABI of deepspeed_c.
 * Host-driven training: registering parameters, their views, gradients and
 * ZeRO-3 gather/release, ds_backward and ds_step, the engine's getters and
 * setters, and the full fp32 copies (DeepSpeed's safe_get_full_* / safe_set_full_*).
 * Include <deepspeed_c.h>; its Conventions comment applies here.
 */
#ifndef DEEPSPEED_C_TRAINING_H
#define DEEPSPEED_C_TRAINING_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Host-driven training: parameters and gradients                          */
/* ------------------------------------------------------------------------ */
/*
 * Life cycle (DeepSpeed equivalent in brackets):
 *   ds_engine_create -> ds_engine_add_param (once per parameter) -> ds_engine_init
 *   loop over micro-batches:
 *     ds_engine_param_view                 weights for your forward
 *     loss *= ds_engine_loss_multiplier(...)   [engine.backward: loss / gas, then x scale]
 *     your backward, then ds_engine_accumulate_grad_ex(..., DS_GRAD_PREDIVIDED)
 *                                          per parameter
 *     ds_backward(e, NULL)                 [engine.backward(loss) epilogue]
 *     ds_step(e, &info)                    [engine.step()]
 * This is DeepSpeed's order: the loss is divided by gradient_accumulation_steps
 * before it is scaled, so the host's (fp16) backward carries the same values
 * as DeepSpeed's and overflows exactly where DeepSpeed's does.
 * The older contract still works: multiply the loss by ds_engine_loss_scale
 * and hand the gradient to ds_engine_accumulate_grad, which divides it by
 * gradient_accumulation_steps (the same average, but the backward carries
 * values gradient_accumulation_steps times larger: with fp16 it can overflow,
 * and skip steps, where DeepSpeed does not).
 */

/** Flag for ds_engine_add_param: the parameter is trained (0 = frozen). */
#define DS_PARAM_TRAINABLE 1u

/** Flag reported by ds_engine_param_info (never passed to ds_engine_add_param):
 *  the parameter belongs to an expert of a built-in MoE layer, DeepSpeed's
 *  is_moe_param (its `allreduce = False` parameters), whatever the model's
 *  moe.ep_size. These parameters form the optimizer group DeepSpeed's
 *  split_params_into_different_moe_groups_for_optimizer makes, named
 *  "ep_size_<moe.ep_size>" ({"moe": true}): the same hyperparameters as the
 *  other parameters, their gradients reduced over the expert-data-parallel
 *  group only (docs/PIPELINE.md, "Expert parallelism"). */
#define DS_PARAM_EXPERT 2u

/** Register a named parameter with its initial value (copied).
 *  @param name  [in] unique, non-empty, valid UTF-8 name, not "__metadata__" (reserved by
 *               safetensors); all names together must fit a checkpoint's safetensors header
 *               (100,000,000 bytes), and every dimension of init must be <= 2^53 - 1, so that
 *               whatever is added can be saved and loaded (docs/CHECKPOINTS.md "Limits").
 *  @param init  [in] CPU tensor, fp32/fp16/bf16, any shape (contiguous, or strided); on an
 *               engine on cuda:N it may also be a contiguous tensor in that GPU's memory.
 *  @param flags DS_PARAM_TRAINABLE or 0 (frozen: no gradient, no optimizer state).
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (name NULL/empty/duplicate,
 *          bad tensor field, unknown flag bits); DS_ERR_UNSUPPORTED (DS_PARAM_EXPERT: expert
 *          parameters of a host's own MoE layers, reduced over an expert-data-parallel
 *          group, are not built; the flag marks the built-in model's experts);
 *          DS_ERR_INVALID_STATE (after ds_engine_init); DS_ERR_OUT_OF_MEMORY. */
DS_API ds_status_t ds_engine_add_param(ds_engine_t* engine, const char* name,
                                       const DLTensor* init, uint32_t flags);

/** One parameter as ds_engine_param_info describes it. Output struct: set
 *  struct_size = sizeof before the call (see "Structs"). */
typedef struct ds_param_info {
    size_t struct_size;
    const char* name;       /* engine-owned, NUL-terminated */
    const int64_t* shape;   /* engine-owned, ndim entries; NULL when ndim is 0 */
    int32_t ndim;
    uint32_t flags;         /* DS_PARAM_TRAINABLE or 0, as given to ds_engine_add_param; plus
                               DS_PARAM_EXPERT for a built-in MoE layer's expert parameters */
    DLDataType dtype;       /* of the working copy (what ds_engine_param_view returns) */
    int32_t reserved0;      /* written 0 */
    int64_t numel;          /* product of shape (1 when ndim is 0) */
} ds_param_info_t;

/** Frozen size of the first released ds_param_info_t. */
#define DS_PARAM_INFO_SIZE_V0 48

/** The number of parameters added so far (= len(list(model.parameters()))).
 *  Const: may run concurrently with other const calls on the engine.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out NULL). */
DS_API ds_status_t ds_engine_num_params(const ds_engine_t* engine, int64_t* out);

/** Name, shape, dtype, flags and element count of parameter `index`, in the
 *  order of ds_engine_add_param (= model.named_parameters()). Works before and
 *  after ds_engine_init, at every ZeRO stage (also for stage-3 parameters that
 *  are partitioned, where ds_engine_param_view needs ds_engine_gather).
 *  name and shape stay valid until the next ds_engine_add_param or
 *  ds_engine_destroy (so from ds_engine_init on, for the engine's life).
 *  @param out [in,out] out->struct_size set (>= DS_PARAM_INFO_SIZE_V0).
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out NULL; index < 0 or
 *          >= ds_engine_num_params, named with the count); DS_ERR_ABI_MISMATCH
 *          (out->struct_size < DS_PARAM_INFO_SIZE_V0). */
DS_API ds_status_t ds_engine_param_info(const ds_engine_t* engine, int64_t index, ds_param_info_t* out);

/** Lay out parameters, gradients and optimizer state (= the end of deepspeed.initialize).
 *  Collective with several ranks, as every call below that communicates: the ranks
 *  first agree on the call and its arguments, so ranks in different calls get
 *  DS_ERR_INVALID_STATE ("this rank (0) is in ds_step while rank 1 is in
 *  ds_save_checkpoint"), different arguments DS_ERR_INVALID_ARGUMENT, and a check
 *  failing on one rank fails the call on every rank; nothing was done and the next
 *  matching call works (DESIGN.md §6, "Ranks that disagree").
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_STATE (called twice, or no
 *          parameters were added); DS_ERR_INVALID_CONFIG (trainable parameters but no
 *          "optimizer" section); DS_ERR_INVALID_ARGUMENT (ranks registered different
 *          parameters: the first difference is named); DS_ERR_OUT_OF_MEMORY. */
DS_API ds_status_t ds_engine_init(ds_engine_t* engine);

/** The working-precision weights of a parameter (fp32, or fp16/bf16 when that
 *  precision is enabled) for the host's forward pass. `out` is filled with
 *  engine-owned data/shape pointers. Read-only for the host. On an engine on
 *  cuda:N the data is in that GPU's memory ({kDLCUDA, N}): ZeRO-Offload writes
 *  it before ds_step returns, a device-resident engine's kernels update it on
 *  the legacy default stream.
 *  Lifetime (also of ds_engine_grad_view):
 *    ZeRO 0, 1, 2: the storage is fixed from ds_engine_init to
 *      ds_engine_destroy: a view taken once aliases the engine's weights (or
 *      gradient buffer) for the engine's life, so a host tensor may wrap it
 *      permanently (a PyTorch adapter's p.data). The values change only inside
 *      ds_step, ds_load_checkpoint and ds_engine_set_full_* (gradients also in
 *      ds_engine_accumulate_grad and ds_backward); read them between calls.
 *    ZeRO 3: a partitioned parameter's whole weights exist only between
 *      ds_engine_gather and the matching last ds_engine_release; a view taken
 *      in between dies at that release (persistent parameters, and any
 *      parameter in a world of one, behave as at ZeRO 0-2).
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (name or out NULL);
 *          DS_ERR_NOT_FOUND (no such parameter); DS_ERR_INVALID_STATE (before ds_engine_init;
 *          at ZeRO stage 3 a parameter that is not gathered: call ds_engine_gather). */
DS_API ds_status_t ds_engine_param_view(ds_engine_t* engine, const char* name, DLTensor* out);

/** The engine-owned gradient accumulation buffer of a trainable parameter
 *  (dtype data_types.grad_accum_dtype, default the working dtype) = torch's
 *  param.grad. It holds the sum of this window's contributions, each already
 *  divided by gradient_accumulation_steps. The host may add into it directly
 *  instead of calling ds_engine_accumulate_grad (then dividing by
 *  gradient_accumulation_steps is the host's job: multiply the loss by
 *  ds_engine_loss_multiplier). Whatever is in the buffer at ds_step, by any
 *  route, is what the overflow check and the clip see. Valid as ds_engine_param_view.
 *  @return as ds_engine_param_view, plus DS_ERR_INVALID_ARGUMENT (parameter is frozen);
 *          DS_ERR_UNSUPPORTED (a ZeRO-Offload engine accumulates in host memory: use
 *          ds_engine_accumulate_grad; a device-resident engine's view is in device memory). */
DS_API ds_status_t ds_engine_grad_view(ds_engine_t* engine, const char* name, DLTensor* out);

/** Add the gradient of this micro-batch's (scaled) loss for one parameter:
 *  buffer += grad / gradient_accumulation_steps. Several calls for the same
 *  parameter in one micro-step add up (as autograd does).
 *  @param grad [in] CPU tensor of the parameter's (logical, row-major) shape, fp32 or
 *              the working dtype; any non-negative strides (e.g. a column-major
 *              m x n array: shape (m, n), strides (1, m)) and any data alignment
 *              (strided or misaligned data is first copied row-major). On an engine
 *              on cuda:N: a contiguous, element-aligned tensor in that GPU's memory,
 *              read after the work queued on the engine's stream (ds_engine_set_stream);
 *              ZeRO-Offload accumulates it on the host, returning when it has been
 *              read; a device-resident engine accumulates it on the device.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (name/grad NULL, bad
 *          tensor field, wrong shape, dtype or device, frozen parameter; on cuda:N a
 *          strided gradient); DS_ERR_NOT_FOUND; DS_ERR_INVALID_STATE (before
 *          ds_engine_init); DS_ERR_DEVICE (the copy failed). */
DS_API ds_status_t ds_engine_accumulate_grad(ds_engine_t* engine, const char* name,
                                             const DLTensor* grad);

/** Flag for ds_engine_accumulate_grad_ex: the gradient is already divided by
 *  gradient_accumulation_steps (it is the gradient of loss x
 *  ds_engine_loss_multiplier); the engine adds it as it is. */
#define DS_GRAD_PREDIVIDED 1u

/** ds_engine_accumulate_grad with flags: 0 (= ds_engine_accumulate_grad:
 *  buffer += grad / gradient_accumulation_steps) or DS_GRAD_PREDIVIDED
 *  (buffer += grad). Same arguments and errors, plus DS_ERR_INVALID_ARGUMENT
 *  for unknown flag bits. */
DS_API ds_status_t ds_engine_accumulate_grad_ex(ds_engine_t* engine, const char* name,
                                                const DLTensor* grad, uint32_t flags);

/** End the micro-step's backward pass (= engine.backward epilogue: gradient
 *  reduction at the boundary). In host-driven mode `out_grad` must be NULL.
 *  With a built-in model (ds_engine_create_with_model) it first runs the
 *  model's backward for the last training ds_forward:
 *    out_grad NULL after a forward with targets: engine.backward(loss), the
 *      loss seeded with ds_engine_loss_multiplier (loss scale / accumulation steps);
 *    out_grad (fp32, the output's shape; in host memory, or in the GPU's of
 *      an engine on cuda:N) after a forward without targets:
 *      output.backward(out_grad), out_grad times the same multiplier;
 *  then hands every parameter's gradient to the engine (as
 *  ds_engine_accumulate_grad_ex(..., DS_GRAD_PREDIVIDED)). Each forward
 *  allows one backward.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out_grad not NULL
 *          without a built-in model; out_grad's dtype/shape/device, named);
 *          DS_ERR_INVALID_STATE (before ds_engine_init; with a model: no
 *          training ds_forward since the last backward (or ds_engine_eval /
 *          ds_load_checkpoint dropped it), the forward ran under eval,
 *          out_grad NULL after a forward without targets, or given after one
 *          with targets; optimizer state partly updated by a failed ds_step,
 *          see ds_step: until ds_load_checkpoint). */
DS_API ds_status_t ds_backward(ds_engine_t* engine, const DLTensor* out_grad);

/** ZeRO stage 3: make the whole working weights of `names` available on
 *  every rank (= DeepSpeed's GatheredParameters) until the matching
 *  ds_engine_release; nested gathers are counted. Collective: every rank calls
 *  it with the same names (checked at stage 3: DS_ERR_INVALID_ARGUMENT otherwise). Below stage 3 (or in a world of one) parameters are
 *  always whole and this only checks the names. Persistent parameters (numel
 *  <= zero_optimization.param_persistence_threshold) are always whole.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (names NULL with
 *          n > 0, n < 0, a NULL name); DS_ERR_NOT_FOUND (no such parameter);
 *          DS_ERR_INVALID_STATE (before ds_engine_init); DS_ERR_COMM / DS_ERR_TIMEOUT
 *          (the all-gather failed); DS_ERR_OUT_OF_MEMORY. On failure nothing this
 *          call gathered stays gathered (no ds_engine_release is due). */
DS_API ds_status_t ds_engine_gather(ds_engine_t* engine, const char* const* names, int32_t n);

/** ZeRO stage 3: end the use of parameters gathered by ds_engine_gather; the
 *  last release frees the whole copy (views of it become invalid). Local.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (as gather);
 *          DS_ERR_NOT_FOUND; DS_ERR_INVALID_STATE (before init; a release without
 *          a matching gather). */
DS_API ds_status_t ds_engine_release(ds_engine_t* engine, const char* const* names, int32_t n);

/** What ds_step did. Fill struct_size = sizeof(ds_step_info_t) before the call. */
typedef struct ds_step_info {
    size_t struct_size;
    int32_t stepped;      /* 1 at an accumulation boundary (an optimizer step was attempted) */
    int32_t skipped;      /* 1 if that step was skipped (gradient overflow) */
    float loss_scale;     /* the loss scale after this call */
    int32_t reserved0;    /* written 0 (explicit padding) */
    double grad_norm;     /* unscaled global gradient norm before clipping (boundary only) */
    double lr;            /* learning rate this step applied (boundary only) */
    int64_t global_step;  /* global_steps after this call */
} ds_step_info_t;

/** Frozen size of the first released ds_step_info_t (loss_scale @16, grad_norm @24). */
#define DS_STEP_INFO_SIZE_V0 48

/** = engine.step(): at an accumulation boundary check overflow, update the loss
 *  scaler, unscale and clip (one fused factor), run the optimizer, advance the
 *  LR schedule, zero the gradients; otherwise only count the micro-step.
 *  Collective with several ranks (every micro-step): all ranks must agree on the
 *  call and on whether it is an accumulation boundary (see ds_engine_init).
 *  @param info [in,out, nullable] struct_size must be set.
 *  @return DS_OK (also when the step was skipped for overflow: see info->skipped);
 *          DS_ERR_INVALID_HANDLE; DS_ERR_ABI_MISMATCH (info->struct_size < DS_STEP_INFO_SIZE_V0);
 *          DS_ERR_INVALID_STATE (no ds_backward since the last ds_step; before init;
 *          fp16 overflow with the loss scale already at min_loss_scale: nothing changed;
 *          ranks in different calls; a failed step left NVMe optimizer state with
 *          dsc_atomic_step false partly updated in place: until ds_load_checkpoint);
 *          DS_ERR_IO (NVMe optimizer state: the file, the offset; with dsc_atomic_step
 *          false after sub-groups were updated, which ones);
 *          DS_ERR_INVALID_ARGUMENT (a boundary on some ranks only). */
DS_API ds_status_t ds_step(ds_engine_t* engine, ds_step_info_t* info);

/* ---- getters and setters ------------------------------------------------ */
/* Each returns DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out NULL). */

/** The bare loss scale (1 without fp16). Multiplying the loss by it pairs with
 *  ds_engine_accumulate_grad, which then divides by gradient_accumulation_steps;
 *  prefer ds_engine_loss_multiplier (DeepSpeed's order). */
DS_API ds_status_t ds_engine_loss_scale(const ds_engine_t* engine, float* out);
/** What DeepSpeed's engine.backward multiplies the loss by: loss_scale /
 *  gradient_accumulation_steps. Multiply your loss by it before your backward
 *  and hand the gradients over with ds_engine_accumulate_grad_ex(...,
 *  DS_GRAD_PREDIVIDED) (or write them into ds_engine_grad_view as they are). */
DS_API ds_status_t ds_engine_loss_multiplier(const ds_engine_t* engine, float* out);
/** The learning rate the next optimizer step will use (= engine.get_lr()[0]). */
DS_API ds_status_t ds_engine_get_lr(const ds_engine_t* engine, double* out);
/** Set the learning rate for the next step; an LR schedule overrides it after
 *  its next step. DS_ERR_INVALID_ARGUMENT if lr is negative or not finite. */
DS_API ds_status_t ds_engine_set_lr(ds_engine_t* engine, double lr);
/** The CUDA stream an engine on cuda:N (options.device) orders its work
 *  with: a cudaStream_t as void*, NULL for the legacy default stream; the
 *  same as options.cuda_stream at creation. The engine queues its device work
 *  (kernels, copies) on the legacy default stream; with a stream set, every
 *  call on the engine (not the const getters) first makes that work wait for
 *  what the caller queued on the stream before the call (a gradient being
 *  written, ds_forward's inputs) and at its end makes the stream wait for the
 *  engine's work (the weights of ds_engine_param_view after ds_step, a
 *  forward's output), without blocking the host (CUDA events). The call that
 *  sets a new stream waits for the old one and orders the new one. The stream
 *  must stay valid while the engine uses it. Local.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE;
 *          DS_ERR_INVALID_STATE (the engine trains on the CPU: it has no stream);
 *          DS_ERR_DEVICE (the runtime refused an ordering: a stream of another
 *          device, a destroyed stream). */
DS_API ds_status_t ds_engine_set_stream(ds_engine_t* engine, void* cuda_stream);
/** Optimizer boundaries passed, skipped ones included (= engine.global_steps). */
DS_API ds_status_t ds_engine_global_steps(const ds_engine_t* engine, int64_t* out);
/** Samples consumed (= engine.global_samples). */
DS_API ds_status_t ds_engine_global_samples(const ds_engine_t* engine, int64_t* out);
/** Boundaries whose step was skipped for overflow (= engine.skipped_steps). */
DS_API ds_status_t ds_engine_skipped_steps(const ds_engine_t* engine, int64_t* out);
/** ds_step calls so far (= engine.micro_steps). */
DS_API ds_status_t ds_engine_micro_steps(const ds_engine_t* engine, int64_t* out);
/** 1 if the next ds_step is an accumulation boundary. */
DS_API ds_status_t ds_engine_is_gradient_accumulation_boundary(const ds_engine_t* engine,
                                                               int32_t* out);
/** Force the boundary decision (persists until set again), as DeepSpeed's
 *  set_gradient_accumulation_boundary. value must be 0 or 1.
 *  DS_ERR_INVALID_STATE when managed_gradient_accumulation is false. */
DS_API ds_status_t ds_engine_set_gradient_accumulation_boundary(ds_engine_t* engine,
                                                                int32_t value);

/* ---- debugging: full fp32 copies (DeepSpeed's safe_get_full_* / safe_set_full_*) -- */
/* `out`/`value` is a CPU fp32 tensor of the parameter's shape (contiguous).
 * Each returns DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (NULL
 * argument, bad tensor field, wrong shape/dtype/device, frozen parameter for
 * grad/state); DS_ERR_NOT_FOUND (no such parameter,
 * or no such optimizer state key: the message lists the valid ones);
 * DS_ERR_INVALID_STATE (before ds_engine_init). */

/** The fp32 master weights. */
DS_API ds_status_t ds_engine_get_full_fp32_param(ds_engine_t* engine, const char* name, DLTensor* out);
/** The accumulated gradient of the current window (zeros right after a step). */
DS_API ds_status_t ds_engine_get_full_grad(ds_engine_t* engine, const char* name, DLTensor* out);
/** An optimizer state tensor: "exp_avg", "exp_avg_sq" (Adam, AdamW, Lamb),
 *  "exp_avg" (Lion), "momentum_buffer" (SGD with momentum). */
DS_API ds_status_t ds_engine_get_full_optimizer_state(ds_engine_t* engine, const char* name,
                                                      const char* key, DLTensor* out);
/** Set the fp32 master weights (and the working copy, rounded). */
DS_API ds_status_t ds_engine_set_full_fp32_param(ds_engine_t* engine, const char* name,
                                                 const DLTensor* value);
/** Set the accumulated gradient (rounded to the accumulation dtype). */
DS_API ds_status_t ds_engine_set_full_grad(ds_engine_t* engine, const char* name,
                                           const DLTensor* value);
/** Set an optimizer state tensor (rounded to the state dtype). */
DS_API ds_status_t ds_engine_set_full_optimizer_state(ds_engine_t* engine, const char* name,
                                                      const char* key, const DLTensor* value);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DEEPSPEED_C_TRAINING_H */
