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
 * Structs.  Every public struct starts with `size_t struct_size`, only grows
 *           at the end, and has its first released size frozen as
 *           DS_<NAME>_SIZE_V0 (64-bit targets only). Padding is explicit
 *           (`reserved*` fields: 0 on input, written 0 on output). Options
 *           are filled with defaults by ds_<obj>_options_init(o, sizeof *o).
 *           struct_size < the V0 size (or > 65536) is DS_ERR_ABI_MISMATCH.
 *           Input structs: the library reads min(struct_size, known) bytes;
 *           bytes past what it knows must be zero, else DS_ERR_ABI_MISMATCH
 *           naming the struct and the offset (a newer caller setting a field
 *           this library lacks fails loudly); a non-zero reserved field is
 *           DS_ERR_ABI_MISMATCH too. Output structs: the library writes
 *           min(struct_size, known) bytes and zeroes the caller's bytes past
 *           what it knows, up to struct_size.
 * Threads.  Library-level functions (version, status text, last error,
 *           options_init, ds_set_log_callback, ds_convert) are thread-safe.
 *           Distinct handles may be used from different threads at once; one
 *           handle is used by one thread at a time (no thread affinity),
 *           except that functions taking a `const ds_engine_t*` (getters)
 *           may run together. This is detected, not assumed: a call that
 *           enters an engine while a conflicting call is inside it on another
 *           thread fails with DS_ERR_INVALID_STATE "concurrent call on engine
 *           (another thread is inside ds_xxx)" and changes nothing.
 *           ds_engine_destroy while another thread is inside a call on the
 *           engine is safe: the handle dies at once (later calls get
 *           DS_ERR_INVALID_HANDLE), destroy returns without waiting, and the
 *           engine is freed when the call inside leaves. Communicators:
 *           every ds_comm_* function may be called from any thread (a second
 *           concurrent ds_comm_finalize of one communicator fails with
 *           DS_ERR_INVALID_STATE).
 * Fork.     Handles are not usable in a forked child (threads, MPI and CUDA
 *           state do not survive fork): a child must not call ds_* on a
 *           handle its parent created, not even destroy (it may exit, or
 *           exec). Library-level functions stay usable in the child.
 * Signals.  No ds_* function is async-signal-safe, ds_comm_abort included
 *           (it takes locks, allocates and logs). To interrupt a long call
 *           (Ctrl-C during a collective), let the signal handler wake an
 *           ordinary thread (a self-pipe or a semaphore) and call
 *           ds_comm_abort from that thread: any thread may call it, also
 *           while another thread is blocked inside a collective.
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
 *  run time, e.g. {"version":"0.1.0","cuda":false,...,"simd":"avx512"}, and
 *  "gemm_engine": what runs the built-in layers' matmuls ("onednn 2.6.3",
 *  "openblas 0.3.21 (SkylakeX)", "reference (...why...)"), and the CUDA
 *  kernels compiled in: "cuda_architectures" ("80-real,90": sm_80 and sm_90
 *  machine code plus compute_90 PTX; "" without CUDA) and "cuda_kernels"
 *  (["adam_multi","sgd_multi",...]; [] without CUDA). */
DS_API const char* ds_build_info(void);

/** Convert the elements of `src` into `dst` (fp32, fp16, bf16 in any
 *  combination; same dtype is a copy) with the library's SIMD casts: round to
 *  nearest even, NaN stays NaN (quiet), Inf stays Inf, subnormals kept (fp16
 *  and bf16 subnormals are exact in fp32; fp32 values below the target's
 *  range round to its subnormals or to signed zero), overflow gives Inf.
 *  Both are tensors of the same shape on the same device, contiguous
 *  (row-major; NULL strides or equivalent); they must not overlap unless
 *  they are the same tensor with the same dtype (a no-op). CPU tensors may
 *  have any alignment. On a GPU ({kDLCUDA, N}, a build with CUDA) the
 *  elements must be aligned to their size; the conversion (the same
 *  per-element function, so the same bits) is enqueued on device N's legacy
 *  default stream and the call returns without waiting for it (DLPack's
 *  stream=None contract); the caller's current device is left as it was.
 *  No engine; thread-safe.
 *  @return DS_OK; DS_ERR_INVALID_ARGUMENT (NULL, a bad tensor field, another dtype or
 *          a device other than src's, strides that are not contiguous, shapes that
 *          differ, overlap, misaligned device data; the message names src or dst and
 *          the field); DS_ERR_UNSUPPORTED (a GPU tensor in a build without CUDA);
 *          DS_ERR_DEVICE (a CUDA error, e.g. no such device). */
DS_API ds_status_t ds_convert(const DLTensor* src, DLTensor* dst);

/* ------------------------------------------------------------------------ */
/* Logging                                                                  */
/* ------------------------------------------------------------------------ */

#define DS_LOG_OFF   0
#define DS_LOG_ERROR 1
#define DS_LOG_WARN  2
#define DS_LOG_INFO  3
#define DS_LOG_DEBUG 4

/** A log sink. `message` is valid only during the call. It runs on a thread
 *  that is inside a ds_* call, or on a communicator's watchdog thread (the
 *  message that a communicator broke: a timeout or a peer's failure). It must
 *  return normally: never unwind (C++ exceptions, Rust panics: catch them) or
 *  longjmp through the library; and it must not call ds_* functions on the
 *  engine that is logging (they fail with DS_ERR_INVALID_STATE). Several
 *  threads may call it at once. */
typedef void (*ds_log_fn)(int32_t level, const char* message, void* user_data);

/** The library-wide log sink: every message the library emits that no
 *  engine's own options.log_callback takes goes to `fn`: communicators
 *  (including their watchdog threads), checkpoint cleanup, and engines
 *  created without a callback. An engine's options.log_callback overrides it
 *  for that engine's messages. Levels still filter first (DS_LOG_LEVEL, or an
 *  engine's options.log_level); unlike stderr, the sink gets every rank's
 *  messages. NULL `fn` restores the default (stderr, rank 0 only for engines).
 *  Set atomically: a message goes either to the old or to the new sink, and
 *  `user_data` always travels with its `fn`; after this returns, no new call
 *  to the old sink starts (one already running may still finish).
 *  Thread-safe. */
DS_API void ds_set_log_callback(ds_log_fn fn, void* user_data);

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
    ds_comm_t* comm;         /* communicator to join (the engine keeps a reference; the caller may
                                destroy its handle); NULL: MPI_COMM_WORLD when started by
                                mpirun/srun, else a world of one */
    DLDevice device;         /* {kDLCPU, 0} default; {kDLCUDA, N}: GPU N, either ZeRO-Offload
                                (offload_optimizer.device "cpu"/"nvme", ZeRO stage 1 or 2: working
                                weights on the GPU, the optimizer on the CPU) or, without
                                offload_optimizer, device-resident (every buffer and the optimizer
                                on the GPU; ZeRO 0-2, one rank); docs/DESIGN.md, "The engine on
                                a GPU" */
    void* cuda_stream;       /* cudaStream_t a ZeRO-Offload engine orders its copies on; NULL: the
                                legacy default stream (ds_engine_set_stream); must be NULL on the
                                CPU and, for now, on a device-resident engine */
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
 *          DS_ERR_INVALID_ARGUMENT (config_json or out NULL; bad option field, e.g. device type);
 *          DS_ERR_INVALID_HANDLE (opts->comm is not a live communicator);
 *          DS_ERR_COMM / DS_ERR_TIMEOUT (joining the world failed; the config check across ranks);
 *          DS_ERR_ABI_MISMATCH (opts->struct_size < DS_ENGINE_OPTIONS_SIZE_V0; non-zero
 *            reserved0 or non-zero bytes past the known layout);
 *          DS_ERR_INVALID_CONFIG (JSON syntax error with line and column; unknown, duplicate,
 *            mistyped or out-of-range key, named by its dotted path; inconsistent batch sizes;
 *            ranks given different configs: the first differing keys with each rank's value);
 *          DS_ERR_UNSUPPORTED (a DeepSpeed key or value this library does not implement, named;
 *            a device or communicator this build lacks; on cuda:N: ZeRO stage 3, ZeRO-Offload
 *            at stage 0, a device-resident engine with several ranks or a stream, an NCCL
 *            communicator);
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
 *              on cuda:N: a contiguous, element-aligned tensor in that GPU's memory;
 *              ZeRO-Offload reads it after the work queued on the engine's stream
 *              (ds_engine_set_stream) and accumulates it on the host, returning when it
 *              has been read; a device-resident engine accumulates it on the device
 *              (legacy default stream).
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
 *    out_grad (fp32, CPU, the output's shape) after a forward without targets:
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
 *          (the all-gather failed); DS_ERR_OUT_OF_MEMORY. */
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
/** The CUDA stream a ZeRO-Offload engine on cuda:N (options.device) orders
 *  its copies on: a cudaStream_t as void*, NULL for the legacy default
 *  stream; the same as options.cuda_stream at creation. The engine reads a
 *  gradient handed to ds_engine_accumulate_grad after the work already
 *  queued on this stream, and the weights of ds_engine_param_view are updated
 *  before ds_step returns. The stream must stay valid while the engine uses
 *  it. A device-resident engine takes only NULL for now. Local.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE;
 *          DS_ERR_INVALID_STATE (the engine trains on the CPU: it has no stream);
 *          DS_ERR_UNSUPPORTED (a non-NULL stream for a device-resident engine). */
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


/* ------------------------------------------------------------------------ */
/* Communicators (ds_comm_*)                                                */
/* ------------------------------------------------------------------------ */
/*
 * A communicator is the group of ranks (one process per device) that train
 * together; an engine joins one through ds_engine_options_t.comm. Backends:
 *   local  a world of one (collectives are copies; no MPI needed);
 *   mpi    Open MPI, host memory; 16-bit sums/averages are reduced in fp32
 *          and rounded once to nearest-even (exact for integer-valued data);
 *   nccl   one rank per GPU, device memory, bootstrapped over MPI (the
 *          ncclUniqueId is broadcast on the MPI communicator).
 * No hangs: every collective has a timeout (timeout_ms). A watchdog thread
 * turns an expired collective into DS_ERR_TIMEOUT on every live rank and
 * breaks the communicator; from then on its collectives fail with
 * DS_ERR_COMM naming the first failure. ds_comm_abort breaks it on purpose.
 * MPI needs MPI_THREAD_MULTIPLE (the watchdog thread calls MPI).
 */

#define DS_COMM_BACKEND_AUTO  0  /* mpi when started by mpirun/srun, else local */
#define DS_COMM_BACKEND_LOCAL 1  /* a world of one */
#define DS_COMM_BACKEND_MPI   2
#define DS_COMM_BACKEND_NCCL  3

/** Communicator options. Fill with ds_comm_options_init(&o, sizeof o). */
typedef struct ds_comm_options {
    size_t struct_size;  /* sizeof(ds_comm_options_t) as the caller knows it */
    int32_t timeout_ms;  /* deadline of every collective, > 0; DS_UNSET_I32: the environment
                            variable DS_COMM_TIMEOUT_MS, else 1800000 (30 minutes, as
                            DeepSpeed's init_distributed) */
    int32_t debug;       /* 1: stamp each collective with a sequence number and a fingerprint
                            (op, dtype, count, root) checked across ranks, so ranks calling
                            different collectives fail with DS_ERR_COMM naming the first
                            mismatch; 0: off; DS_UNSET_I32: DS_COMM_DEBUG, else 0 */
    int32_t backend;     /* DS_COMM_BACKEND_*; default DS_COMM_BACKEND_AUTO */
    int32_t device;      /* nccl: CUDA ordinal of this rank's GPU; DS_UNSET_I32: the node-local
                            rank modulo the number of visible devices */
} ds_comm_options_t;

/** Frozen size of the first released ds_comm_options_t. */
#define DS_COMM_OPTIONS_SIZE_V0 24

/** Fill `o` with defaults: timeout_ms, debug and device DS_UNSET_I32, backend
 *  DS_COMM_BACKEND_AUTO. Writes min(struct_size, known) bytes, zeroes the
 *  rest up to struct_size (at most 65536) and stores struct_size in o->struct_size. NULL `o` or a struct_size
 *  smaller than sizeof(size_t) does nothing. Thread-safe. */
DS_API void ds_comm_options_init(ds_comm_options_t* o, size_t struct_size);

/** The world this process was started in. Under mpirun/srun (detected from
 *  OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_SIZE, PMI_RANK, SLURM_PROCID or
 *  MV2_COMM_WORLD_SIZE) it is MPI_COMM_WORLD, and the call is collective over
 *  it; MPI is initialised (MPI_THREAD_MULTIPLE) if the host has not, and then
 *  the last ds_comm_finalize calls MPI_Finalize; without one, process exit
 *  does, once no communicator is left (destroyed), and only when the exit
 *  status is 0: a failing rank (exit(1), an uncaught Python exception) leaves
 *  MPI unfinalised, so its launcher ends the job instead of the rank waiting
 *  in MPI_Finalize for peers blocked in a collective. Otherwise a world of one
 *  (local backend; mpi or nccl when asked for).
 *  @param opts [in, nullable] NULL: defaults.
 *  @param out  [out] the new communicator; NULL on failure.
 *  @return DS_OK;
 *          DS_ERR_INVALID_ARGUMENT (out NULL; timeout_ms <= 0; debug not 0/1; unknown backend;
 *            device < 0 or beyond the visible GPUs; a malformed DS_COMM_TIMEOUT_MS or
 *            DS_COMM_DEBUG; backend LOCAL while the launcher started several ranks);
 *          DS_ERR_ABI_MISMATCH (opts->struct_size < DS_COMM_OPTIONS_SIZE_V0, or non-zero
 *            bytes past the known layout);
 *          DS_ERR_UNSUPPORTED (backend MPI or NCCL, or a launch with several ranks, in a build
 *            without MPI or CUDA; MPI initialised by the host below MPI_THREAD_MULTIPLE);
 *          DS_ERR_INVALID_STATE (MPI was already finalized in this process);
 *          DS_ERR_DEVICE (nccl: no usable CUDA device, or a CUDA error);
 *          DS_ERR_COMM (MPI or NCCL could not be set up);
 *          DS_ERR_TIMEOUT (nccl: the bootstrap broadcast expired);
 *          DS_ERR_OUT_OF_MEMORY. */
DS_API ds_status_t ds_comm_create_world(const ds_comm_options_t* opts, ds_comm_t** out);

/** A communicator over the host's MPI communicator (duplicated; the host's
 *  own is never used or freed). Collective over it. The host must have
 *  initialised MPI with MPI_THREAD_MULTIPLE and keeps the job of MPI_Finalize.
 *  @param mpi_comm_f MPI_Comm_c2f() of the host's intra-communicator.
 *  @param opts [in, nullable] NULL: defaults; backend AUTO and MPI give mpi,
 *              NCCL gives nccl bootstrapped over it.
 *  @param out  [out] the new communicator; NULL on failure.
 *  @return DS_OK;
 *          DS_ERR_INVALID_ARGUMENT (out NULL; a bad option as in ds_comm_create_world;
 *            mpi_comm_f is not a live intra-communicator; backend LOCAL);
 *          DS_ERR_ABI_MISMATCH (opts->struct_size < DS_COMM_OPTIONS_SIZE_V0, or non-zero
 *            bytes past the known layout);
 *          DS_ERR_UNSUPPORTED (a build without MPI, or without CUDA for nccl; MPI initialised
 *            below MPI_THREAD_MULTIPLE);
 *          DS_ERR_INVALID_STATE (MPI is not initialised, or was finalized);
 *          DS_ERR_DEVICE (nccl: no usable CUDA device, or a CUDA error);
 *          DS_ERR_COMM (MPI or NCCL could not be set up);
 *          DS_ERR_TIMEOUT (nccl: the bootstrap broadcast expired);
 *          DS_ERR_OUT_OF_MEMORY. */
DS_API ds_status_t ds_comm_create_mpi(int32_t mpi_comm_f, const ds_comm_options_t* opts,
                                      ds_comm_t** out);

/** A split color that joins no new communicator (MPI_UNDEFINED); every
 *  negative color means the same. */
#define DS_COMM_SPLIT_UNDEFINED (-1)

/** = MPI_Comm_split: a sub-communicator of `comm`. Collective over `comm`
 *  (every rank calls it, in the same order as its other collectives). Ranks
 *  passing the same color >= 0 form one new communicator, in which they are
 *  ranked by `key`, ties broken by their rank in `comm`; a negative color
 *  (DS_COMM_SPLIT_UNDEFINED) joins none: DS_OK with *out = NULL. The new
 *  communicator has the backend and options of `comm`, its own timeouts,
 *  failures (breaking one does not break the other) and ds_comm_finalize, and
 *  works with every ds_comm_* function and as ds_engine_options_t.comm. It
 *  must be destroyed (and finalized, for MPI) like any communicator; MPI is
 *  finalized by the last of them. Backends: local (a world of one: color >= 0
 *  gives a new world of one); mpi (the colors and keys travel through a timed
 *  all-gather, then MPI_Comm_split); nccl (the MPI bootstrap communicator is
 *  split, then each part gets its own NCCL communicator on the same devices).
 *  @param out [out] the new communicator, or NULL (undefined color, or failure).
 *  @return DS_OK; DS_ERR_INVALID_HANDLE (comm NULL or not live);
 *          DS_ERR_INVALID_ARGUMENT (out NULL);
 *          DS_ERR_INVALID_STATE (comm was finalized);
 *          DS_ERR_COMM (comm is broken or was aborted: the message names the first failure;
 *            an MPI or NCCL error);
 *          DS_ERR_TIMEOUT (a rank did not take part in time; comm is now broken);
 *          DS_ERR_DEVICE (nccl: a CUDA error); DS_ERR_OUT_OF_MEMORY. */
DS_API ds_status_t ds_comm_split(const ds_comm_t* comm, int32_t color, int32_t key, ds_comm_t** out);

/* Collectives on whole tensors, with deepspeed.comm's (torch.distributed's)
 * names and rules, for hosts that run their own layers: a pipeline's
 * ReduceTiedGrads over a tie group, an MoE layer's token all-to-all over an
 * expert group, any reduction over a ds_topology_comm axis. Each is collective
 * over `comm` (every rank calls it with the same dtype and counts), blocking,
 * timed by the communicator's timeout_ms (a rank that never joins is
 * DS_ERR_TIMEOUT and breaks the communicator, as for any collective).
 * Tensors: contiguous, of the library's dtypes (fp32, fp16, bf16, int8,
 * uint8, int32, int64; op avg: the floating ones), in the communicator's
 * memory: host memory (kDLCPU) for the local and MPI backends (fp16 and bf16
 * reduce in fp32 and round once); for NCCL, device memory on the
 * communicator's GPU ({kDLCUDA, its device}; NCCL sums fp16/bf16 in the
 * 16-bit type). NCCL runs the collective on the communicator's own stream,
 * created blocking, so it follows the caller's work on the legacy default
 * stream; synchronize work queued on a non-blocking stream first. The call
 * returns when the collective is complete.
 * Every call returns DS_OK; DS_ERR_INVALID_HANDLE (comm); DS_ERR_INVALID_ARGUMENT
 * (a tensor NULL, invalid, not contiguous or not in the communicator's
 * memory; dtypes or element counts that break the call's rule; an unknown op
 * or root: each named); DS_ERR_INVALID_STATE (finalized); DS_ERR_COMM
 * (broken, MPI or NCCL failed); DS_ERR_TIMEOUT; DS_ERR_DEVICE (nccl: a CUDA
 * error). */
#define DS_REDUCE_SUM 0 /* dist.ReduceOp.SUM */
#define DS_REDUCE_AVG 1 /* dist.ReduceOp.AVG: the sum divided by the rank count */
#define DS_REDUCE_MAX 2 /* dist.ReduceOp.MAX */

/** all_reduce(tensor, op): in place, every rank's tensor becomes the reduction of all of them. */
DS_API ds_status_t ds_comm_all_reduce(const ds_comm_t* comm, DLTensor* tensor, int32_t op);
/** all_gather_into_tensor(output, input): output (the rank count x input's element count, input's
 *  dtype, any shape) gets every rank's input in rank order. */
DS_API ds_status_t ds_comm_all_gather_into_tensor(const ds_comm_t* comm, DLTensor* output, const DLTensor* input);
/** reduce_scatter_tensor(output, input, op): input holds the rank count x output's element count;
 *  block r of it, reduced over the ranks, lands in rank r's output. */
DS_API ds_status_t ds_comm_reduce_scatter_tensor(const ds_comm_t* comm, DLTensor* output, const DLTensor* input,
                                                 int32_t op);
/** all_to_all_single(output, input) with equal splits: input and output have the same dtype and
 *  element count, a multiple of the rank count, and do not overlap; block j of input goes to
 *  rank j, block i of output comes from rank i. */
DS_API ds_status_t ds_comm_all_to_all_single(const ds_comm_t* comm, DLTensor* output, const DLTensor* input);
/** broadcast(tensor, src): every rank's tensor becomes rank src's. */
DS_API ds_status_t ds_comm_broadcast(const ds_comm_t* comm, DLTensor* tensor, int32_t src);
/** barrier(): returns when every rank of comm has entered it (timed like the collectives). */
DS_API ds_status_t ds_comm_barrier(const ds_comm_t* comm);

/** This process's rank in the communicator (also after ds_comm_finalize).
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out NULL). */
DS_API ds_status_t ds_comm_rank(const ds_comm_t* comm, int32_t* out);

/** The number of ranks in the communicator (also after ds_comm_finalize).
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out NULL). */
DS_API ds_status_t ds_comm_size(const ds_comm_t* comm, int32_t* out);

/** The backend in use: DS_COMM_BACKEND_LOCAL, _MPI or _NCCL (never AUTO).
 *  @return DS_OK; DS_ERR_INVALID_HANDLE; DS_ERR_INVALID_ARGUMENT (out NULL). */
DS_API ds_status_t ds_comm_backend(const ds_comm_t* comm, int32_t* out);

/** Collective teardown: a barrier (under the timeout), then the backend's
 *  collective cleanup, and MPI_Finalize when the library initialised MPI and
 *  this was its last MPI communicator. The handle stays valid for
 *  ds_comm_rank/size/backend and must still be destroyed; any other use of
 *  the communicator (e.g. by an engine) fails with DS_ERR_INVALID_STATE.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE;
 *          DS_ERR_INVALID_STATE (already finalized);
 *          DS_ERR_COMM (the communicator is broken: it was released locally, MPI was not
 *            finalized; the message names the first failure);
 *          DS_ERR_TIMEOUT (the closing barrier expired; the communicator is now broken);
 *          DS_ERR_DEVICE (nccl: a CUDA error during the teardown). */
DS_API ds_status_t ds_comm_finalize(ds_comm_t* comm);

/** Break the communicator: collectives in flight on it (on any thread) and
 *  all later ones fail with DS_ERR_COMM naming `reason`, and with mpi/nccl
 *  its peers are told, so theirs fail too. Callable from ANY thread, also
 *  while another thread is blocked in a collective on this communicator.
 *  Idempotent (the first failure stays the one reported); never kills the
 *  process. Afterwards ds_comm_finalize returns DS_ERR_COMM.
 *  @param reason [in, nullable] text for the messages.
 *  @return DS_OK; DS_ERR_INVALID_HANDLE. */
DS_API ds_status_t ds_comm_abort(ds_comm_t* comm, const char* reason);

/** Release the handle. NULL (or an already destroyed handle) is harmless.
 *  Local: never collective, never waits on peers, cannot fail. An engine
 *  created with this communicator keeps it alive until the engine is
 *  destroyed, so the order of destruction is free. Destroying without
 *  ds_comm_finalize leaves MPI initialised (a process under mpirun must still
 *  finalize, through ds_comm_finalize or MPI_Finalize, before it exits). */
DS_API void ds_comm_destroy(ds_comm_t* comm);

/* ------------------------------------------------------------------------ */
/* Process topologies (ds_topology_*)                                       */
/* ------------------------------------------------------------------------ */
/*
 * = DeepSpeed's ProcessTopology (deepspeed/runtime/pipe/topology.py): named
 * axes ("pipe", "data", "model", "expert", ...) with sizes over the ranks of
 * a world. Ranks enumerate the coordinates in row-major order, the last axis
 * varying fastest: rank = sum_i coord_i * prod_{j>i} dims_j. Coordinates are
 * passed in the axis order of the topology. A topology is plain data: every
 * function is thread-safe, none communicates except ds_topology_comm and
 * ds_topology_group_comm.
 */
typedef struct ds_topology ds_topology_t;

/** ProcessTopology(axes, dims).
 *  @param axes [in] num_axes distinct, non-empty names (copied).
 *  @param dims [in] num_axes sizes, each >= 1; their product (the world size) <= 2^31-1.
 *  @return DS_OK; DS_ERR_INVALID_ARGUMENT (NULL arguments, num_axes < 1, an empty or
 *          repeated name, a size < 1, too many ranks: the message names which);
 *          DS_ERR_OUT_OF_MEMORY. */
DS_API ds_status_t ds_topology_create(const char* const* axes, const int32_t* dims, int32_t num_axes,
                                      ds_topology_t** out);
/** PipeDataParallelTopology(num_pp, num_dp): axes pipe, data (rank = pipe*dp + data). */
DS_API ds_status_t ds_topology_create_pipe_data(int32_t num_pp, int32_t num_dp, ds_topology_t** out);
/** PipeModelDataParallelTopology(num_pp, num_mp, num_dp): axes pipe, data, model with
 *  dims [pp, dp, mp] (rank = pipe*dp*mp + data*mp + model: tensor-parallel ranks adjacent). */
DS_API ds_status_t ds_topology_create_pipe_model_data(int32_t num_pp, int32_t num_mp, int32_t num_dp,
                                                      ds_topology_t** out);
/** PipelineParallelGrid's default without a topology: the prime factors of world_size in
 *  ascending order dealt alternately to pipe and data (8 -> pipe 4, data 2; 12 -> pipe 6, data 2). */
DS_API ds_status_t ds_topology_create_default(int32_t world_size, ds_topology_t** out);
/** Release. NULL or an already destroyed handle is harmless. */
DS_API void ds_topology_destroy(ds_topology_t* topology);

/** The number of ranks (the product of the sizes). */
DS_API ds_status_t ds_topology_world_size(const ds_topology_t* topology, int32_t* out);
/** The number of axes. */
DS_API ds_status_t ds_topology_num_axes(const ds_topology_t* topology, int32_t* out);
/** Axis `index` (in [0, num_axes)): its name (owned by the topology, valid until it is
 *  destroyed) and size. name or dim may be NULL. */
DS_API ds_status_t ds_topology_axis(const ds_topology_t* topology, int32_t index, const char** name,
                                    int32_t* dim);
/** get_dim: the size of the named axis, 0 when the topology has no such axis. */
DS_API ds_status_t ds_topology_dim(const ds_topology_t* topology, const char* axis, int32_t* out);
/** get_rank: the rank at `coords` (num_coords == num_axes values, in axis order, each in
 *  [0, size)). DS_ERR_INVALID_ARGUMENT names the axis out of range. */
DS_API ds_status_t ds_topology_rank_of(const ds_topology_t* topology, const int32_t* coords,
                                       int32_t num_coords, int32_t* out);
/** get_coord: the coordinates of `rank` in axis order into coords[0..num_axes).
 *  @param capacity elements coords can hold (>= num_axes). */
DS_API ds_status_t ds_topology_coord_of(const ds_topology_t* topology, int32_t rank, int32_t* coords,
                                        int32_t capacity);
/** get_axis_comm_lists(axis): one list per combination of the other axes (row-major), each
 *  the ranks varying along `axis` in increasing coordinate, written consecutively:
 *  list i is ranks[i*list_len .. (i+1)*list_len). Every rank appears once, so
 *  num_lists * list_len == world size. An axis the topology lacks gives no lists (0, 0), as
 *  DeepSpeed's returns [].
 *  @param ranks    [out, nullable] NULL with capacity 0 only reports the sizes.
 *  @param capacity elements ranks can hold; smaller than needed: DS_ERR_INVALID_ARGUMENT
 *                  naming the size needed (num_lists and list_len are still set). */
DS_API ds_status_t ds_topology_axis_comm_lists(const ds_topology_t* topology, const char* axis,
                                               int32_t* ranks, int64_t capacity, int32_t* num_lists,
                                               int32_t* list_len);
/** filter_match(axes[i]=coords[i], ...): the ranks (increasing) matching every criterion;
 *  num_criteria 0 matches every rank. An unknown axis is DS_ERR_INVALID_ARGUMENT.
 *  (get_axis_list(axis, idx) is filter_match with one criterion.)
 *  @param ranks [out, nullable] capacity elements; NULL with capacity 0 only sets *count;
 *               too small: DS_ERR_INVALID_ARGUMENT (*count is still set). */
DS_API ds_status_t ds_topology_filter_match(const ds_topology_t* topology, const char* const* axes,
                                            const int32_t* coords, int32_t num_criteria, int32_t* ranks,
                                            int64_t capacity, int32_t* count);
/** get_rank_repr(rank, omit_axes): "<axis>_<coord, 2 digits>" for each axis not omitted,
 *  joined by '-' ("model_01"; "" when every axis is omitted), NUL-terminated into buf.
 *  @param omit_axes [in, nullable] NULL: DeepSpeed's default, {"data", "pipe"}.
 *  @param needed    [out, nullable] the string's size including the NUL.
 *  @return DS_OK; DS_ERR_INVALID_ARGUMENT (rank out of range; buf NULL or size too small,
 *          naming the size needed). */
DS_API ds_status_t ds_topology_rank_repr(const ds_topology_t* topology, int32_t rank,
                                         const char* const* omit_axes, int32_t num_omit, char* buf,
                                         size_t size, size_t* needed);
/** This rank's communicator along `axis`: a ds_comm_split of `world` whose members are the
 *  ranks of this rank's list in ds_topology_axis_comm_lists(axis), ranked in that order
 *  (so the new rank is this rank's coordinate on the axis). Collective over `world`: every
 *  rank calls it, with the same axis. world's size must equal the topology's world size
 *  (its rank r is topology rank r).
 *  @return DS_OK; DS_ERR_INVALID_HANDLE (topology or world); DS_ERR_INVALID_ARGUMENT (out
 *          or axis NULL, an axis the topology lacks, world size differs: each named);
 *          and ds_comm_split's statuses. */
DS_API ds_status_t ds_topology_comm(const ds_topology_t* topology, const ds_comm_t* world,
                                    const char* axis, ds_comm_t** out);
/** As ds_topology_comm for several axes: the ranks that share this rank's coordinates on
 *  every axis NOT listed, in increasing rank order. E.g. {"pipe", "model"} is DeepSpeed's
 *  model-parallel group (same data coordinate); all axes give the whole world; none gives a
 *  communicator of one rank. */
DS_API ds_status_t ds_topology_group_comm(const ds_topology_t* topology, const ds_comm_t* world,
                                          const char* const* axes, int32_t num_axes, ds_comm_t** out);

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
 *  several ranks, like ds_engine_create + ds_engine_init.
 *  @return as ds_engine_create and ds_engine_init, plus DS_ERR_INVALID_HANDLE
 *          (model NULL or destroyed); DS_ERR_INVALID_STATE (the model is in
 *          use by another engine, or a ZeRO-3 engine released its values);
 *          DS_ERR_UNSUPPORTED (options.device cuda:N: the built-in layers run on
 *          the CPU only in this version). */
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
 *  alignment are accepted. A training forward draws the next dropout masks
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

#endif /* DEEPSPEED_C_H */
