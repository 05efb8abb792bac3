// The checkpoint commit protocol (DESIGN.md §5, docs/CHECKPOINTS.md):
//   1. every file is written into <dir>/<tag>.tmp-<nonce>/ and fsynced;
//   2. manifest.json (sizes + CRC32C of those files) is written and fsynced,
//      then the temporary directory itself;
//   3. the directory is renamed to <dir>/<tag> and <dir> fsynced; an existing
//      <tag> is swapped out atomically (renameat2 RENAME_EXCHANGE) and then
//      removed; where the file system cannot exchange, the old directory is
//      renamed to <tag>.old-<nonce> first;
//   4. <dir>/latest.tmp-<nonce> is written, fsynced and renamed over
//      <dir>/latest, and <dir> fsynced.
// Steps 3-4 and leftover cleanup hold <dir>'s exclusive flock; the
// temporary directory is flocked by its owner (file_lock.h), so concurrent
// saves into one <dir> never remove each other's files.
// A crash at any point leaves `latest` naming a complete checkpoint (or no
// `latest` before the first commit); leftovers (*.tmp-<nonce>, *.old-<nonce>,
// latest.tmp) are ignored by loaders and removed by the next save.
#pragma once

#include <string>
#include <vector>

#include "ckpt/file_io.h"
#include "ckpt/file_lock.h"
#include "ckpt/manifest.h"

namespace ds::ckpt {

// A tag names a directory: 1-234 bytes (kMaxTagBytes) of valid UTF-8, no
// '/' or control character, no leading or trailing space, not "." or "..",
// not "latest"/"latest.tmp", and without the reserved ".tmp-"/".old-"
// infixes. Violations: DS_ERR_INVALID_ARGUMENT naming `what` and the tag.
// Savers and readers apply the same check.
void check_tag(const std::string& tag, const char* what);
// True for names the commit protocol leaves behind when interrupted.
bool is_leftover_name(const std::string& name);

class TagWriter {
public:
    // Creates save_dir if needed (DS_ERR_IO naming it when it cannot),
    // removes leftovers of interrupted saves, and creates the temporary
    // directory.
    TagWriter(std::string save_dir, std::string tag);
    // Without commit(): the temporary directory is removed (best effort).
    ~TagWriter();
    TagWriter(const TagWriter&) = delete;
    TagWriter& operator=(const TagWriter&) = delete;

    // Where to write a file of the checkpoint (inside the temporary directory).
    std::string file_path(const std::string& name) const;
    // The temporary directory (other ranks write their files into it).
    const std::string& tmp_dir() const { return tmp_dir_; }
    // Records a written (and fsynced) file for the manifest.
    void add_file(const std::string& name, const FileSummary& s);
    const std::vector<ManifestFile>& files() const { return files_; }
    // Steps 2-4. After it returns the checkpoint is durable and `latest` names it.
    void commit(const std::string& manifest_json);

private:
    std::string save_dir_, tag_, tmp_dir_;
    FileLock tmp_lock_;  // held while tmp_dir_ is ours (cleanup by others skips it)
    std::vector<ManifestFile> files_;
    bool committed_ = false;
};

struct ResolvedTag {
    std::string tag;
    std::string dir;         // <load_dir>/<tag>
    bool from_latest = false;
};

// tag == nullptr: the tag `<load_dir>/latest` names. Errors:
// DS_ERR_NOT_FOUND (load_dir, latest, or the tag directory missing; a
// `latest` naming a missing tag names both), DS_ERR_FORMAT (latest does not
// hold a valid tag), DS_ERR_INVALID_ARGUMENT (a malformed tag argument),
// DS_ERR_IO.
ResolvedTag resolve_tag(const std::string& load_dir, const char* tag);

}  // namespace ds::ckpt
