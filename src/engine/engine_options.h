// Host-process facts the engine is created with (the C options struct,
// translated by src/api).
#pragma once

#include <cstdint>

#include "deepspeed_c.h"

namespace ds {

struct EngineOptions {
    int32_t device_type = kDLCPU;  // DLDeviceType
    int32_t device_index = 0;
    void* cuda_stream = nullptr;  // cudaStream_t of an engine on cuda:N; null: the legacy default stream
    ds_log_fn log_callback = nullptr;
    void* log_user_data = nullptr;
    int32_t log_level = DS_UNSET_I32;
    // The rank the monitors (csv_monitor, tensorboard, ...) see, -1: this
    // engine's. A pipeline stage's or tensor-parallel shard's engine runs on
    // the data axis, so several engines are rank 0 of their communicator;
    // they pass their world rank, and only world rank 0 writes the files.
    int32_t monitor_rank = -1;
    // The data-parallel size the batch keys are checked against and
    // global_samples counts, -1: this engine's world size. An expert-parallel
    // engine runs on its expert-data-parallel group, while DeepSpeed's data
    // parallelism with MoE is the whole world.
    int32_t batch_world_size = -1;
};

}  // namespace ds
