/*
 * deepspeed_c/zero.h — part of the public C ABI of deepspeed_c.
 * ZeRO: DeepSpeed's model-states memory estimators, the engine's memory and
 * disk reports, offloading and reloading states, and the ZeRO-3 partition cache.
 * Include <deepspeed_c.h>; its Conventions comment applies here.
 */
#ifndef DEEPSPEED_C_ZERO_H
#define DEEPSPEED_C_ZERO_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* ZeRO: memory report and estimators                                       */
/* ------------------------------------------------------------------------ */
/* DeepSpeed's model-states memory estimators (DEEPSPEED_SEMANTICS.md §10): the bytes
 * estimate_zero2_model_states_mem_needs / estimate_zero3_model_states_mem_needs
 * (DeepSpeed 0.19.6) return, for one configuration, as DeepSpeed computes them
 * (same integer/float evaluation order, truncated to whole bytes).
 * cpu_bytes is per node (CPU RAM), gpu_bytes per GPU.
 * additional_buffer_factor: NaN (e.g. NAN from <math.h>) means DeepSpeed's
 * default 1.5; otherwise finite and >= 0. Flags are 0 or 1.
 * Each returns DS_OK; DS_ERR_INVALID_ARGUMENT for a NULL output, a flag other
 * than 0/1, total_params or largest_layer_params outside [0, 2^53/18],
 * num_gpus_per_node or num_nodes < 1, a bad factor, or a result that does not
 * fit in int64_t. Thread-safe. */

/** ZeRO-1/2. cpu_offload = offload_optimizer.device "cpu". T = nodes * GPUs:
 *  cpu_offload: gpu = 2P, cpu = P * max(4T, 16) * f;
 *  otherwise:   gpu = 2P + int(18P / T), cpu = 4P * num_gpus_per_node * f. */
DS_API ds_status_t ds_estimate_zero2_mem(int64_t total_params, int32_t num_gpus_per_node, int32_t num_nodes,
                                         int32_t cpu_offload, double additional_buffer_factor,
                                         int64_t* cpu_bytes, int64_t* gpu_bytes);

/** ZeRO-3. largest_layer_params = the most parameters any one module owns
 *  directly; cpu_offload = offload_optimizer "cpu", cpu_offload_params =
 *  offload_param "cpu" (ignored when cpu_offload is 0, as in DeepSpeed),
 *  zero_init = the model is built under zero.Init. largest_layer_bytes
 *  (4 * largest_layer_params, DeepSpeed's third return value) may be NULL. */
DS_API ds_status_t ds_estimate_zero3_mem(int64_t total_params, int64_t largest_layer_params,
                                         int32_t num_gpus_per_node, int32_t num_nodes, int32_t cpu_offload,
                                         int32_t cpu_offload_params, int32_t zero_init,
                                         double additional_buffer_factor, int64_t* cpu_bytes,
                                         int64_t* gpu_bytes, int64_t* largest_layer_bytes);

/** An engine's memory accounting in bytes (this rank). Starts with
 *  struct_size; grows only at the end. */
typedef struct ds_memory_report {
    size_t struct_size;
    int64_t params_bytes;           /* working-precision and master parameters held by this rank */
    int64_t grads_bytes;            /* gradient accumulation buffers or partitions */
    int64_t optimizer_state_bytes;  /* optimizer moments and other state */
    int64_t buffers_bytes;          /* other buffers (communication, staging) */
    int64_t total_bytes;            /* currently allocated, all of the above */
    int64_t peak_total_bytes;       /* high-water mark of total_bytes */
} ds_memory_report_t;

/** Frozen size of the first released ds_memory_report_t. */
#define DS_MEMORY_REPORT_SIZE_V0 56

/** This rank's memory, as the engine's allocator counts it, by category:
 *  params_bytes = working copies (16-bit, or fp32) + fp32 master weights
 *  (a partition of them at ZeRO >= 1 with several ranks); grads_bytes = the
 *  gradient accumulation buffer (a partition at ZeRO-2); optimizer_state_bytes
 *  = the moments (a partition at ZeRO >= 1); buffers_bytes = everything else,
 *  including ZeRO-2's reduction buckets (reduce_bucket_size elements, two with
 *  overlap_comm; without it an fp32 bucket has a quarter-bucket buffer for
 *  the results of its all-reduce, run in four pieces). total_bytes is the sum of the four; peak_total_bytes its
 *  high-water mark since the engine was created (registration copies
 *  included). With zero_optimization.offload_optimizer.device "nvme" the
 *  fp32 master and the moments are on disk (ds_engine_disk_report):
 *  params_bytes is the working copy only and optimizer_state_bytes the
 *  buffer_count swap buffers, whatever the model size. Memory on disk is
 *  left out: pages of the working partition swapped out by
 *  offload_param.device "nvme" (ZeRO-3) and states moved by
 *  ds_engine_offload_states (whole pages; total_bytes likewise;
 *  peak_total_bytes stays the allocator's). Callable at any time
 *  after ds_engine_create; local (never talks to other ranks).
 *  @param out [in,out] out->struct_size must be set (sizeof, >= DS_MEMORY_REPORT_SIZE_V0);
 *             the fields after it are filled (see "Structs" above).
 *  @return DS_OK; DS_ERR_INVALID_HANDLE (engine NULL or destroyed);
 *          DS_ERR_INVALID_ARGUMENT (out NULL);
 *          DS_ERR_ABI_MISMATCH (out->struct_size < DS_MEMORY_REPORT_SIZE_V0). */
DS_API ds_status_t ds_engine_memory_report(const ds_engine_t* engine, ds_memory_report_t* out);

/** This rank's bytes on disk, in the categories of ds_engine_memory_report:
 *  with zero_optimization.offload_optimizer.device "nvme", params_bytes =
 *  the fp32 master weights and optimizer_state_bytes = the moments in the
 *  NVMe swap file (both record slots: twice the state, see docs/CONFIG.md
 *  "Offload and NVMe"; once with our offload_optimizer.dsc_atomic_step false); with offload_param.device "nvme" (ZeRO-3),
 *  params_bytes adds the working partition's swap file; states moved by
 *  ds_engine_offload_states add their bytes to their category (grads
 *  included); buffers_bytes is 0; total_bytes the sum, peak_total_bytes =
 *  total_bytes (the files are reserved whole when written). All zero
 *  without NVMe offload or before ds_engine_init.
 *  Local. The memory those engines use for optimizer state (the swap
 *  buffers) is ds_engine_memory_report's optimizer_state_bytes.
 *  @param out [in,out] as ds_engine_memory_report.
 *  @return as ds_engine_memory_report. */
DS_API ds_status_t ds_engine_disk_report(const ds_engine_t* engine, ds_memory_report_t* out);

/** States ds_engine_offload_states moves (DeepSpeed's OffloadStateTypeEnum);
 *  bit flags, 0 = every one this engine can move. */
#define DS_OFFLOAD_OPTIM_STATES 0x1u            /* optimizer moments (optim_states) */
#define DS_OFFLOAD_HP_PARAMS 0x2u               /* fp32 master weights (hp_params) */
#define DS_OFFLOAD_LP_PARAMS 0x4u               /* working weights, 16-bit or fp32 (lp_params) */
#define DS_OFFLOAD_LP_GRADS 0x8u                /* gradient accumulation buffer or partition (lp_grads) */
#define DS_OFFLOAD_CONTIGUOUS_GRAD_BUFFER 0x10u /* ZeRO-2/3 reduction buckets (contiguous_grad_buffer) */
#define DS_OFFLOAD_ALL_STATES 0x1fu
/** Where ds_engine_offload_states moves them (DeepSpeed's OffloadDeviceEnum). */
#define DS_OFFLOAD_DEVICE_CPU 1
#define DS_OFFLOAD_DEVICE_NVME 2

/** DeepSpeed's engine.offload_states: moves this rank's `which` states out
 *  of memory until ds_engine_reload_states, e.g. around an evaluation.
 *  device DS_OFFLOAD_DEVICE_CPU: the states already live in host memory on
 *  this engine, so it moves nothing and succeeds (it means GPU -> host once
 *  the CUDA backend holds them). device DS_OFFLOAD_DEVICE_NVME: their bytes
 *  go to an unlinked file under `nvme_path`/ds_swap (NULL: the config's
 *  zero_optimization.offload_optimizer.nvme_path, else offload_param's) and
 *  their memory is released; ds_engine_memory_report no longer counts it and
 *  ds_engine_disk_report does. Where the fp32 master weights are the working
 *  weights themselves (fp32 without partitioned optimizer state), that one
 *  buffer moves with DS_OFFLOAD_LP_PARAMS (DS_OFFLOAD_HP_PARAMS alone leaves
 *  it, so evaluation still works); state already on NVMe through
 *  offload_optimizer "nvme" does not move again. Offloading more states
 *  later adds to those out; states already out are skipped. While a state is
 *  out, the calls that read it return DS_ERR_INVALID_STATE naming
 *  ds_engine_reload_states (DeepSpeed does not reload on its own either):
 *  ds_forward and ds_engine_param_view / ds_engine_gather need the working
 *  weights, ds_engine_grad_view the gradients, and training, checkpoints
 *  and the full-copy calls need every state in memory. Local to this rank.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_STATE (before
 *          ds_engine_init); DS_ERR_INVALID_ARGUMENT (unknown bits in
 *          `which`, an unknown device, no nvme path given or configured, a
 *          path that is not a directory); DS_ERR_UNSUPPORTED
 *          (DS_OFFLOAD_CONTIGUOUS_GRAD_BUFFER named explicitly where the
 *          engine keeps reduction buckets — ZeRO-2/3 with several ranks,
 *          ZeRO-3 with offload_param "nvme" —: they do not move in this
 *          version; an engine on cuda:N); DS_ERR_IO (disk full, I/O error; naming the file: every
 *          state is then still in memory and usable). */
DS_API ds_status_t ds_engine_offload_states(ds_engine_t* engine, uint32_t which, int32_t device,
                                            const char* nvme_path);

/** DeepSpeed's engine.reload_states: reads every offloaded state back into
 *  the memory it left (bit-identical: each buffer's CRC32C is checked). A
 *  no-op success when nothing is offloaded. Local.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_IO (a read error or a
 *          checksum mismatch, naming the file and the state: the states
 *          stay offloaded and the call can be retried). */
DS_API ds_status_t ds_engine_reload_states(ds_engine_t* engine);

/** DeepSpeed's engine.empty_partition_cache: at ZeRO-3, frees the whole
 *  working weights of every parameter gathered with ds_engine_gather
 *  (persistent parameters, numel <= param_persistence_threshold, stay
 *  whole); a later ds_engine_release of them returns DS_ERR_INVALID_STATE.
 *  Below ZeRO-3 (weights always whole) a no-op success, as in DeepSpeed.
 *  Local.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE. */
DS_API ds_status_t ds_engine_empty_partition_cache(ds_engine_t* engine);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DEEPSPEED_C_ZERO_H */
