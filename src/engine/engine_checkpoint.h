// Checkpoint plumbing: describing the engine as a manifest, writing its
// files, and staging then applying a verified checkpoint, through the
// public state of each component (counters, loss scaler, schedule, and the
// ZeRO strategy's fragments). Used by engine_checkpoint*.cpp only.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <string>
#include <unordered_set>
#include <vector>

#include "ckpt/manifest.h"
#include "ckpt/reader.h"
#include "engine/engine.h"
#include "engine/sharded_save_plan.h"

namespace ds {

// A checkpoint read and verified against this engine, not yet applied.
struct StagedCheckpoint {
    using Frag = zero::SavedFragment;
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
    bool has_stream = false;  // the built-in model's dropout stream (engine_model.h)
    uint64_t stream_seed = 0, stream_forward_index = 0;
    precision::LossScaler scaler = precision::LossScaler::make_static(1.0);  // validated copy
    // A sharded engine: the logical parameter names over its world (what
    // "unexpected" is judged against), and the local selections extracted
    // from the checkpoint's full tensors (stage_selections; Items point here).
    const std::unordered_set<std::string>* logical_names = nullptr;
    std::deque<std::vector<uint8_t>> staging;
};

// Every rank reports whether its part of a collective checkpoint operation
// succeeded; a failure anywhere becomes a failure everywhere (the failing
// rank's own error, or DS_ERR_IO / DS_ERR_FORMAT naming the rank).
void agree_across_ranks(comm::Communicator& comm, const char* call, const Error* local_error);

// Every rank's optimizer file description (partition + file summary), in
// rank order; ranks that wrote none contribute nothing.
std::vector<std::pair<ckpt::RankPartition, ckpt::ManifestFile>> exchange_partitions(
    comm::Communicator& comm, const std::optional<std::pair<ckpt::RankPartition, ckpt::ManifestFile>>& mine);

namespace ckpt_io {

// Writes this rank's optimizer file (when it holds any fragment) into `dir`.
std::optional<std::pair<ckpt::RankPartition, ckpt::ManifestFile>> write_optim_file(Engine& e, const std::string& dir);
// Writes model.safetensors (rank 0) — collective at ZeRO-3, where every
// rank takes part in gathering each parameter.
std::optional<ckpt::ManifestFile> write_model_file(Engine& e, const std::string& dir);
// The whole working weights as safetensors at `path` (rank 0 writes;
// collective at ZeRO-3). `name` labels the returned summary.
// exclude_frozen: parameters added without DS_PARAM_TRAINABLE are left out.
std::optional<ckpt::ManifestFile> write_weights(Engine& e, const std::string& path, const std::string& name,
                                                bool exclude_frozen = false);
// Everything but the tag, the files and the client state.
ckpt::Manifest describe(const Engine& e);
// Reads and verifies everything `flags` asks for; changes nothing.
void stage(Engine& e, StagedCheckpoint& s, uint32_t flags);
// Copies a staged checkpoint into the engine. Fails only where it writes a
// swap file (NVMe offload): ds::Error, with the state partly written (the
// engine then refuses to train until a load succeeds).
void apply(Engine& e, StagedCheckpoint& s);

// ---- sharded engines (Engine::shard_layout; engine_checkpoint_sharded.cpp) ----
// Who sends and writes what (census + plan): collective over the layout's
// world; throws alike on every rank.
std::vector<PlannedParam> plan_sharded(Engine& e, bool with_optimizer);
// The manifest's world size and parameters for the logical model.
void describe_logical(ckpt::Manifest& m, const std::vector<PlannedParam>& plan, int32_t world);
struct ShardedFiles {
    std::optional<ckpt::ManifestFile> model;  // world rank 0
    std::optional<std::pair<ckpt::RankPartition, ckpt::ManifestFile>> optim;
};
// Moves every piece to its writer and writes the files into `dir`
// (collective; a rank's write failure is thrown after it took part in every
// transfer).
ShardedFiles write_sharded_files(Engine& e, const std::vector<PlannedParam>& plan, const std::string& dir);
// The logical working weights as one safetensors file at `path` (world rank 0).
std::optional<ckpt::ManifestFile> write_sharded_weights(Engine& e, const std::vector<PlannedParam>& plan,
                                                        const std::string& path, const std::string& name,
                                                        bool exclude_frozen);
// Every rank's parameter names (collective over the layout's world).
std::unordered_set<std::string> logical_names(Engine& e);
// After stage(): each split parameter's working weights and optimizer
// fragments replaced by this rank's selection of them (staging buffers).
void stage_selections(Engine& e, StagedCheckpoint& s);

}  // namespace ckpt_io

}  // namespace ds
