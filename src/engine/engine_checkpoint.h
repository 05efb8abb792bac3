// Checkpoint plumbing with access to the engine's private state (a friend
// of ds::Engine): describing the engine as a manifest, and staging then
// applying a verified checkpoint. Used by engine_checkpoint*.cpp only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/manifest.h"
#include "ckpt/reader.h"
#include "engine/engine.h"

namespace ds {

// A checkpoint read and verified against this engine, not yet applied.
struct StagedCheckpoint {
    struct Frag {
        int64_t offset = 0;
        int64_t numel = 0;
        const uint8_t* master = nullptr;
        std::vector<const uint8_t*> states;
    };
    struct Item {
        Param* param = nullptr;
        const uint8_t* working = nullptr;  // model.safetensors bytes, working dtype
        std::vector<Frag> frags;           // when optimizer state is loaded for it
    };
    ckpt::ResolvedTag where;
    ckpt::Manifest manifest;
    ckpt::LoadedFile model;
    std::vector<ckpt::LoadedFile> optim;
    std::vector<Item> items;
    std::vector<std::string> missing, unexpected;  // parameter names (non-strict loads)
    bool load_optimizer = false;
    bool load_scheduler = false;
    bool load_counters = false;
    bool master_from_fp32 = false;
    precision::LossScaler scaler = precision::LossScaler::make_static(1.0);  // validated copy
};

// DS_ERR_UNSUPPORTED naming `call` when world_size > 1.
void require_world_of_one(const char* call, int32_t world_size);

class CheckpointAccess {
public:
    // Everything but the tag, the files and the client state.
    static ckpt::Manifest describe(const Engine& e);
    // Writes model.safetensors and this rank's optimizer file into `w`.
    static void write_files(const Engine& e, ckpt::TagWriter& w, ckpt::Manifest& m);
    // Reads and verifies everything `flags` asks for; changes nothing.
    static void stage(Engine& e, StagedCheckpoint& s, uint32_t flags);
    // Copies a staged checkpoint into the engine; cannot fail.
    static void apply(Engine& e, StagedCheckpoint& s) noexcept;
};

}  // namespace ds
