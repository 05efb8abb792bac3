/*
 * deepspeed_c/pipe.h — part of the public C ABI of deepspeed_c.
 * Pipeline parallelism: DeepSpeed's pipeline schedules as a C iterator
 * (ds_pipe_schedule_*), layer partitioning, and the pipeline engine over a
 * built-in GPT (ds_train_batch, ds_eval_batch, ds_pipe_send/recv).
 * Include <deepspeed_c.h>; its Conventions comment applies here.
 */
#ifndef DEEPSPEED_C_PIPE_H
#define DEEPSPEED_C_PIPE_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "base.h"
#include "training.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Pipeline schedules (ds_pipe_schedule_*)                                  */
/* ------------------------------------------------------------------------ */
/*
 * DeepSpeed's pipeline schedules (deepspeed/runtime/pipe/schedule.py) as a C
 * iterator, for a host that runs its own stage functions: each instruction
 * says what this stage does next, in DeepSpeed's order. A schedule is for one
 * batch of `micro_batches` micro-batches on stage `stage_id` of `stages`; it
 * is divided into steps (DeepSpeed's yielded lists): a barrier between two
 * steps cannot deadlock, and instructions within a step run in order.
 *   TRAIN          TrainSchedule, synchronous 1F1B: 2*(micro_batches + stages - 1) steps;
 *                  num_buffers = max(2, min(stages - stage_id, micro_batches)), micro-batch
 *                  m in buffer m % num_buffers; the last step ends with REDUCE_TIED_GRADS,
 *                  REDUCE_GRADS, OPTIMIZER_STEP. The bubble (steps of this stage without
 *                  forward or backward) is (stages-1)/(micro_batches+stages-1).
 *   INFERENCE      InferenceSchedule: micro_batches + stages - 1 forward-only steps over
 *                  two alternating buffers.
 *   DATA_PARALLEL  DataParallelSchedule: per micro-batch LOAD, FORWARD, BACKWARD on buffer
 *                  0; the last adds REDUCE_GRADS, OPTIMIZER_STEP.
 * The first and last stage load (inputs, labels); sends and receives pair up
 * with the neighbouring stage's (SEND_ACTIVATION here = RECV_ACTIVATION on
 * stage_id + 1 in the same step; SEND_GRAD = RECV_GRAD on stage_id - 1).
 */
#define DS_PIPE_SCHEDULE_TRAIN         0
#define DS_PIPE_SCHEDULE_INFERENCE     1
#define DS_PIPE_SCHEDULE_DATA_PARALLEL 2

#define DS_PIPE_INSTR_LOAD_MICRO_BATCH  1  /* load micro-batch into buffer (first stage: inputs,
                                               last stage: labels) */
#define DS_PIPE_INSTR_FORWARD_PASS      2  /* forward of the buffer's micro-batch */
#define DS_PIPE_INSTR_BACKWARD_PASS     3  /* backward of the buffer's micro-batch */
#define DS_PIPE_INSTR_SEND_ACTIVATION   4  /* send the buffer's output to stage_id + 1 */
#define DS_PIPE_INSTR_RECV_ACTIVATION   5  /* receive the buffer's input from stage_id - 1 */
#define DS_PIPE_INSTR_SEND_GRAD         6  /* send the gradient of the buffer's input to stage_id - 1 */
#define DS_PIPE_INSTR_RECV_GRAD         7  /* receive the gradient of the buffer's output from stage_id + 1 */
#define DS_PIPE_INSTR_REDUCE_TIED_GRADS 8  /* sum tied weights' gradients over their tie groups */
#define DS_PIPE_INSTR_REDUCE_GRADS      9  /* data-parallel gradient reduction (accumulation boundary) */
#define DS_PIPE_INSTR_OPTIMIZER_STEP   10  /* the optimizer step */

/** One instruction. Set struct_size = sizeof(ds_pipe_instr_t) before the call. */
typedef struct ds_pipe_instr {
    size_t struct_size;
    int32_t type;         /* DS_PIPE_INSTR_* */
    int32_t buffer_id;    /* pipeline buffer; -1 for the reductions and the optimizer step */
    int32_t step;         /* the step it belongs to, in [0, num_steps) */
    int32_t micro_batch;  /* the micro-batch it loads, computes or moves (sends: the one of the
                             previous step), in [0, micro_batches); -1 for the reductions and the
                             optimizer step. Not part of DeepSpeed's instruction; derived from its
                             schedule. */
} ds_pipe_instr_t;

/** Frozen size of the first released ds_pipe_instr_t. */
#define DS_PIPE_INSTR_SIZE_V0 24

typedef struct ds_pipe_schedule ds_pipe_schedule_t;

/** A schedule, positioned at its first instruction.
 *  @param kind DS_PIPE_SCHEDULE_*.
 *  @return DS_OK; DS_ERR_INVALID_ARGUMENT (out NULL; unknown kind; micro_batches < 1;
 *          stages < 1; stage_id outside [0, stages); more than 2^31-1 steps: each named);
 *          DS_ERR_OUT_OF_MEMORY. */
DS_API ds_status_t ds_pipe_schedule_create(int32_t kind, int32_t micro_batches, int32_t stages,
                                           int32_t stage_id, ds_pipe_schedule_t** out);
/** The next instruction: *done = 0 and *out filled, or *done = 1 (out untouched) once
 *  every instruction was returned (and at every later call, until ds_pipe_schedule_reset).
 *  Steps without instructions (pipeline bubbles) are skipped; out->step tells the step.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out or done NULL);
 *          DS_ERR_ABI_MISMATCH (out->struct_size < DS_PIPE_INSTR_SIZE_V0). */
DS_API ds_status_t ds_pipe_schedule_next(ds_pipe_schedule_t* schedule, ds_pipe_instr_t* out,
                                         int32_t* done);
/** Back to the first instruction (the next batch runs the same schedule). */
DS_API ds_status_t ds_pipe_schedule_reset(ds_pipe_schedule_t* schedule);
/** num_pipe_buffers(): the buffers this stage needs (buffer_id is below it). */
DS_API ds_status_t ds_pipe_schedule_num_buffers(const ds_pipe_schedule_t* schedule, int32_t* out);
/** The number of steps, counting steps without instructions. */
DS_API ds_status_t ds_pipe_schedule_num_steps(const ds_pipe_schedule_t* schedule, int32_t* out);
/** The number of instructions of `step` (0 for a bubble).
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out NULL; step outside
 *          [0, num_steps)). */
DS_API ds_status_t ds_pipe_schedule_step_size(const ds_pipe_schedule_t* schedule, int32_t step,
                                              int32_t* out);
/** Instruction `index` of `step` (random access; the iterator's position is unchanged).
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out NULL; step or index
 *          out of range); DS_ERR_ABI_MISMATCH (out->struct_size < DS_PIPE_INSTR_SIZE_V0). */
DS_API ds_status_t ds_pipe_schedule_instr(const ds_pipe_schedule_t* schedule, int32_t step,
                                          int32_t index, ds_pipe_instr_t* out);
/** DeepSpeed's class name of an instruction type ("LoadMicroBatch", "ForwardPass", ...);
 *  "?" for a value that is no DS_PIPE_INSTR_*. Static storage; thread-safe. */
DS_API const char* ds_pipe_instr_name(int32_t type);
/** Release. NULL or an already destroyed handle is harmless. */
DS_API void ds_pipe_schedule_destroy(ds_pipe_schedule_t* schedule);

/** Stage boundaries for a list of layers, as DeepSpeed's PipelineModule partitions them
 *  (partition_method): stage s holds layers [parts[s], parts[s+1]).
 *  @param method "uniform" (equal counts, the first num_layers mod num_stages stages one
 *         more), "parameters" (balanced by param_counts) or "type:<regex>" (balanced by 1 for
 *         each layer whose type_names entry the regex, ECMAScript syntax, matches anywhere,
 *         case-insensitive); case-insensitive, as DeepSpeed. Balanced: DeepSpeed's linear
 *         partition (least difference between the largest and smallest stage sum, ties to the
 *         later boundary), with its float64 arithmetic, so the boundaries equal DeepSpeed's.
 *  @param param_counts [in] num_layers trainable parameter counts (>= 0); read by
 *         "parameters" only, else may be NULL.
 *  @param type_names [in] num_layers layer type names (e.g. "TransformerLayer"); read by
 *         "type:" only, else may be NULL.
 *  @param parts [out] num_stages + 1 boundaries, parts[0] = 0, parts[num_stages] = num_layers.
 *  @return DS_OK; DS_ERR_INVALID_ARGUMENT (method or parts NULL; num_layers < 0; num_stages
 *          < 1; an unknown method; a list the method reads NULL, an entry NULL or a count < 0;
 *          a regex that does not compile or matches no layer: each named);
 *          DS_ERR_UNSUPPORTED ("profile", which DeepSpeed does not implement either). */
DS_API ds_status_t ds_pipe_partition(const char* method, int32_t num_layers, const int64_t* param_counts,
                                     const char* const* type_names, int32_t num_stages, int32_t* parts);

/* ------------------------------------------------------------------------ */
/* The pipeline engine over a built-in GPT (ds_train_batch, ds_eval_batch)   */
/* ------------------------------------------------------------------------ */
/* A GPT spec with "pipeline": {"stages": S, "partition_method": "parameters"}
 * makes ds_engine_create_with_model (collective over options.comm or the
 * process's world, W ranks) build this rank's STAGE: the world is laid out as
 * DeepSpeed's PipeDataParallelTopology (pipe x data, rank = stage * W/S +
 * replica), the model's pipeline layers (embedding, the transformer layers,
 * ln_f, the head) are partitioned as DeepSpeed's PipelineModule does and the
 * model handle's model is cut to this stage's layers; the engine runs ZeRO
 * stage 0 or 1 over the data axis (train_batch_size = micro x
 * gradient_accumulation_steps x W/S). Such an engine trains only through
 * ds_train_batch (ds_forward, ds_backward, ds_step and
 * ds_engine_accumulate_grad are DS_ERR_INVALID_STATE; checkpoints
 * DS_ERR_UNSUPPORTED for now); parameter views, counters, the LR and the
 * memory report are this stage's. docs/PIPELINE.md. */

/** One batch through the pipeline (DeepSpeed's train_batch): gradient_accumulation_steps
 *  micro-batches of train_micro_batch_size_per_gpu rows each run DeepSpeed's TrainSchedule
 *  (1F1B), then the tied embedding's gradient is summed over the first and last stage, the
 *  data-parallel gradients reduced and one optimizer step taken (the gradient norm and the
 *  fp16 overflow check span every stage). Collective over the world.
 *  @param inputs [in] token ids (int32/int64) [gradient_accumulation_steps x micro, T],
 *         T <= block_size, this data-parallel replica's; read on the first stage, ignored
 *         (may be NULL) elsewhere.
 *  @param targets [in] next-token targets shaped like inputs (-100 = ignore); read on the
 *         last stage, may be NULL elsewhere.
 *  @param loss [out] the mean loss over the micro-batches, averaged over the data-parallel
 *         replicas, on every rank (nullable).
 *  @param info [out] the optimizer step, as ds_step's (nullable; set struct_size).
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_STATE (not a pipeline engine; under
 *          ds_engine_eval(engine, 1)); DS_ERR_INVALID_ARGUMENT (a rank's batch is malformed:
 *          every rank returns it, naming the rank, before any stage runs); DS_ERR_TIMEOUT /
 *          DS_ERR_COMM (a neighbour failed: the batch's gradients are dropped, the weights and
 *          counters are as before it). */
DS_API ds_status_t ds_train_batch(ds_engine_t* engine, const DLTensor* inputs, const DLTensor* targets,
                                  float* loss, ds_step_info_t* info);
/** DeepSpeed's eval_batch: the InferenceSchedule over gradient_accumulation_steps
 *  micro-batches, dropout off, no gradients; *loss as ds_train_batch's. Collective. */
DS_API ds_status_t ds_eval_batch(ds_engine_t* engine, const DLTensor* inputs, const DLTensor* targets,
                                 float* loss);

/** This rank's place in the pipeline and its last batch's timings. Set struct_size. */
typedef struct ds_pipe_info {
    size_t struct_size;
    int32_t stage_id;            /* this rank's stage */
    int32_t num_stages;
    int32_t first_layer;         /* the stage's pipeline layers [first_layer, last_layer) */
    int32_t last_layer;
    int32_t num_layers;          /* the model's pipeline layers (n_layer + 3) */
    int32_t micro_batches;       /* per batch: gradient_accumulation_steps */
    int32_t data_parallel_size;  /* replicas of each stage */
    int32_t reserved0;           /* written 0 */
    double batch_seconds;        /* the last ds_train_batch/ds_eval_batch, wall clock */
    double compute_seconds;      /* of which this stage's forwards, backwards and optimizer step */
    double recompute_seconds;    /* of which forwards recomputed before their backward */
} ds_pipe_info_t;

/** Frozen size of the first released ds_pipe_info_t. */
#define DS_PIPE_INFO_SIZE_V0 64

/** @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_STATE (not a pipeline engine);
 *          DS_ERR_ABI_MISMATCH (out->struct_size < DS_PIPE_INFO_SIZE_V0). */
DS_API ds_status_t ds_engine_pipe_info(const ds_engine_t* engine, ds_pipe_info_t* out);

/** SendActivation / SendGrad for a host's own stages: send `tensor` (its dtype, shape and
 *  bytes) to rank `peer` of `comm` (e.g. the pipe-axis communicator of ds_topology_comm,
 *  whose ranks are the stage ids). Blocking until the bytes are handed over (with MPI, large
 *  messages wait for the matching ds_pipe_recv: the schedules pair each send with a receive
 *  on the neighbour in the same step, so running their instructions in order cannot
 *  deadlock). Timed by the communicator's timeout_ms: a peer that never receives is
 *  DS_ERR_TIMEOUT and breaks the communicator, as for any collective.
 *  @param tensor [in] contiguous, host memory (kDLCPU).
 *  @param peer   a rank of comm other than this one.
 *  @param tag    in [0, 32767]; a send matches the receive with the same peer and tag, in order.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE (comm); DS_ERR_INVALID_ARGUMENT (tensor NULL, invalid,
 *          not contiguous or not in host memory; peer out of range or this rank; tag out of
 *          range: each named);
 *          DS_ERR_UNSUPPORTED (an NCCL communicator: device buffers are not supported yet);
 *          DS_ERR_INVALID_STATE (comm finalized); DS_ERR_COMM (comm broken, an MPI error);
 *          DS_ERR_TIMEOUT. */
DS_API ds_status_t ds_pipe_send(const ds_comm_t* comm, const DLTensor* tensor, int32_t peer, int32_t tag);
/** RecvActivation / RecvGrad: receive what ds_pipe_send(peer, tag) sent into `tensor`, which
 *  must have the sent dtype and shape. A mismatch is DS_ERR_INVALID_ARGUMENT naming both
 *  (the message is consumed, the communicator stays usable, tensor is unchanged).
 *  @return as ds_pipe_send; DS_ERR_COMM also when the message is not from ds_pipe_send. */
DS_API ds_status_t ds_pipe_recv(const ds_comm_t* comm, DLTensor* tensor, int32_t peer, int32_t tag);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DEEPSPEED_C_PIPE_H */
