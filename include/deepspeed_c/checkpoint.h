/*
 * deepspeed_c/checkpoint.h — part of the public C ABI of deepspeed_c.
 * Checkpoints: saving and loading an engine's checkpoint directory, and
 * the 16-bit model export (ds_save_16bit_model).
 * Include <deepspeed_c.h>; its Conventions comment applies here.
 */
#ifndef DEEPSPEED_C_CHECKPOINT_H
#define DEEPSPEED_C_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Checkpoints                                                              */
/* ------------------------------------------------------------------------ */
/*
 * A checkpoint is a directory any program can read (docs/CHECKPOINTS.md):
 *   <dir>/latest                          the newest committed tag (text, no newline)
 *   <dir>/<tag>/manifest.json             written last: counters, optimizer, LR schedule,
 *                                         loss scaler, random streams, resolved config,
 *                                         client state, partition map, size + CRC32C per file
 *   <dir>/<tag>/model.safetensors         working-precision weights
 *   <dir>/<tag>/optim_rank<R>.safetensors fp32 master + optimizer state per parameter fragment
 * Saving is crash-safe: files go to <dir>/<tag>.tmp-<nonce>/, are fsynced,
 * the manifest is written last, the directory is renamed into place and
 * `latest` is replaced atomically. A killed process leaves `latest` naming a
 * complete checkpoint. Resuming from one continues bit for bit.
 */

/** ds_load_checkpoint flags (OR them); 0 = DeepSpeed's defaults
 *  (load_module_strict=True, load_optimizer_states=True,
 *  load_lr_scheduler_states=True, load_module_only=False). */
#define DS_LOAD_NO_OPTIMIZER_STATES    1u /* load_optimizer_states=False: keep the engine's optimizer
                                             state, loss scaler and lr; fp32 master from the weights */
#define DS_LOAD_NO_LR_SCHEDULER_STATES 2u /* load_lr_scheduler_states=False */
#define DS_LOAD_MODULE_ONLY            4u /* load_module_only=True: weights only (fp32 master from
                                             them); no optimizer, schedule or counters */
#define DS_LOAD_NON_STRICT             8u /* load_module_strict=False: parameters missing from the
                                             checkpoint keep their values, extra ones are ignored
                                             (both logged as warnings); shapes and dtypes must match */

/** = engine.save_checkpoint(save_dir, tag, client_state): write everything
 *  needed to resume exactly (weights, fp32 masters, optimizer state and step,
 *  lr/betas as set, LR schedule, loss scaler, counters, random streams,
 *  resolved config, client state) as <save_dir>/<tag>, then point
 *  <save_dir>/latest at it. An existing <tag> is replaced atomically.
 *  Leftovers of interrupted saves in save_dir are removed first (only those
 *  whose process is gone: several processes may save into one save_dir at
 *  once, each DS_OK save loads; flock(2) locks, docs/CHECKPOINTS.md).
 *  Must be called at an accumulation boundary (see DS_ERR_INVALID_STATE).
 *  @param save_dir          [in] directory (created if missing).
 *  @param tag               [in, nullable] NULL: "global_step<global_steps>". 1-234 bytes of
 *                           valid UTF-8, no '/' or control character, no leading or trailing
 *                           space, not "latest", no ".tmp-"/".old-".
 *  @param client_state_json [in, nullable] any JSON value, returned by ds_load_checkpoint;
 *                           NULL: {}.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (save_dir NULL or empty,
 *          malformed tag, client_state_json not valid JSON, or a manifest a load would
 *          refuse, e.g. client state nested too deeply: nothing is committed);
 *          DS_ERR_INVALID_STATE (before ds_engine_init; inside a gradient accumulation window:
 *            ds_backward called since the last ds_step, or micro_steps not a multiple of
 *            gradient_accumulation_steps, or gradients accumulated (accumulate_grad, grad_view,
 *            set_full_grad) that no optimizer step has applied);
 *          DS_ERR_IO (a directory or file cannot be created, written, fsynced or renamed: the
 *            message names the path; `latest` and committed tags are left as they were);
 *          DS_ERR_COMM / DS_ERR_TIMEOUT (several ranks: agreeing on the result failed);
 *          DS_ERR_OUT_OF_MEMORY.
 *  Several ranks: collective (every rank calls it with the same tag; checkpoint.tag_validation
 *  WARN/FAIL compares them). Each rank writes its own fragments, rank 0 the model and the
 *  manifest; a failure on any rank fails the call on every rank (the message names the rank).
 *  A pipeline stage's, tensor- or expert-parallel shard's engine (ds_engine_create_with_model):
 *  collective over the world it was created on, and the checkpoint holds the whole model as
 *  one process would write it (docs/CHECKPOINTS.md, "Pipeline, tensor- and expert-parallel
 *  engines"), which any layout loads. */
DS_API ds_status_t ds_save_checkpoint(ds_engine_t* engine, const char* save_dir, const char* tag,
                                      const char* client_state_json);

/** = engine.load_checkpoint(load_dir, tag, ...): read and verify the whole
 *  checkpoint (sizes and CRC32C of every file it needs, headers, model match)
 *  before changing anything, then restore it. On failure the engine is exactly
 *  as it was. Gradients of an unfinished window are discarded on success.
 *  With zero_optimization.load_from_fp32_weights=false the fp32 master is
 *  rebuilt from the working weights.
 *  @param load_dir [in] a directory ds_save_checkpoint wrote.
 *  @param tag      [in, nullable] NULL: the tag <load_dir>/latest names.
 *  @param flags    DS_LOAD_* bits, 0 for DeepSpeed's defaults.
 *  @param client_state_json_out [out, nullable] the saved client state JSON ("{}" when none
 *                  was given), engine-owned, valid until the next call on this engine.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (load_dir NULL or empty,
 *          malformed tag, unknown flag bits); DS_ERR_INVALID_STATE (before ds_engine_init);
 *          DS_ERR_NOT_FOUND (load_dir, <load_dir>/latest, the tag directory, manifest.json or
 *            a data file does not exist: the message names it; `latest` naming a missing tag
 *            names both);
 *          DS_ERR_FORMAT (a file whose size or CRC32C differs from the manifest: truncated or
 *            corrupt; an invalid manifest, `latest` or safetensors header; a checkpoint of
 *            another model: parameter names (unless DS_LOAD_NON_STRICT), shapes, working
 *            dtype, optimizer type, state names or dtype, LR-schedule type (the last three
 *            unless the flags skip that state); optimizer or LR-schedule state asked for
 *            but absent; values the config would refuse (lr < 0, betas outside [0, 1)).
 *            The message names the file, key or parameter, and for types both values);
 *          A FIFO, device or other non-regular file in place of a checkpoint file is
 *            DS_ERR_IO naming it (never waited on);
 *          DS_ERR_IO (a file or directory cannot be read, or load_dir is not a directory;
 *            with NVMe offload, a write into the swap file failed while the verified
 *            checkpoint was being written in: the state is then partly the checkpoint's,
 *            and ds_backward, ds_step and ds_save_checkpoint answer DS_ERR_INVALID_STATE
 *            until a ds_load_checkpoint succeeds);
 *          DS_ERR_COMM / DS_ERR_TIMEOUT (several ranks: agreeing on the result failed);
 *          DS_ERR_OUT_OF_MEMORY.
 *  Several ranks: collective; a checkpoint saved with any world size loads (fragments are
 *  gathered by offset), and a failure on any rank fails the call on every rank. A pipeline
 *  stage's, tensor- or expert-parallel shard's engine takes its part of the whole model
 *  (collective over its world; shapes are compared as the unsplit parameters', strict names
 *  against every rank's), so a checkpoint of any layout loads into any other. A checkpoint
 *  whose micro_steps is not a multiple of this engine's gradient_accumulation_steps (another
 *  layout's window) continues at the next multiple. */
DS_API ds_status_t ds_load_checkpoint(ds_engine_t* engine, const char* load_dir, const char* tag,
                                      uint32_t flags, const char** client_state_json_out);

/** = engine.save_16bit_model(save_dir, filename): the working-precision
 *  weights (fp16/bf16, or fp32 without mixed precision) of every parameter as
 *  one safetensors file <save_dir>/<filename>, written in a locked temporary
 *  directory <save_dir>/<filename>.tmp-<nonce>/ and renamed into place.
 *  At ZeRO stage 3 it needs zero_optimization.stage3_gather_16bit_weights_on_model_save
 *  = true (DeepSpeed returns False and writes nothing otherwise): DS_ERR_INVALID_CONFIG.
 *  @param filename [in, nullable] a plain file name; NULL: "model.safetensors". Refused
 *                  (it would damage a checkpoint): "latest", "latest.*", "manifest.json",
 *                  "*.tmp-<16 hex>"/"*.old-<16 hex>", and model.safetensors /
 *                  optim_rank<R>.safetensors when save_dir is a checkpoint tag directory.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (save_dir NULL or empty,
 *          filename empty, containing '/', reserved as above, or naming an existing
 *          directory, FIFO, device or other non-regular file);
 *          DS_ERR_INVALID_CONFIG (ZeRO-3 without stage3_gather_16bit_weights_on_model_save);
 *          DS_ERR_INVALID_STATE (before ds_engine_init);
 *          DS_ERR_IO (cannot create or write; names the path); DS_ERR_OUT_OF_MEMORY.
 *  A pipeline stage's, tensor- or expert-parallel shard's engine: collective over its world;
 *  world rank 0 writes the whole model's weights (stages, shards and experts put together). */
DS_API ds_status_t ds_save_16bit_model(ds_engine_t* engine, const char* save_dir, const char* filename);

/** ds_save_16bit_model_ex flag: leave out parameters added without DS_PARAM_TRAINABLE
 *  (DeepSpeed's save_16bit_model(..., exclude_frozen_parameters=True)). */
#define DS_SAVE_EXCLUDE_FROZEN 1u

/** ds_save_16bit_model with flags (DS_SAVE_EXCLUDE_FROZEN, or 0 = ds_save_16bit_model).
 *  @return as ds_save_16bit_model; DS_ERR_INVALID_ARGUMENT also for unknown flag bits. */
DS_API ds_status_t ds_save_16bit_model_ex(ds_engine_t* engine, const char* save_dir, const char* filename,
                                          uint32_t flags);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DEEPSPEED_C_CHECKPOINT_H */
