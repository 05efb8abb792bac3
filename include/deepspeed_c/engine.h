/*
 * deepspeed_c/engine.h — part of the public C ABI of deepspeed_c.
 * Engine options (ds_engine_options_t) and the engine's life cycle:
 * create, destroy, the resolved config, the comms log, rank and world size.
 * Include <deepspeed_c.h>; its Conventions comment applies here.
 */
#ifndef DEEPSPEED_C_ENGINE_H
#define DEEPSPEED_C_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Engine options                                                           */
/* ------------------------------------------------------------------------ */

/** Host-process facts that are not part of DeepSpeed's JSON config.
 *  Fill with ds_engine_options_init(&o, sizeof o) before setting fields. */
typedef struct ds_engine_options {
    size_t struct_size;      /* sizeof(ds_engine_options_t) as the caller knows it */
    ds_comm_t* comm;         /* communicator to join (the engine keeps a reference; the caller may
                                destroy its handle); NULL: MPI_COMM_WORLD when started by
                                mpirun/srun, else a world of one */
    DLDevice device;         /* {kDLCPU, 0} default; {kDLCUDA, N}: GPU N, either ZeRO-Offload
                                (offload_optimizer.device "cpu"/"nvme", ZeRO stage 1-3: working
                                weights on the GPU, the optimizer on the CPU; offload_param
                                "cpu"/"nvme" at stage 3) or, without offload_optimizer,
                                device-resident (every buffer and the optimizer on the GPU; ZeRO
                                0-3, several ranks reduce and gather over NCCL; offload_param
                                "cpu" keeps the ZeRO-3 partitions in host memory);
                                docs/DESIGN.md, "The engine on a GPU" */
    void* cuda_stream;       /* cudaStream_t an engine on cuda:N orders its work with; NULL: the
                                legacy default stream (ds_engine_set_stream); must be NULL on the
                                CPU */
    ds_log_fn log_callback;  /* NULL: the library-wide sink (ds_set_log_callback), else
                                stderr (rank 0 only) */
    void* log_user_data;     /* passed to log_callback */
    int32_t log_level;       /* DS_LOG_*; DS_UNSET_I32: from DS_LOG_LEVEL, else DS_LOG_WARN */
    int32_t reserved0;       /* must be 0 (explicit padding) */
} ds_engine_options_t;

/** Frozen size of the first released ds_engine_options_t (log_level @48, reserved0 @52). */
#define DS_ENGINE_OPTIONS_SIZE_V0 56

/** Fill `o` with defaults: comm NULL, device CPU 0, stream NULL, no callback,
 *  log_level DS_UNSET_I32, reserved 0. Writes min(struct_size, known) bytes,
 *  zeroes the rest up to struct_size (at most 65536) and stores struct_size
 *  in o->struct_size. NULL `o` or a struct_size smaller than sizeof(size_t)
 *  does nothing. */
DS_API void ds_engine_options_init(ds_engine_options_t* o, size_t struct_size);

/* ------------------------------------------------------------------------ */
/* Engine life cycle                                                        */
/* ------------------------------------------------------------------------ */

/** Create an engine from DeepSpeed JSON text (= deepspeed.initialize's config).
 *  The config is parsed, validated and resolved against the world size.
 *  With several ranks this is collective: every rank's resolved config must be
 *  the same (except output_path, output_file and nvme_path), checked before
 *  anything else is communicated; a config that fails on one rank fails the
 *  call on every rank.
 *  @param config_json [in] UTF-8 JSON text, borrowed for the call.
 *  @param opts        [in, nullable] NULL: defaults.
 *  @param out         [out] the new engine; NULL on failure.
 *  @return DS_OK;
 *          DS_ERR_INVALID_ARGUMENT (config_json or out NULL; bad option field, e.g. device type;
 *            with several ranks: some device-resident on cuda:N and others not);
 *          DS_ERR_INVALID_HANDLE (opts->comm is not a live communicator);
 *          DS_ERR_COMM / DS_ERR_TIMEOUT (joining the world failed; the config check across ranks);
 *          DS_ERR_ABI_MISMATCH (opts->struct_size < DS_ENGINE_OPTIONS_SIZE_V0; non-zero
 *            reserved0 or non-zero bytes past the known layout);
 *          DS_ERR_INVALID_CONFIG (JSON syntax error with line and column; unknown, duplicate,
 *            mistyped or out-of-range key, named by its dotted path; inconsistent batch sizes;
 *            ranks given different configs: the first differing keys with each rank's value);
 *          DS_ERR_UNSUPPORTED (a DeepSpeed key or value this library does not implement, named;
 *            a device or communicator this build lacks; on cuda:N: offload_param "nvme"
 *            without offload_optimizer, ZeRO-Offload at stage 0, a device-resident engine with
 *            several ranks (or at ZeRO-3 with offload_param "cpu") in a build without NCCL
 *            (with NCCL it makes its own NCCL communicator over opts->comm's ranks), an NCCL
 *            opts->comm);
 *          DS_ERR_DEVICE (options.device names a GPU that cannot be selected);
 *          DS_ERR_OUT_OF_MEMORY. */
DS_API ds_status_t ds_engine_create(const char* config_json,
                                    const ds_engine_options_t* opts,
                                    ds_engine_t** out);

/** As ds_engine_create, reading the JSON from a file.
 *  @return as ds_engine_create, plus DS_ERR_INVALID_ARGUMENT (path NULL) and
 *          DS_ERR_IO (the file cannot be read; message names the path). */
DS_API ds_status_t ds_engine_create_from_file(const char* path,
                                              const ds_engine_options_t* opts,
                                              ds_engine_t** out);

/** Destroy an engine and free everything it owns. NULL is harmless. Local:
 *  never collective. Views and strings obtained from the engine die with it.
 *  Never waits: if another thread is inside a call on the engine, the handle
 *  dies now (new calls get DS_ERR_INVALID_HANDLE) and the engine is freed
 *  when that call returns. */
DS_API void ds_engine_destroy(ds_engine_t* engine);

/** The fully resolved config as JSON: every key with its value or default,
 *  the derived batch keys filled in; when a tuning key with no effect in this
 *  library was set (docs/CONFIG.md, "ignored"), a final "ignored" object maps
 *  each such key path to the reason. The text is accepted back by
 *  ds_engine_create (the "ignored" entry is dropped).
 *  @param out [out] engine-owned text, valid until the engine is destroyed.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out NULL). */
DS_API ds_status_t ds_engine_config_json(const ds_engine_t* engine, const char** out);

/** The comms logger's table (config `comms_logger`, docs/DESIGN.md
 *  "Monitoring"), DeepSpeed's log_summary on demand: per operation and
 *  message size, count, total and mean latency (ms), algorithmic and bus
 *  bandwidth (Gbps), over this rank's operations so far. Rank 0 also logs it
 *  at info level (it is logged at every steps_per_print line too). Local:
 *  never collective.
 *  @param out [out] NULL, or engine-owned text (one line per row), valid
 *         until the next call on this engine or its destruction.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_STATE
 *          (comms_logger.enabled is false). */
DS_API ds_status_t ds_engine_comms_log_summary(ds_engine_t* engine, const char** out);

/** This process's rank in the engine's data-parallel world.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out NULL). */
DS_API ds_status_t ds_engine_rank(const ds_engine_t* engine, int32_t* out);

/** The number of ranks in the engine's data-parallel world.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out NULL). */
DS_API ds_status_t ds_engine_world_size(const ds_engine_t* engine, int32_t* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DEEPSPEED_C_ENGINE_H */
