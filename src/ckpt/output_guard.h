// Checks before a tool or call writes a file that may sit among checkpoint
// files (ds_save_16bit_model, ds-to-fp32), so that it cannot destroy a
// checkpoint or replace something that is not a regular file.
#pragma once

#include <string>

namespace ds::ckpt {

// `name` is the file to be created (by rename) in directory `dir`; `what`
// names the argument in messages. DS_ERR_INVALID_ARGUMENT when:
//   - name is empty, ".", "..", contains '/' or a control character, or
//     is longer than 255 bytes;
//   - name is reserved: "latest" or "latest.<anything>", "manifest.json",
//     or a temporary of the commit protocol ("*.tmp-<16 hex>", "*.old-<16
//     hex>": cleanup would remove it);
//   - dir is a checkpoint tag directory (holds manifest.json) and name is
//     one of its data file names (model.safetensors, optim_rank<R>.safetensors);
//   - <dir>/<name> exists and is not a regular file (a directory, FIFO,
//     device, socket: renaming over it would replace it).
void check_output_file(const std::string& dir, const std::string& name, const char* what);
// The checks of check_output_file that need no file system (the name alone).
void check_output_name(const std::string& name, const char* what);

// True when `a` and `b` name the same existing file or directory (same
// device and inode, following symbolic links).
bool same_file(const std::string& a, const std::string& b);

// The directory part of `path` ("." when none) and the last component.
std::string parent_dir(const std::string& path);
std::string base_name(const std::string& path);

}  // namespace ds::ckpt
