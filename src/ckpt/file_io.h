// POSIX file and directory operations for checkpoints, each reporting
// failure as ds::Error naming the path and the system's reason:
// DS_ERR_NOT_FOUND for a path that does not exist, DS_ERR_IO otherwise.
// Writers checksum (CRC32C) what they write; fsync is explicit.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ds::ckpt {

// Size and CRC32C of a file's whole content.
struct FileSummary {
    uint64_t size = 0;
    uint32_t crc32c = 0;
};

// Creates (truncates) a file and appends to it; finish() fsyncs and closes.
// A writer destroyed before finish() closes the file without syncing.
class FileWriter {
public:
    explicit FileWriter(std::string path);
    ~FileWriter();
    FileWriter(const FileWriter&) = delete;
    FileWriter& operator=(const FileWriter&) = delete;

    void write(const void* data, size_t n);
    FileSummary finish();
    const std::string& path() const { return path_; }
    uint64_t written() const { return sum_.size; }

private:
    int fd_ = -1;
    std::string path_;
    FileSummary sum_;
};

// Random-access reading (pread) of an existing file.
class FileReader {
public:
    explicit FileReader(std::string path);
    ~FileReader();
    FileReader(const FileReader&) = delete;
    FileReader& operator=(const FileReader&) = delete;

    uint64_t size() const { return size_; }
    const std::string& path() const { return path_; }
    // Exactly n bytes at `offset`; a short file is DS_ERR_FORMAT (truncated).
    void read_at(uint64_t offset, void* out, size_t n) const;
    // CRC32C of the whole file, streamed through a bounded buffer.
    uint32_t checksum() const;
    int fd() const { return fd_; }

private:
    int fd_ = -1;
    std::string path_;
    uint64_t size_ = 0;
};

// A whole file's bytes, read-only: memory-mapped (the page cache itself, no
// copy) or, where the file system cannot map it, read into memory. A mapped
// file must not be truncated while mapped; the commit protocol never
// truncates committed files (it replaces whole directories, and an unlinked
// file stays readable).
struct FileBuffer {
    std::shared_ptr<const uint8_t> bytes;
    uint64_t size = 0;
    uint32_t crc32c = 0;
    const uint8_t* data() const { return bytes.get(); }
};

// Maps (or reads) `path` whole and checksums it. With `expected_size`, a
// file of another size is DS_ERR_FORMAT before anything is read.
FileBuffer read_file(const std::string& path, std::optional<uint64_t> expected_size = std::nullopt);
// Small text files (manifest, latest).
std::string read_text_file(const std::string& path, uint64_t max_bytes);

enum class PathKind { Missing, File, Directory, Other };
PathKind path_kind(const std::string& path);

std::string join_path(const std::string& dir, const std::string& name);
// mkdir -p; each directory created is made durable in its parent.
void make_dirs(const std::string& path);
// Names in a directory (no "." or "..").
std::vector<std::string> list_dir(const std::string& path);
void fsync_dir(const std::string& path);
void rename_path(const std::string& from, const std::string& to);
// Atomically swaps two existing paths (renameat2 RENAME_EXCHANGE). False when
// the kernel or file system cannot; other failures throw.
bool exchange_paths(const std::string& a, const std::string& b);
// Removes a file or a directory tree; a missing path is not an error.
void remove_tree(const std::string& path);
// Writes `content` to `<dir>/<name>.tmp-<nonce>`, fsyncs it, renames it over
// `<dir>/<name>` and fsyncs `dir`: readers see the old or the new file whole.
void replace_file_atomically(const std::string& dir, const std::string& name,
                             const std::string& content);
// 16 random hex digits (unique names for temporary files and directories).
std::string random_nonce();

}  // namespace ds::ckpt
