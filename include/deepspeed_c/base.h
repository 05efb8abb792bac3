/*
 * deepspeed_c/base.h — part of the public C ABI of deepspeed_c.
 * What every other part of the C ABI needs: the export macro and the
 * version, the status codes, the library-level functions (status text,
 * last error, build info, ds_convert), logging, and the handle types.
 * Include <deepspeed_c.h>; its Conventions comment applies here.
 */
#ifndef DEEPSPEED_C_BASE_H
#define DEEPSPEED_C_BASE_H

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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DEEPSPEED_C_BASE_H */
