// flock(2) locks that keep concurrent savers into one directory from
// destroying each other's work (docs/CHECKPOINTS.md "Concurrent saves"):
//   - each save's temporary (<tag>.tmp-<nonce>/ directory, or a temporary
//     file) is locked exclusively by its owner for as long as it exists;
//   - leftover cleanup removes a temporary only after taking that lock
//     without waiting, so it never touches one whose owner is alive, while
//     a crashed owner's lock is gone (the kernel drops it with the process);
//   - the save directory itself is locked exclusively around cleanup and the
//     commit (renames + `latest`), and shared by loaders while they read.
// Where the file system has no flock (some network file systems), locking
// reports "unsupported": saves still work, cleanup then leaves temporaries
// alone (it cannot prove them dead), and loads read without the lock.
#pragma once

#include <optional>
#include <string>

namespace ds::ckpt {

class FileLock {
public:
    FileLock() = default;
    ~FileLock();
    FileLock(FileLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    FileLock& operator=(FileLock&& o) noexcept;
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;

    bool held() const { return fd_ >= 0; }
    // Releases the lock now.
    void release();

    enum class Mode { Shared, Exclusive };
    enum class Result { Locked, Busy, Missing, Unsupported };
    // Opens `path` (file or directory, never blocking on a FIFO) and locks
    // it. follow_links=false: a symbolic link is not followed (Unsupported).
    // wait=false: Busy when another holds a conflicting lock. Other
    // failures: DS_ERR_IO naming the path.
    static Result acquire(const std::string& path, Mode mode, bool wait, FileLock& out, bool follow_links = false);
    // True when `path` still names the object this lock holds (it was not
    // removed or replaced between opening and locking).
    bool still_at(const std::string& path) const;

private:
    int fd_ = -1;
};

// Creates and exclusively locks a new directory `<parent>/<base>.tmp-<nonce>`
// (creating `parent` if needed), under a brief exclusive lock of `parent` so
// that cleanup cannot remove it before it is locked. Returns its path.
std::string make_locked_temp_dir(const std::string& parent, const std::string& base, FileLock& lock);

// Readers (ds_load_checkpoint, ds-to-fp32) hold a shared lock of the
// checkpoint directory while they resolve the tag and open its files, so a
// concurrent commit cannot swap the tag directory between those steps. Best
// effort: a directory that cannot be locked is read without it.
FileLock lock_for_reading(const std::string& load_dir);

}  // namespace ds::ckpt
