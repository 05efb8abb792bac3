/* gpt_whole.c — see gpt_whole.h. */
#include "gpt_whole.h"

#include <stdio.h>

static int lib_failed(ds_status_t s, const char* call, char* err, size_t n) {
    snprintf(err, n, "%s failed: %s\n  %s", call, ds_status_string(s), ds_last_error());
    return -1;
}

int gpt_whole_from_checkpoint(ds_comm_t* world, const char* ckpt_dir, const char* whole_spec,
                              const char* whole_config, const ds_engine_options_t* options, ds_comm_t** solo,
                              ds_engine_t** whole, char* err, size_t err_len) {
    int32_t rank = 0;
    ds_status_t s;
    ds_model_t* model = NULL;
    ds_engine_options_t o = *options;
    *solo = NULL;
    *whole = NULL;
    s = ds_comm_rank(world, &rank);
    if (s != DS_OK) return lib_failed(s, "ds_comm_rank", err, err_len);
    s = ds_comm_split(world, rank == 0 ? 0 : DS_COMM_SPLIT_UNDEFINED, 0, solo);
    if (s != DS_OK) return lib_failed(s, "ds_comm_split (rank 0's world of one)", err, err_len);
    if (rank != 0) return 0;
    s = ds_model_create(whole_spec, &model);
    if (s != DS_OK) return lib_failed(s, "ds_model_create (the whole model)", err, err_len);
    o.comm = *solo;
    s = ds_engine_create_with_model(whole_config, model, &o, whole);
    ds_model_destroy(model); /* the engine keeps it */
    if (s != DS_OK) return lib_failed(s, "ds_engine_create_with_model (the whole model on rank 0)", err, err_len);
    s = ds_load_checkpoint(*whole, ckpt_dir, NULL, DS_LOAD_NO_OPTIMIZER_STATES | DS_LOAD_NO_LR_SCHEDULER_STATES, NULL);
    if (s != DS_OK)
        return lib_failed(s, "ds_load_checkpoint (the run's checkpoint into the whole model)", err, err_len);
    return 0;
}
