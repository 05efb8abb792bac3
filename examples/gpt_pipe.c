/* gpt_pipe.c — see gpt_pipe.h. */
#include "gpt_pipe.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Message tags of the transfer: per parameter a header {name length,
 * element count} ({0, 0} ends a stage's list), the name, the values. */
enum { kTagHeader = 1, kTagName = 2, kTagValues = 3, kMaxName = 512 };

static int lib_failed(ds_status_t s, const char* call, char* err, size_t n) {
    snprintf(err, n, "%s failed: %s\n  %s", call, ds_status_string(s), ds_last_error());
    return -1;
}
#define TRY(call)                                                   \
    do {                                                            \
        ds_status_t s_ = (call);                                    \
        if (s_ != DS_OK) return lib_failed(s_, #call, err, err_len); \
    } while (0)

static DLTensor host_tensor(void* data, int64_t* shape, int32_t ndim, uint8_t code, uint8_t bits) {
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.device.device_type = kDLCPU;
    t.ndim = ndim;
    t.dtype.code = code;
    t.dtype.bits = bits;
    t.dtype.lanes = 1;
    t.shape = shape;
    return t;
}

/* Write `values` (numel fp32) into the whole engine's parameter `name` and
 * mark it set; the shapes must agree. */
static int put(ds_engine_t* whole, const char* name, int64_t numel, float* values, int* set, char* err,
               size_t err_len) {
    int64_t count = 0, i;
    TRY(ds_engine_num_params(whole, &count));
    for (i = 0; i < count; ++i) {
        ds_param_info_t info;
        DLTensor t;
        info.struct_size = sizeof info;
        TRY(ds_engine_param_info(whole, i, &info));
        if (strcmp(info.name, name) != 0) continue;
        if (info.numel != numel) {
            snprintf(err, err_len, "gathering the pipeline's weights: %s has %lld elements on its stage, %lld in "
                     "the whole model", name, (long long)numel, (long long)info.numel);
            return -1;
        }
        t = host_tensor(values, (int64_t*)info.shape, info.ndim, kDLFloat, 32);
        TRY(ds_engine_set_full_fp32_param(whole, name, &t));
        set[i] = 1;
        return 0;
    }
    snprintf(err, err_len, "gathering the pipeline's weights: a stage holds %s, the whole model has no such "
             "parameter", name);
    return -1;
}

/* A sharded MoE layer's expert parameter (...deepspeed_experts.<global j>...):
 * each rank of an expert group holds its own. */
static int is_expert(const char* name) { return strstr(name, ".deepspeed_experts.") != NULL; }

/* This rank's stage parameters, read in order (every replica, the read being
 * collective under ZeRO-1); rank 0 writes them into *whole, replica 0 of a
 * later stage sends them to rank 0, and replicas 1..ep_size-1 of every stage
 * their experts, each list closing with an empty header. */
static int share_stage(ds_engine_t* stage, ds_comm_t* world, int rank, int stage_id, int replica, int ep_size,
                       ds_engine_t* whole, int* set, char* err, size_t err_len) {
    int64_t count = 0, i;
    int64_t header[2] = {0, 0}, header_shape[1] = {2};
    DLTensor h = host_tensor(header, header_shape, 1, kDLInt, 64);
    TRY(ds_engine_num_params(stage, &count));
    for (i = 0; i < count; ++i) {
        ds_param_info_t info;
        float* values;
        DLTensor t;
        int rc = 0;
        info.struct_size = sizeof info;
        TRY(ds_engine_param_info(stage, i, &info));
        if (stage_id != 0 && strcmp(info.name, "wte.weight") == 0) continue; /* the first stage's copy is taken */
        values = (float*)malloc((size_t)info.numel * sizeof *values);
        if (!values) {
            snprintf(err, err_len, "out of memory for %s", info.name);
            return -1;
        }
        t = host_tensor(values, (int64_t*)info.shape, info.ndim, kDLFloat, 32);
        {
            ds_status_t s = ds_engine_get_full_fp32_param(stage, info.name, &t);
            if (s != DS_OK) rc = lib_failed(s, "ds_engine_get_full_fp32_param", err, err_len);
        }
        if (rc == 0 && rank == 0) {
            rc = put(whole, info.name, info.numel, values, set, err, err_len);
        } else if (rc == 0 && (replica == 0 || (replica < ep_size && is_expert(info.name)))) {
            int64_t name_shape[1], value_shape[1] = {info.numel};
            DLTensor name_t, value_t;
            ds_status_t s;
            header[0] = (int64_t)strlen(info.name);
            header[1] = info.numel;
            name_shape[0] = header[0];
            name_t = host_tensor((void*)info.name, name_shape, 1, kDLUInt, 8);
            value_t = host_tensor(values, value_shape, 1, kDLFloat, 32);
            if ((s = ds_pipe_send(world, &h, 0, kTagHeader)) != DS_OK ||
                (s = ds_pipe_send(world, &name_t, 0, kTagName)) != DS_OK ||
                (s = ds_pipe_send(world, &value_t, 0, kTagValues)) != DS_OK)
                rc = lib_failed(s, "ds_pipe_send (a stage's weights to rank 0)", err, err_len);
        }
        free(values);
        if (rc != 0) return rc;
    }
    if (rank != 0 && replica < ep_size) {
        header[0] = header[1] = 0;
        TRY(ds_pipe_send(world, &h, 0, kTagHeader));
    }
    return 0;
}

/* Rank 0: the parameters stage `stage_id` (from its replica at world rank
 * `src`) sends, into *whole. */
static int receive_stage(ds_comm_t* world, int src, int stage_id, ds_engine_t* whole, int* set, char* err,
                         size_t err_len) {
    int64_t header[2], header_shape[1] = {2};
    DLTensor h = host_tensor(header, header_shape, 1, kDLInt, 64);
    char name[kMaxName + 1];
    for (;;) {
        int64_t name_shape[1], value_shape[1];
        DLTensor name_t, value_t;
        float* values;
        int rc;
        TRY(ds_pipe_recv(world, &h, src, kTagHeader));
        if (header[0] == 0) return 0;
        if (header[0] < 0 || header[0] > kMaxName || header[1] < 1) {
            snprintf(err, err_len, "gathering the pipeline's weights: stage %d sent a malformed header {%lld, %lld}",
                     stage_id, (long long)header[0], (long long)header[1]);
            return -1;
        }
        name_shape[0] = header[0];
        name_t = host_tensor(name, name_shape, 1, kDLUInt, 8);
        TRY(ds_pipe_recv(world, &name_t, src, kTagName));
        name[header[0]] = '\0';
        values = (float*)malloc((size_t)header[1] * sizeof *values);
        if (!values) {
            snprintf(err, err_len, "out of memory for %s", name);
            return -1;
        }
        value_shape[0] = header[1];
        value_t = host_tensor(values, value_shape, 1, kDLFloat, 32);
        {
            ds_status_t s = ds_pipe_recv(world, &value_t, src, kTagValues);
            rc = s == DS_OK ? put(whole, name, header[1], values, set, err, err_len)
                            : lib_failed(s, "ds_pipe_recv (a stage's weights on rank 0)", err, err_len);
        }
        free(values);
        if (rc != 0) return rc;
    }
}

int gpt_pipe_gather_whole(ds_engine_t* stage, ds_comm_t* world, int ep_size, const char* whole_spec,
                          const char* whole_config, const ds_engine_options_t* options, ds_comm_t** solo,
                          ds_engine_t** whole, char* err, size_t err_len) {
    ds_pipe_info_t pi;
    int32_t rank32 = 0;
    int rank, replica, s, x, rc = 0;
    int* set = NULL;
    int64_t count = 0, i;
    *solo = NULL;
    *whole = NULL;
    pi.struct_size = sizeof pi;
    TRY(ds_engine_pipe_info(stage, &pi));
    TRY(ds_comm_rank(world, &rank32));
    rank = (int)rank32;
    replica = rank % pi.data_parallel_size; /* rank = stage * replicas + replica */
    TRY(ds_comm_split(world, rank == 0 ? 0 : DS_COMM_SPLIT_UNDEFINED, 0, solo));
    if (rank == 0) {
        ds_model_t* model = NULL;
        ds_engine_options_t o = *options;
        o.comm = *solo;
        TRY(ds_model_create(whole_spec, &model));
        {
            ds_status_t st = ds_engine_create_with_model(whole_config, model, &o, whole);
            ds_model_destroy(model); /* the engine keeps it */
            if (st != DS_OK) return lib_failed(st, "ds_engine_create_with_model (the whole model on rank 0)", err,
                                               err_len);
        }
        TRY(ds_engine_num_params(*whole, &count));
        set = (int*)calloc((size_t)count + 1, sizeof *set);
        if (!set) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
    }
    /* Every rank, then rank 0 stage after stage: a stage's sends wait for
     * rank 0 to reach them (ds_pipe_send blocks until the receive). */
    rc = share_stage(stage, world, rank, pi.stage_id, replica, ep_size, *whole, set, err, err_len);
    for (s = 0; rc == 0 && rank == 0 && s < pi.num_stages; ++s)
        for (x = s == 0 ? 1 : 0; rc == 0 && x < ep_size; ++x) /* replica x: its experts (x = 0: everything) */
            rc = receive_stage(world, s * pi.data_parallel_size + x, s, *whole, set, err, err_len);
    for (i = 0; rc == 0 && rank == 0 && i < count; ++i) {
        ds_param_info_t info;
        info.struct_size = sizeof info;
        if (set[i]) continue;
        if (ds_engine_param_info(*whole, i, &info) != DS_OK) info.name = "(unnamed)";
        snprintf(err, err_len, "gathering the pipeline's weights: no stage sent %s", info.name);
        rc = -1;
    }
    free(set);
    return rc;
}
