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

/* The declarations, one header per concept (include/deepspeed_c/), in order. */
#include "deepspeed_c/base.h"
#include "deepspeed_c/engine.h"
#include "deepspeed_c/training.h"
#include "deepspeed_c/comm.h"
#include "deepspeed_c/topology.h"
#include "deepspeed_c/pipe.h"
#include "deepspeed_c/checkpoint.h"
#include "deepspeed_c/zero.h"
#include "deepspeed_c/model.h"

#endif /* DEEPSPEED_C_H */
