/*
 * deepspeed_c.h — the public C ABI of deepspeed_c.
 *
 * deepspeed_c is DeepSpeed's training runtime as an embeddable shared library.
 * This header is C99 and valid C++; it parses on a machine without CUDA.
 *
 * ---------------------------------------------------------------------------
 * Conventions (read once; every function below follows them)
 * ---------------------------------------------------------------------------
 * Status.   Every fallible function returns ds_status_t. DS_OK is 0. The codes
 *           are pinned forever and never reused; bindings map an unknown code
 *           to a generic error. On failure ds_last_error() holds text naming
 *           what was wrong (argument, config key path, parameter, file, rank).
 * Errors.   ds_last_error() is thread-local: it is the message of the last
 *           failing ds_* call on the calling thread. Success does not clear
 *           it. It is never NULL and stays valid until the next failure on
 *           the same thread.
 * Handles.  Opaque structs used through pointers (ds_engine_t*). Create
 *           functions put the out-parameter last and set *out = NULL on
 *           failure. *_destroy accepts NULL, is local (never collective, never
 *           waits on peers) and cannot fail. A NULL, destroyed or foreign
 *           handle passed to any other function gives DS_ERR_INVALID_HANDLE.
 * Memory.   Input pointers (strings, tensors) are borrowed for the duration of
 *           the call; the library copies what it keeps. Returned const char*
 *           and views are owned by the library, with a lifetime stated per
 *           function. Never free them.
 * Options.  Options structs start with `size_t struct_size`, only grow at the
 *           end, and are filled with defaults by ds_<obj>_options_init(o,
 *           sizeof *o). The library reads min(struct_size, known) bytes; a
 *           struct_size smaller than the first released layout is
 *           DS_ERR_ABI_MISMATCH.
 * Threads.  Library-level functions (version, status text, last error,
 *           options_init) are thread-safe. Distinct handles may be used from
 *           different threads at once; one handle is used by one thread at a
 *           time (no thread affinity) unless its doc says otherwise.
 * Config.   DeepSpeed's JSON config (same keys and defaults as DeepSpeed
 *           0.19.6). Stricter than DeepSpeed: unknown keys, duplicate keys,
 *           wrong types and out-of-range values are DS_ERR_INVALID_CONFIG
 *           naming the dotted key path; keys DeepSpeed knows but this library
 *           does not implement are DS_ERR_UNSUPPORTED naming the key.
 * Tensors.  Tensors cross as DLPack DLTensor (<dlpack/dlpack.h>, version 0.6
 *           or later). Strides are in elements (NULL = contiguous); alignment
 *           is never assumed.
 */
#ifndef DEEPSPEED_C_H
#define DEEPSPEED_C_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Export and version                                                       */
/* ------------------------------------------------------------------------ */

#if defined(_WIN32)
#  if defined(DS_BUILDING_LIBRARY)
#    define DS_API __declspec(dllexport)
#  else
#    define DS_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define DS_API __attribute__((visibility("default")))
#else
#  define DS_API
#endif

#define DS_VERSION_MAJOR 0
#define DS_VERSION_MINOR 1
#define DS_VERSION_PATCH 0
/** MAJOR*1000000 + MINOR*1000 + PATCH. */
#define DS_VERSION_NUMBER \
    (DS_VERSION_MAJOR * 1000000 + DS_VERSION_MINOR * 1000 + DS_VERSION_PATCH)
/** Changes only on a breaking ABI change; equals the shared library's soname number. */
#define DS_ABI_VERSION 0

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */
/* ------------------------------------------------------------------------ */

typedef int32_t ds_status_t;

#define DS_OK                        0
#define DS_ERR_INVALID_ARGUMENT      1  /* a bad argument: NULL pointer, bad tensor field, bad value */
#define DS_ERR_INVALID_HANDLE        2  /* NULL, destroyed or foreign handle */
#define DS_ERR_INVALID_STATE         3  /* a call out of order */
#define DS_ERR_INVALID_CONFIG        4  /* config JSON: syntax, unknown key, type, range, consistency */
#define DS_ERR_UNSUPPORTED           5  /* a feature this build or version does not implement */
#define DS_ERR_NOT_FOUND             6  /* a named parameter, tag or file does not exist */
#define DS_ERR_OUT_OF_MEMORY         7  /* host memory exhausted */
#define DS_ERR_DEVICE_OUT_OF_MEMORY  8  /* device memory exhausted */
#define DS_ERR_DEVICE                9  /* a device (CUDA) error */
#define DS_ERR_COMM                 10  /* a collective failed */
#define DS_ERR_TIMEOUT              11  /* a collective or wait expired */
#define DS_ERR_IO                   12  /* a file could not be read or written */
#define DS_ERR_FORMAT               13  /* corrupt or incompatible file or spec */
#define DS_ERR_ABI_MISMATCH         14  /* struct_size or version not understood */
#define DS_ERR_INTERNAL             15  /* a bug in deepspeed_c */

/** "Unset" value for int32_t option fields: take the value from the config or the default. */
#define DS_UNSET_I32 INT32_MIN

/* ------------------------------------------------------------------------ */
/* Library-level functions (all thread-safe)                                */
/* ------------------------------------------------------------------------ */

/** Static English text for a status code ("DS_ERR_INVALID_CONFIG: invalid
 *  configuration"); an unknown code gives "unknown status". Never NULL. */
DS_API const char* ds_status_string(ds_status_t status);

/** The message of the last failing ds_* call on this thread; "" if none has
 *  failed. Never NULL; valid until the next failure on this thread. */
DS_API const char* ds_last_error(void);

/** DS_VERSION_NUMBER of the library actually loaded. */
DS_API uint32_t ds_version(void);

/** "MAJOR.MINOR.PATCH" of the library actually loaded. Static text. */
DS_API const char* ds_version_string(void);

/** DS_ABI_VERSION of the library actually loaded. Bindings refuse to load on
 *  a mismatch with the header they were written against. */
DS_API uint32_t ds_abi_version(void);

/** Static JSON describing the build and the machine: version, ABI, compiler,
 *  CUDA/NCCL/MPI/OpenMP/oneDNN/BLAS availability and the SIMD level chosen at
 *  run time, e.g. {"version":"0.1.0","cuda":false,...,"simd":"avx512"}. */
DS_API const char* ds_build_info(void);

/* ------------------------------------------------------------------------ */
/* Logging                                                                  */
/* ------------------------------------------------------------------------ */

#define DS_LOG_OFF   0
#define DS_LOG_ERROR 1
#define DS_LOG_WARN  2
#define DS_LOG_INFO  3
#define DS_LOG_DEBUG 4

/** A log sink. Called on the thread that logs; must not call back into the
 *  engine that logs. `message` is valid only during the call. */
typedef void (*ds_log_fn)(int32_t level, const char* message, void* user_data);

/* ------------------------------------------------------------------------ */
/* Handles                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct ds_engine ds_engine_t;
typedef struct ds_comm ds_comm_t;

/* ------------------------------------------------------------------------ */
/* Engine options                                                           */
/* ------------------------------------------------------------------------ */

/** Host-process facts that are not part of DeepSpeed's JSON config.
 *  Fill with ds_engine_options_init(&o, sizeof o) before setting fields. */
typedef struct ds_engine_options {
    size_t struct_size;      /* sizeof(ds_engine_options_t) as the caller knows it */
    ds_comm_t* comm;         /* communicator to join; NULL: from the environment (a world of one) */
    DLDevice device;         /* {kDLCPU, 0} default; {kDLCUDA, N} for GPU N */
    void* cuda_stream;       /* cudaStream_t to run on; NULL: the engine's own */
    ds_log_fn log_callback;  /* NULL: stderr (rank 0 only) */
    void* log_user_data;     /* passed to log_callback */
    int32_t log_level;       /* DS_LOG_*; DS_UNSET_I32: from DS_LOG_LEVEL, else DS_LOG_WARN */
} ds_engine_options_t;

/** Fill `o` with defaults: comm NULL, device CPU 0, stream NULL, no callback,
 *  log_level DS_UNSET_I32. Writes min(struct_size, sizeof(ds_engine_options_t))
 *  bytes and stores struct_size in o->struct_size. NULL `o` or a struct_size
 *  smaller than sizeof(size_t) does nothing. */
DS_API void ds_engine_options_init(ds_engine_options_t* o, size_t struct_size);

/* ------------------------------------------------------------------------ */
/* Engine life cycle                                                        */
/* ------------------------------------------------------------------------ */

/** Create an engine from DeepSpeed JSON text (= deepspeed.initialize's config).
 *  The config is parsed, validated and resolved against the world size.
 *  @param config_json [in] UTF-8 JSON text, borrowed for the call.
 *  @param opts        [in, nullable] NULL: defaults.
 *  @param out         [out] the new engine; NULL on failure.
 *  @return DS_OK;
 *          DS_ERR_INVALID_ARGUMENT (config_json or out NULL; bad option field, e.g. device type);
 *          DS_ERR_INVALID_HANDLE (opts->comm is not a live communicator);
 *          DS_ERR_ABI_MISMATCH (opts->struct_size too small);
 *          DS_ERR_INVALID_CONFIG (JSON syntax error with line and column; unknown, duplicate,
 *            mistyped or out-of-range key, named by its dotted path; inconsistent batch sizes);
 *          DS_ERR_UNSUPPORTED (a DeepSpeed key or value this library does not implement, named;
 *            a device or communicator this build lacks);
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
 *  never collective. Views and strings obtained from the engine die with it. */
DS_API void ds_engine_destroy(ds_engine_t* engine);

/** The fully resolved config as JSON: every key with its value or default,
 *  the derived batch keys filled in.
 *  @param out [out] engine-owned text, valid until the engine is destroyed.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out NULL). */
DS_API ds_status_t ds_engine_config_json(const ds_engine_t* engine, const char** out);

/** This process's rank in the engine's data-parallel world.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out NULL). */
DS_API ds_status_t ds_engine_rank(const ds_engine_t* engine, int32_t* out);

/** The number of ranks in the engine's data-parallel world.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out NULL). */
DS_API ds_status_t ds_engine_world_size(const ds_engine_t* engine, int32_t* out);


/* ------------------------------------------------------------------------ */
/* Host-driven training: parameters and gradients                          */
/* ------------------------------------------------------------------------ */
/*
 * Life cycle (DeepSpeed equivalent in brackets):
 *   ds_engine_create -> ds_engine_add_param (once per parameter) -> ds_engine_init
 *   loop over micro-batches:
 *     ds_engine_param_view                 weights for your forward
 *     loss *= ds_engine_loss_scale(...)    [engine.scale(loss)]
 *     your backward, then ds_engine_accumulate_grad per parameter
 *     ds_backward(e, NULL)                 [engine.backward(loss)]
 *     ds_step(e, &info)                    [engine.step()]
 * The engine divides each gradient by gradient_accumulation_steps, as
 * DeepSpeed divides the loss, so a window's gradients are averaged.
 */

/** Flag for ds_engine_add_param: the parameter is trained (0 = frozen). */
#define DS_PARAM_TRAINABLE 1u

/** Register a named parameter with its initial value (copied).
 *  @param name  [in] unique, non-empty UTF-8 name.
 *  @param init  [in] CPU tensor, fp32/fp16/bf16, any shape (contiguous, or strided).
 *  @param flags DS_PARAM_TRAINABLE or 0 (frozen: no gradient, no optimizer state).
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (name NULL/empty/duplicate,
 *          bad tensor field, unknown flag bits); DS_ERR_INVALID_STATE (after ds_engine_init);
 *          DS_ERR_OUT_OF_MEMORY. */
DS_API ds_status_t ds_engine_add_param(ds_engine_t* engine, const char* name,
                                       const DLTensor* init, uint32_t flags);

/** Lay out parameters, gradients and optimizer state (= the end of deepspeed.initialize).
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_STATE (called twice, or no
 *          parameters were added); DS_ERR_INVALID_CONFIG (trainable parameters but no
 *          "optimizer" section); DS_ERR_OUT_OF_MEMORY. */
DS_API ds_status_t ds_engine_init(ds_engine_t* engine);

/** The working-precision weights of a parameter (fp32, or fp16/bf16 when that
 *  precision is enabled) for the host's forward pass. `out` is filled with
 *  engine-owned data/shape pointers, valid until the next ds_step, load, set_full_*
 *  call or ds_engine_destroy. Read-only for the host.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (name or out NULL);
 *          DS_ERR_NOT_FOUND (no such parameter); DS_ERR_INVALID_STATE (before ds_engine_init). */
DS_API ds_status_t ds_engine_param_view(ds_engine_t* engine, const char* name, DLTensor* out);

/** The engine-owned gradient accumulation buffer of a trainable parameter
 *  (dtype data_types.grad_accum_dtype, default the working dtype) = torch's
 *  param.grad. It holds the sum of this window's contributions, each already
 *  divided by gradient_accumulation_steps. The host may add into it directly
 *  instead of calling ds_engine_accumulate_grad (then dividing by
 *  gradient_accumulation_steps is the host's job). Valid as ds_engine_param_view.
 *  @return as ds_engine_param_view, plus DS_ERR_INVALID_ARGUMENT (parameter is frozen). */
DS_API ds_status_t ds_engine_grad_view(ds_engine_t* engine, const char* name, DLTensor* out);

/** Add the gradient of this micro-batch's (scaled) loss for one parameter:
 *  buffer += grad / gradient_accumulation_steps. Several calls for the same
 *  parameter in one micro-step add up (as autograd does).
 *  @param grad [in] CPU tensor of the parameter's shape, fp32 or the working dtype.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (name/grad NULL, bad
 *          tensor field, wrong shape or dtype, frozen parameter); DS_ERR_NOT_FOUND;
 *          DS_ERR_INVALID_STATE (before ds_engine_init). */
DS_API ds_status_t ds_engine_accumulate_grad(ds_engine_t* engine, const char* name,
                                             const DLTensor* grad);

/** End the micro-step's backward pass (= engine.backward epilogue: gradient
 *  reduction at the boundary). In host-driven mode `out_grad` must be NULL.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out_grad not NULL
 *          without a built-in model); DS_ERR_INVALID_STATE (before ds_engine_init). */
DS_API ds_status_t ds_backward(ds_engine_t* engine, const DLTensor* out_grad);

/** What ds_step did. Fill struct_size = sizeof(ds_step_info_t) before the call. */
typedef struct ds_step_info {
    size_t struct_size;
    int32_t stepped;      /* 1 at an accumulation boundary (an optimizer step was attempted) */
    int32_t skipped;      /* 1 if that step was skipped (gradient overflow) */
    float loss_scale;     /* the loss scale after this call */
    double grad_norm;     /* unscaled global gradient norm before clipping (boundary only) */
    double lr;            /* learning rate this step applied (boundary only) */
    int64_t global_step;  /* global_steps after this call */
} ds_step_info_t;

/** = engine.step(): at an accumulation boundary check overflow, update the loss
 *  scaler, unscale and clip (one fused factor), run the optimizer, advance the
 *  LR schedule, zero the gradients; otherwise only count the micro-step.
 *  @param info [in,out, nullable] struct_size must be set.
 *  @return DS_OK (also when the step was skipped for overflow: see info->skipped);
 *          DS_ERR_INVALID_HANDLE; DS_ERR_ABI_MISMATCH (info->struct_size too small);
 *          DS_ERR_INVALID_STATE (no ds_backward since the last ds_step; before init;
 *          fp16 overflow with the loss scale already at min_loss_scale: nothing changed). */
DS_API ds_status_t ds_step(ds_engine_t* engine, ds_step_info_t* info);

/* ---- getters and setters ------------------------------------------------ */
/* Each returns DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out NULL). */

/** The loss scale to multiply your loss by before your backward (1 without fp16). */
DS_API ds_status_t ds_engine_loss_scale(const ds_engine_t* engine, float* out);
/** The learning rate the next optimizer step will use (= engine.get_lr()[0]). */
DS_API ds_status_t ds_engine_get_lr(const ds_engine_t* engine, double* out);
/** Set the learning rate for the next step; an LR schedule overrides it after
 *  its next step. DS_ERR_INVALID_ARGUMENT if lr is negative or not finite. */
DS_API ds_status_t ds_engine_set_lr(ds_engine_t* engine, double lr);
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


/* ------------------------------------------------------------------------ */
/* Communicators (ds_comm_*)                                                */
/* ------------------------------------------------------------------------ */
/* @@DS_SECTION_COMM@@ */

/* ------------------------------------------------------------------------ */
/* Checkpoints                                                              */
/* ------------------------------------------------------------------------ */
/* @@DS_SECTION_CHECKPOINT@@ */

/* ------------------------------------------------------------------------ */
/* ZeRO: memory report and estimators                                       */
/* ------------------------------------------------------------------------ */
/* @@DS_SECTION_ZERO@@ */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DEEPSPEED_C_H */
