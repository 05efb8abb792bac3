// Reading one checkpoint tag into memory and verifying it before anyone
// uses it: the manifest parses and is consistent, each data file has the
// manifest's size and CRC32C, and its safetensors header is valid and holds
// the tensors the manifest implies with the dtypes and shapes it records.
#pragma once

#include <string>
#include <vector>

#include "ckpt/commit.h"
#include "ckpt/file_io.h"
#include "ckpt/manifest.h"
#include "ckpt/safetensors.h"

namespace ds::ckpt {

// manifest.json of a tag directory: DS_ERR_NOT_FOUND (missing: the
// directory is not a committed checkpoint), DS_ERR_FORMAT, DS_ERR_IO.
Manifest read_manifest(const std::string& tag_dir);

// A verified data file held in memory.
struct LoadedFile {
    std::string path;
    FileBuffer buf;
    StHeader header;

    // The bytes of tensor `key`, which must exist with `dtype` (safetensors
    // name) and `shape`; otherwise DS_ERR_FORMAT naming the file and key.
    const uint8_t* tensor(const std::string& key, const std::string& dtype, const Shape& shape) const;
};

// Reads `name` (listed in the manifest) whole: DS_ERR_NOT_FOUND (missing),
// DS_ERR_FORMAT (size or CRC32C differs from the manifest, bad header).
LoadedFile load_verified(const std::string& tag_dir, const Manifest& m, const std::string& name);

// Checks, without reading data, that the model file's header holds exactly
// the manifest's parameters (working dtype and shape), and that each
// partition file holds "master" and every optimizer state for each of its
// fragments. DS_ERR_FORMAT naming the file and tensor.
void check_model_header(const Manifest& m, const StHeader& h, const std::string& path);
void check_optim_header(const Manifest& m, const RankPartition& r, const StHeader& h, const std::string& path);

}  // namespace ds::ckpt
