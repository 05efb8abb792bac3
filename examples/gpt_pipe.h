/*
 * gpt_pipe.h — the whole model of a pipeline run on rank 0, for
 * examples/train_gpt.c --pipe N.
 *
 * A pipeline stage's engine refuses ds_forward, so greedy decoding needs the
 * model on one rank. After training, every stage's weights (its fp32 master
 * copies) travel to rank 0, which builds a plain engine on a world of its own
 * from the model spec without its "pipeline" object and writes them into it.
 * The tied wte.weight lives on the first and the last stage; the first
 * stage's copy is taken (the pipeline keeps them equal: their gradients are
 * summed over both stages before every step). With MoE layers sharded over
 * expert groups (moe.ep_size = P > 1: P consecutive replicas of each stage),
 * replicas 1..P-1 of every stage send their experts too, so the whole model
 * (whole_spec: the MoE layers unsharded) gets every expert.
 *
 * Public C ABI only (deepspeed_c.h): ds_engine_param_info enumerates a
 * stage's parameters, ds_engine_get_full_fp32_param reads them (collective
 * over the stage's data-parallel replicas under ZeRO-1, so every replica
 * reads and replica 0 sends), ds_pipe_send/ds_pipe_recv on the world carry
 * them, ds_comm_split gives rank 0 its world of one and
 * ds_engine_set_full_fp32_param writes them.
 */
#ifndef GPT_PIPE_H
#define GPT_PIPE_H

#include <stddef.h>

#include "deepspeed_c.h"

/* Collective over `world` (every rank of the pipeline calls it, after its
 * last ds_train_batch/ds_eval_batch; ep_size: the spec's moe.ep_size, 1
 * without sharded experts). On rank 0, *whole is the plain engine
 * built from whole_spec and whole_config (options as given, comm replaced by
 * *solo, a world of rank 0 alone) holding every stage's weights, and *solo
 * that communicator; the caller destroys the engine, then finalizes and
 * destroys *solo. On the other ranks both are NULL.
 * Returns 0, or -1 with err saying what failed (a library call and its
 * message, or a parameter no stage held or two stages' shapes disagree on). */
int gpt_pipe_gather_whole(ds_engine_t* stage, ds_comm_t* world, int ep_size, const char* whole_spec,
                          const char* whole_config, const ds_engine_options_t* options, ds_comm_t** solo,
                          ds_engine_t** whole, char* err, size_t err_len);

#endif /* GPT_PIPE_H */
