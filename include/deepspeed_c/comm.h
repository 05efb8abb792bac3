/*
 * deepspeed_c/comm.h — part of the public C ABI of deepspeed_c.
 * Communicators (ds_comm_*): backends, creation, splitting, the
 * collectives, abort, finalize and destroy.
 * Include <deepspeed_c.h>; its Conventions comment applies here.
 */
#ifndef DEEPSPEED_C_COMM_H
#define DEEPSPEED_C_COMM_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * after the caller's work queued so far on the legacy default stream (an
 * event orders it); synchronize work queued on a non-blocking stream first.
 * The call returns when the collective is complete.
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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DEEPSPEED_C_COMM_H */
