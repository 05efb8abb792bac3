#include "ckpt/commit.h"

#include <cctype>

#include "ckpt/file_lock.h"
#include "ckpt/names.h"
#include "core/error.h"
#include "core/log.h"

namespace ds::ckpt {

namespace {

bool has_nonce_suffix(const std::string& name, const std::string& infix) {
    const size_t n = infix.size() + 16;
    if (name.size() <= n) return false;
    if (name.compare(name.size() - n, infix.size(), infix) != 0) return false;
    for (size_t i = name.size() - 16; i < name.size(); ++i)
        if (!std::isxdigit(static_cast<unsigned char>(name[i]))) return false;
    return true;
}

// Removes leftovers of interrupted saves whose owner no longer holds their
// lock (file_lock.h). The caller holds `dir`'s exclusive lock, so the
// temporaries made under it (latest.tmp-<nonce>, <tag>.old-<nonce>, and
// temporary directories before their owner locks them) are never live here.
void remove_dead_leftovers(const std::string& dir) {
    for (const std::string& name : list_dir(dir)) {
        if (!is_leftover_name(name)) continue;
        const std::string path = join_path(dir, name);
        try {
            FileLock owner;
            if (FileLock::acquire(path, FileLock::Mode::Exclusive, /*wait=*/false, owner) != FileLock::Result::Locked)
                continue;  // in use by a live save (Busy), gone, or not lockable here: leave it
            if (owner.still_at(path)) remove_tree(path);
        } catch (const Error& e) {  // someone else's file we may not remove: not ours to fail on
            DS_LOG(Logger::global(), DS_LOG_WARN, "checkpoint: cannot remove leftover '%s': %s", path.c_str(),
                   e.what());
        }
    }
}

// Exclusive lock of the save directory (cleanup and commit); nothing when
// the file system has no flock.
FileLock lock_save_dir(const std::string& dir) {
    FileLock l;
    const FileLock::Result r =
        FileLock::acquire(dir, FileLock::Mode::Exclusive, /*wait=*/true, l, /*follow_links=*/true);
    DS_CHECK(r != FileLock::Result::Missing, DS_ERR_IO, "save directory '%s' disappeared", dir.c_str());
    return l;
}

// The replaced copy of a tag: failing to remove it must not stop `latest`
// from being updated (the next save removes it as a leftover).
void remove_replaced(const std::string& path) {
    try {
        remove_tree(path);
    } catch (const Error& e) {
        DS_LOG(Logger::global(), DS_LOG_WARN, "checkpoint: cannot remove the replaced copy '%s': %s", path.c_str(),
               e.what());
    }
}

}  // namespace

void check_tag(const std::string& tag, const char* what) {
    DS_CHECK(!tag.empty() && tag.size() <= kMaxTagBytes, DS_ERR_INVALID_ARGUMENT,
             "%s '%.300s' is %zu bytes: a tag must be 1 to %zu bytes long (its temporary directory "
             "'<tag>.tmp-<16 hex>' must fit a file name of %zu bytes)",
             what, tag.c_str(), tag.size(), kMaxTagBytes, kMaxNameBytes);
    DS_CHECK(tag.find('/') == std::string::npos && tag.find('\0') == std::string::npos, DS_ERR_INVALID_ARGUMENT,
             "%s '%s': a tag names one directory and cannot contain '/'", what, tag.c_str());
    DS_CHECK(tag != "." && tag != ".." && tag != kLatestFile && tag != "latest.tmp", DS_ERR_INVALID_ARGUMENT,
             "%s '%s' is reserved", what, tag.c_str());
    DS_CHECK(tag.find(".tmp-") == std::string::npos && tag.find(".old-") == std::string::npos,
             DS_ERR_INVALID_ARGUMENT, "%s '%s': \".tmp-\" and \".old-\" are reserved for the commit protocol",
             what, tag.c_str());
    for (char c : tag)
        DS_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7F, DS_ERR_INVALID_ARGUMENT,
                 "%s: a tag cannot contain control characters", what);
    // `latest` is read back with surrounding whitespace stripped.
    DS_CHECK(tag.front() != ' ' && tag.back() != ' ', DS_ERR_INVALID_ARGUMENT,
             "%s '%s': a tag cannot begin or end with a space", what, tag.c_str());
    DS_CHECK(valid_utf8(tag), DS_ERR_INVALID_ARGUMENT, "%s: a tag must be valid UTF-8", what);
}

bool is_leftover_name(const std::string& name) {
    return name == "latest.tmp" || has_nonce_suffix(name, ".tmp-") || has_nonce_suffix(name, ".old-");
}

TagWriter::TagWriter(std::string save_dir, std::string tag) : save_dir_(std::move(save_dir)), tag_(std::move(tag)) {
    make_dirs(save_dir_);
    {
        FileLock dir_lock = lock_save_dir(save_dir_);
        remove_dead_leftovers(save_dir_);
    }
    tmp_dir_ = make_locked_temp_dir(save_dir_, tag_, tmp_lock_);
}

TagWriter::~TagWriter() {
    if (committed_) return;
    try {
        remove_tree(tmp_dir_);
    } catch (const Error&) {  // the next save removes it
    }
}

std::string TagWriter::file_path(const std::string& name) const { return join_path(tmp_dir_, name); }

void TagWriter::add_file(const std::string& name, const FileSummary& s) {
    files_.push_back(ManifestFile{name, s.size, s.crc32c});
}

void TagWriter::commit(const std::string& manifest_json) {
    DS_CHECK(!committed_, DS_ERR_INTERNAL, "checkpoint '%s' committed twice", tag_.c_str());
    fsync_dir(tmp_dir_);  // the data files' directory entries
    FileWriter mf(file_path(kManifestFile));
    mf.write(manifest_json.data(), manifest_json.size());
    mf.finish();
    fsync_dir(tmp_dir_);

    // Concurrent commits into one directory take turns, so that `latest`
    // names the tag committed last and no cleanup runs in between.
    FileLock dir_lock = lock_save_dir(save_dir_);
    const std::string final_dir = join_path(save_dir_, tag_);
    switch (path_kind(final_dir)) {
        case PathKind::Missing:
            rename_path(tmp_dir_, final_dir);
            fsync_dir(save_dir_);
            break;
        case PathKind::Directory:
            if (exchange_paths(tmp_dir_, final_dir)) {
                fsync_dir(save_dir_);  // <tag> is the new checkpoint; tmp_dir_ now holds the old one
                remove_replaced(tmp_dir_);
            } else {
                const std::string old_dir = join_path(save_dir_, tag_ + ".old-" + random_nonce());
                rename_path(final_dir, old_dir);
                rename_path(tmp_dir_, final_dir);
                fsync_dir(save_dir_);
                remove_replaced(old_dir);
            }
            fsync_dir(save_dir_);
            break;
        default:
            fail(DS_ERR_IO, "cannot save checkpoint tag '%s': '%s' exists and is not a directory", tag_.c_str(),
                 final_dir.c_str());
    }
    committed_ = true;
    replace_file_atomically(save_dir_, kLatestFile, tag_);
}

ResolvedTag resolve_tag(const std::string& load_dir, const char* tag) {
    DS_CHECK(!load_dir.empty(), DS_ERR_INVALID_ARGUMENT, "argument 'load_dir' is empty");
    const PathKind k = path_kind(load_dir);
    DS_CHECK(k != PathKind::Missing, DS_ERR_NOT_FOUND, "checkpoint directory '%s' does not exist",
             load_dir.c_str());
    DS_CHECK(k == PathKind::Directory, DS_ERR_IO, "checkpoint directory '%s' is not a directory", load_dir.c_str());
    ResolvedTag r;
    if (tag) {
        r.tag = tag;
        check_tag(r.tag, "tag");
    } else {
        const std::string latest = join_path(load_dir, kLatestFile);
        DS_CHECK(path_kind(latest) != PathKind::Missing, DS_ERR_NOT_FOUND,
                 "no checkpoint to load: '%s' does not exist (pass a tag, or save a checkpoint first)",
                 latest.c_str());
        std::string text = read_text_file(latest, 4096);
        while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
        try {
            check_tag(text, "tag");
        } catch (const Error& e) {
            fail(DS_ERR_FORMAT, "'%s' does not hold a valid tag: %s", latest.c_str(), e.what());
        }
        r.tag = text;
        r.from_latest = true;
    }
    r.dir = join_path(load_dir, r.tag);
    const PathKind tk = path_kind(r.dir);
    if (tk == PathKind::Missing) {
        if (r.from_latest)
            fail(DS_ERR_NOT_FOUND, "'%s' names tag '%s' but '%s' does not exist",
                 join_path(load_dir, kLatestFile).c_str(), r.tag.c_str(), r.dir.c_str());
        fail(DS_ERR_NOT_FOUND, "checkpoint tag '%s' not found: '%s' does not exist", r.tag.c_str(), r.dir.c_str());
    }
    DS_CHECK(tk == PathKind::Directory, DS_ERR_FORMAT, "checkpoint '%s' is not a directory", r.dir.c_str());
    return r;
}

}  // namespace ds::ckpt
