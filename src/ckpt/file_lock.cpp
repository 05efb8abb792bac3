#include "ckpt/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ckpt/file_io.h"
#include "core/error.h"

namespace ds::ckpt {

FileLock::~FileLock() { release(); }

FileLock& FileLock::operator=(FileLock&& o) noexcept {
    if (this != &o) {
        release();
        fd_ = o.fd_;
        o.fd_ = -1;
    }
    return *this;
}

void FileLock::release() {
    if (fd_ >= 0) ::close(fd_);  // closing the last descriptor drops the flock
    fd_ = -1;
}

FileLock::Result FileLock::acquire(const std::string& path, Mode mode, bool wait, FileLock& out, bool follow_links) {
    out.release();
    const int fd = ::open(path.c_str(), O_RDONLY | (follow_links ? 0 : O_NOFOLLOW) | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return Result::Missing;
        if (errno == ELOOP) return Result::Unsupported;  // a symbolic link: not ours to lock
        fail(DS_ERR_IO, "cannot open '%s' to lock it: %s", path.c_str(), std::strerror(errno));
    }
    const int op = (mode == Mode::Shared ? LOCK_SH : LOCK_EX) | (wait ? 0 : LOCK_NB);
    int rc;
    do {
        rc = ::flock(fd, op);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        const int err = errno;
        ::close(fd);
        if (err == EWOULDBLOCK) return Result::Busy;
        if (err == ENOLCK || err == EOPNOTSUPP || err == EBADF || err == EINVAL) return Result::Unsupported;
        fail(DS_ERR_IO, "cannot lock '%s': %s", path.c_str(), std::strerror(err));
    }
    out.fd_ = fd;
    return Result::Locked;
}

bool FileLock::still_at(const std::string& path) const {
    struct stat held, now;
    if (fd_ < 0 || ::fstat(fd_, &held) != 0 || held.st_nlink == 0) return false;
    if (::lstat(path.c_str(), &now) != 0) return false;
    return held.st_dev == now.st_dev && held.st_ino == now.st_ino;
}

std::string make_locked_temp_dir(const std::string& parent, const std::string& base, FileLock& lock) {
    make_dirs(parent);
    // Created and locked under the parent's exclusive lock, which cleanup
    // holds too: it never sees the new directory before its owner locks it.
    // (Without flock on the parent, cleanup may still race the creation: the
    // identity check below then retries with a new name.)
    FileLock parent_lock;
    FileLock::acquire(parent, FileLock::Mode::Exclusive, /*wait=*/true, parent_lock, /*follow_links=*/true);
    const char* last = "";
    for (int attempt = 0; attempt < 16; ++attempt) {
        const std::string path = join_path(parent, base + ".tmp-" + random_nonce());
        make_dirs(path);
        const FileLock::Result r = FileLock::acquire(path, FileLock::Mode::Exclusive, /*wait=*/true, lock);
        if (r == FileLock::Result::Unsupported) return path;  // no flock here: unprotected, as documented
        if (r == FileLock::Result::Locked && lock.still_at(path)) return path;
        last = r == FileLock::Result::Missing ? "removed before it could be locked" : "replaced while being locked";
        lock.release();
    }
    fail(DS_ERR_IO, "cannot create a temporary directory in '%s': 16 attempts failed, the last %s (another "
         "process removing temporaries?)", parent.c_str(), last);
}

FileLock lock_for_reading(const std::string& load_dir) {
    FileLock l;
    try {
        FileLock::acquire(load_dir, FileLock::Mode::Shared, /*wait=*/true, l, /*follow_links=*/true);
    } catch (const Error&) {  // resolving the tag reports what is wrong with the directory
    }
    return l;
}

}  // namespace ds::ckpt
