// manifest.json: the description of one checkpoint tag, written last
// (docs/CHECKPOINTS.md lists every key). It names every data file with its
// size and CRC32C, every parameter with its shape and dtype, the partition
// map (which rank's optimizer file holds which fragment of which
// parameter), the training state that is not tensors, the resolved config
// and the client state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ckpt/loss_scaler_record.h"
#include "core/tensor.h"

namespace ds::ckpt {

constexpr int64_t kManifestFormatVersion = 1;
constexpr const char* kManifestFormatName = "deepspeed_c.checkpoint";
constexpr const char* kManifestFile = "manifest.json";
constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kLatestFile = "latest";
constexpr const char* kManifestSealKey = "manifest_crc32c";
constexpr uint64_t kMaxManifestBytes = uint64_t{1} << 30;

// "optim_rank<R>.safetensors".
std::string optim_file_name(int32_t rank);
// The optimizer-file key of one fragment's tensor: "<param>/<offset>/<what>"
// with <what> "master" or an optimizer state name ("exp_avg", ...).
std::string fragment_key(const std::string& param, int64_t offset, const std::string& what);

struct ManifestFile {
    std::string name;  // relative to the tag directory
    uint64_t size = 0;
    uint32_t crc32c = 0;
};

struct ManifestParam {
    std::string name;
    Shape shape;
    int64_t numel = 0;      // derived from shape
    std::string dtype;      // working dtype, safetensors name
    bool trainable = false;
};

// Elements [offset, offset + numel) of a parameter, flattened row-major.
struct Fragment {
    std::string param;
    int64_t offset = 0;
    int64_t numel = 0;
};

struct RankPartition {
    int32_t rank = 0;
    std::string file;                // optim_rank<R>.safetensors
    std::vector<Fragment> fragments;
};

struct OptimizerRecord {
    std::string type;                       // the optimizer's name, e.g. "AdamW"
    int64_t step = 0;                       // applied optimizer steps (bias-correction t)
    std::vector<std::string> state_names;   // per-fragment state tensors, in order
    std::string state_dtype = "F32";
    double lr = 0.0;                        // param_groups[0]: what the next step uses
    double beta1 = 0.0, beta2 = 0.0;
};

struct SchedulerRecord {
    std::string type;
    int64_t last_batch_iteration = -1;
};

struct Manifest {
    int64_t format_version = kManifestFormatVersion;
    std::string library_version;
    std::string tag;
    int32_t world_size = 1;
    int64_t zero_stage = 0;
    std::string working_dtype = "F32";
    std::string master_dtype = "F32";
    std::string grad_accum_dtype = "F32";
    int64_t global_steps = 0, global_samples = 0, micro_steps = 0, skipped_steps = 0;
    std::optional<OptimizerRecord> optimizer;
    std::optional<SchedulerRecord> scheduler;
    bool loss_scaler_dynamic = false;
    LossScalerRecord loss_scaler{1.0, 0, -1, 1};
    std::vector<std::string> rng_states;  // compact JSON of each random stream's state
    std::vector<ManifestParam> params;
    std::vector<RankPartition> partitions;
    std::vector<ManifestFile> files;
    std::string config_json = "{}";        // the resolved config, compact JSON
    std::string client_state_json = "{}";  // compact JSON

    const ManifestFile* file(const std::string& name) const;
};

// A fragment with the partition (rank file) that holds it.
struct FragmentRef {
    const RankPartition* part;
    const Fragment* frag;
};
// Parameter name -> its fragments across all ranks, sorted by offset.
using FragmentIndex = std::unordered_map<std::string, std::vector<FragmentRef>>;
FragmentIndex index_fragments(const Manifest& m);

std::string manifest_to_json(const Manifest& m);

// Parses and checks `text` (`what` names the file in errors; all failures
// are DS_ERR_FORMAT): the self-checksum (the last key, "manifest_crc32c",
// is the CRC32C of every byte before its opening quote), required keys and
// types, a known format version,
// world size and ranks consistent, every partition file listed in "files",
// and the fragments of each trainable parameter tiling [0, numel) exactly
// (frozen parameters have none).
Manifest parse_manifest(const std::string& text, const std::string& what);

// Compact JSON for `text`, which must be one valid JSON value; otherwise
// DS_ERR_INVALID_ARGUMENT naming `what`.
std::string compact_json(const std::string& text, const char* what);

}  // namespace ds::ckpt
