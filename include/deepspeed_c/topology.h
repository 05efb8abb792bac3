/*
 * deepspeed_c/topology.h — part of the public C ABI of deepspeed_c.
 * Process topologies (ds_topology_*): DeepSpeed's ProcessTopology, named
 * axes over the ranks of a world, and the communicators of its groups.
 * Include <deepspeed_c.h>; its Conventions comment applies here.
 */
#ifndef DEEPSPEED_C_TOPOLOGY_H
#define DEEPSPEED_C_TOPOLOGY_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DEEPSPEED_C_TOPOLOGY_H */
