// Shared by the MPI tests of the built-in GPT's parallel engines
// (test_pipe_engine, test_tp_engine, test_moe_ep_engine,
// test_moe_combined_engine): one rank's world communicator, model and engine
// made through the C ABI, and a checkpoint round trip through it.
#pragma once

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "comm/mpi_include.h"  // <mpi.h>, C API only
#include "deepspeed_c.h"
#include "mpi_gtest_main.h"     // world_rank(), world_size(); the including test's main()

namespace ds_mpi_test {

// This rank's part of a parallel layout: ds_comm_create_world,
// ds_model_create, ds_engine_create_with_model (the engine takes the layout
// from the spec and config).
struct ModelRank {
    ds_comm_t* world = nullptr;
    ds_model_t* model = nullptr;
    ds_engine_t* engine = nullptr;
    ModelRank() = default;
    ModelRank(const ModelRank&) = delete;
    ModelRank& operator=(const ModelRank&) = delete;
    ~ModelRank() {
        ds_engine_destroy(engine);
        ds_model_destroy(model);
        ds_comm_destroy(world);
    }
    ds_status_t create(const std::string& spec_json, const std::string& config_json) {
        if (ds_comm_create_world(nullptr, &world) != DS_OK) return DS_ERR_COMM;
        if (ds_model_create(spec_json.c_str(), &model) != DS_OK) return DS_ERR_INTERNAL;
        ds_engine_options_t o;
        ds_engine_options_init(&o, sizeof o);
        o.comm = world;
        o.log_level = DS_LOG_WARN;
        return ds_engine_create_with_model(config_json.c_str(), model, &o, &engine);
    }
};

// Checkpoints through the C API on every rank of a sharded layout: save,
// load, 16-bit export (test_parallel_checkpoint.cpp checks the files).
inline void checkpoint_round_trip(ds_engine_t* engine, const char* what) {
    const int rank = world_rank();
    const std::string dir = std::string("/tmp/ds_ckpt_api_") + what + "_" + std::to_string(world_size());
    if (rank == 0) EXPECT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_EQ(ds_save_checkpoint(engine, dir.c_str(), "t", "{\"k\": 1}"), DS_OK) << ds_last_error();
    const char* client = nullptr;
    EXPECT_EQ(ds_load_checkpoint(engine, dir.c_str(), nullptr, 0, &client), DS_OK) << ds_last_error();
    EXPECT_STREQ(client, "{\"k\":1}");
    EXPECT_EQ(ds_save_16bit_model(engine, dir.c_str(), "w.safetensors"), DS_OK) << ds_last_error();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) EXPECT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

}  // namespace ds_mpi_test
