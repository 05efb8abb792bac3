/*
 * gpt_whole.h — the whole model of a pipeline run on rank 0, for
 * examples/train_gpt.c --pipe N.
 *
 * A pipeline stage's engine refuses ds_forward, so greedy decoding needs the
 * model on one rank. The run's last checkpoint already holds it: a sharded
 * engine (pipeline stages, tensor-parallel shards, experts split over
 * expert groups) saves the logical, unsplit model (docs/CHECKPOINTS.md,
 * "Pipeline, tensor- and expert-parallel engines"). So rank 0 builds a plain
 * engine on a world of its own from the model spec without its "pipeline"
 * object (and with its MoE layers unsharded) and loads that checkpoint into
 * it: the weights, the counters and the dropout stream (MoE layers draw
 * their token selection from it in evaluation too, so the whole model
 * evaluates at the stream position the pipeline's ds_eval_batch does), not
 * the optimizer state or the schedule (DS_LOAD_NO_OPTIMIZER_STATES |
 * DS_LOAD_NO_LR_SCHEDULER_STATES: the whole model only evaluates).
 *
 * Public C ABI only (deepspeed_c.h): ds_comm_split gives rank 0 its world
 * of one, ds_engine_create_with_model and ds_load_checkpoint do the rest.
 */
#ifndef GPT_WHOLE_H
#define GPT_WHOLE_H

#include <stddef.h>

#include "deepspeed_c.h"

/* Collective over `world` (every rank calls it, after the checkpoint in
 * `ckpt_dir` was saved). On rank 0, *whole is the plain engine built from
 * whole_spec and whole_config (options as given, comm replaced by *solo, a
 * world of rank 0 alone) holding the latest checkpoint of ckpt_dir, and
 * *solo that communicator; the caller destroys the engine, then finalizes
 * and destroys *solo. On the other ranks both are NULL.
 * Returns 0, or -1 with err naming the library call that failed and its
 * message. */
int gpt_whole_from_checkpoint(ds_comm_t* world, const char* ckpt_dir, const char* whole_spec,
                              const char* whole_config, const ds_engine_options_t* options, ds_comm_t** solo,
                              ds_engine_t** whole, char* err, size_t err_len);

#endif /* GPT_WHOLE_H */
