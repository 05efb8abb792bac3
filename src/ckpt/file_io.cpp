#include "ckpt/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

#include "core/crc32c.h"
#include "core/error.h"

namespace ds::ckpt {

namespace {

// Checksum and write in slices that stay in cache between the two passes.
// (Checksumming on a second thread while writing measured slower: the two
// compete for memory bandwidth.)
constexpr size_t kSlice = size_t{4} << 20;

[[noreturn]] void fail_errno(int err, const char* op, const std::string& path) {
    fail(err == ENOENT ? DS_ERR_NOT_FOUND : DS_ERR_IO, "%s '%s': %s", op, path.c_str(),
         std::strerror(err));
}

void write_all(int fd, const uint8_t* p, size_t n, const std::string& path) {
    while (n > 0) {
        ssize_t w = ::write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            fail_errno(errno, "cannot write", path);
        }
        p += w;
        n -= static_cast<size_t>(w);
    }
}

const char* file_type_name(mode_t m) {
    if (S_ISREG(m)) return "regular file";
    if (S_ISDIR(m)) return "directory";
    if (S_ISFIFO(m)) return "FIFO";
    if (S_ISCHR(m)) return "character device";
    if (S_ISBLK(m)) return "block device";
    if (S_ISSOCK(m)) return "socket";
    if (S_ISLNK(m)) return "symbolic link";
    return "special file";
}

void clear_nonblock(int fd) {
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

int open_dir(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) fail_errno(errno, "cannot open directory", path);
    return fd;
}

}  // namespace

// ---- FileWriter ------------------------------------------------------------

FileWriter::FileWriter(std::string path) : path_(std::move(path)) {
    // O_NONBLOCK + the regular-file check: a FIFO or device at the path is
    // refused instead of blocking or being written into.
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd_ < 0) fail_errno(errno, "cannot create", path_);
    struct stat st;
    const bool stat_ok = ::fstat(fd_, &st) == 0;
    if (!stat_ok || !S_ISREG(st.st_mode)) {
        ::close(fd_);
        fd_ = -1;
        fail(DS_ERR_IO, "cannot write '%s': it is not a regular file (%s)", path_.c_str(),
             stat_ok ? file_type_name(st.st_mode) : "cannot stat");
    }
    clear_nonblock(fd_);
}

FileWriter::~FileWriter() {
    if (fd_ >= 0) ::close(fd_);
}

void FileWriter::write(const void* data, size_t n) {
    DS_CHECK(fd_ >= 0, DS_ERR_INTERNAL, "write to '%s' after finish()", path_.c_str());
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
        const size_t len = n < kSlice ? n : kSlice;
        sum_.crc32c = crc32c(sum_.crc32c, p, len);
        write_all(fd_, p, len, path_);
        sum_.size += len;
        p += len;
        n -= len;
    }
}

FileSummary FileWriter::finish() {
    DS_CHECK(fd_ >= 0, DS_ERR_INTERNAL, "finish() twice on '%s'", path_.c_str());
    int fd = fd_;
    fd_ = -1;
    if (::fsync(fd) != 0) {
        int err = errno;
        ::close(fd);
        fail_errno(err, "cannot fsync", path_);
    }
    if (::close(fd) != 0) fail_errno(errno, "cannot close", path_);
    return sum_;
}

// ---- FileReader ------------------------------------------------------------

FileReader::FileReader(std::string path) : path_(std::move(path)) {
    // O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer;
    // it is refused below as not a regular file.
    fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) fail_errno(errno, "cannot open", path_);
    struct stat st;
    if (::fstat(fd_, &st) != 0) {
        int err = errno;
        ::close(fd_);
        fd_ = -1;
        fail_errno(err, "cannot stat", path_);
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd_);
        fd_ = -1;
        fail(DS_ERR_IO, "'%s' is not a regular file (%s)", path_.c_str(), file_type_name(st.st_mode));
    }
    clear_nonblock(fd_);
    size_ = static_cast<uint64_t>(st.st_size);
}

FileReader::~FileReader() {
    if (fd_ >= 0) ::close(fd_);
}

void FileReader::read_at(uint64_t offset, void* out, size_t n) const {
    auto* p = static_cast<uint8_t*>(out);
    while (n > 0) {
        ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(offset));
        if (r < 0) {
            if (errno == EINTR) continue;
            fail_errno(errno, "cannot read", path_);
        }
        if (r == 0)
            fail(DS_ERR_FORMAT, "'%s' ends at byte %llu, before the data it declares (truncated)",
                 path_.c_str(), static_cast<unsigned long long>(offset));
        p += r;
        offset += static_cast<uint64_t>(r);
        n -= static_cast<size_t>(r);
    }
}

uint32_t FileReader::checksum() const {
    std::unique_ptr<uint8_t[]> buf(new uint8_t[kSlice]);
    uint32_t crc = 0;
    for (uint64_t off = 0; off < size_;) {
        const size_t len = static_cast<size_t>(std::min<uint64_t>(kSlice, size_ - off));
        read_at(off, buf.get(), len);
        crc = crc32c(crc, buf.get(), len);
        off += len;
    }
    return crc;
}

// ---- whole files -----------------------------------------------------------

FileBuffer read_file(const std::string& path, std::optional<uint64_t> expected_size) {
    FileReader r(path);
    if (expected_size && r.size() != *expected_size)
        fail(DS_ERR_FORMAT, "'%s' is %llu bytes but the manifest records %llu (truncated or overwritten)",
             path.c_str(), static_cast<unsigned long long>(r.size()),
             static_cast<unsigned long long>(*expected_size));
    FileBuffer b;
    b.size = r.size();
    // Mapping avoids both a copy and fresh anonymous memory (whose first-touch
    // faults cost more than the copy on some virtual machines).
    void* m = b.size > 0 ? ::mmap(nullptr, static_cast<size_t>(b.size), PROT_READ, MAP_PRIVATE, r.fd(), 0)
                         : MAP_FAILED;
    if (m != MAP_FAILED) {
        ::madvise(m, static_cast<size_t>(b.size), MADV_SEQUENTIAL);
        const size_t len = static_cast<size_t>(b.size);
        b.bytes = std::shared_ptr<const uint8_t>(static_cast<const uint8_t*>(m),
                                                 [len](const uint8_t* p) { ::munmap(const_cast<uint8_t*>(p), len); });
        b.crc32c = crc32c(0, b.data(), len);
        return b;
    }
    std::shared_ptr<uint8_t> heap(new uint8_t[b.size > 0 ? b.size : 1], std::default_delete<uint8_t[]>());
    for (uint64_t off = 0; off < b.size;) {
        const size_t len = static_cast<size_t>(std::min<uint64_t>(kSlice, b.size - off));
        r.read_at(off, heap.get() + off, len);
        b.crc32c = crc32c(b.crc32c, heap.get() + off, len);
        off += len;
    }
    b.bytes = heap;
    return b;
}

std::string read_text_file(const std::string& path, uint64_t max_bytes) {
    FileReader r(path);
    DS_CHECK(r.size() <= max_bytes, DS_ERR_FORMAT, "'%s' is %llu bytes, more than the %llu allowed",
             path.c_str(), static_cast<unsigned long long>(r.size()),
             static_cast<unsigned long long>(max_bytes));
    std::string s(static_cast<size_t>(r.size()), '\0');
    if (!s.empty()) r.read_at(0, &s[0], s.size());
    return s;
}

// ---- directories -----------------------------------------------------------

PathKind path_kind(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return PathKind::Missing;
        fail_errno(errno, "cannot stat", path);
    }
    if (S_ISDIR(st.st_mode)) return PathKind::Directory;
    if (S_ISREG(st.st_mode)) return PathKind::File;
    return PathKind::Other;
}

std::string join_path(const std::string& dir, const std::string& name) {
    if (dir.empty()) return name;
    return dir.back() == '/' ? dir + name : dir + "/" + name;
}

void make_dirs(const std::string& path) {
    DS_CHECK(!path.empty(), DS_ERR_INVALID_ARGUMENT, "directory path is empty");
    PathKind k = path_kind(path);
    if (k == PathKind::Directory) return;
    DS_CHECK(k == PathKind::Missing, DS_ERR_IO, "'%s' exists and is not a directory", path.c_str());
    std::string parent = path;
    while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
    size_t slash = parent.rfind('/');
    parent = slash == std::string::npos ? "." : (slash == 0 ? "/" : parent.substr(0, slash));
    make_dirs(parent);
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) fail_errno(errno, "cannot create directory", path);
    fsync_dir(parent);
}

std::vector<std::string> list_dir(const std::string& path) {
    DIR* d = ::opendir(path.c_str());
    if (!d) fail_errno(errno, "cannot list directory", path);
    std::vector<std::string> names;
    while (struct dirent* e = ::readdir(d)) {
        if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
        names.emplace_back(e->d_name);
    }
    ::closedir(d);
    return names;
}

void fsync_dir(const std::string& path) {
    int fd = open_dir(path);
    if (::fsync(fd) != 0 && errno != EINVAL) {  // EINVAL: the file system cannot sync directories
        int err = errno;
        ::close(fd);
        fail_errno(err, "cannot fsync directory", path);
    }
    ::close(fd);
}

void rename_path(const std::string& from, const std::string& to) {
    if (::rename(from.c_str(), to.c_str()) != 0)
        fail(errno == ENOENT ? DS_ERR_NOT_FOUND : DS_ERR_IO, "cannot rename '%s' to '%s': %s", from.c_str(),
             to.c_str(), std::strerror(errno));
}

bool exchange_paths(const std::string& a, const std::string& b) {
#if defined(SYS_renameat2)
    constexpr unsigned kRenameExchange = 2;  // RENAME_EXCHANGE in <linux/fs.h>
    if (::syscall(SYS_renameat2, AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), kRenameExchange) == 0)
        return true;
    if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) return false;
    fail(DS_ERR_IO, "cannot exchange '%s' and '%s': %s", a.c_str(), b.c_str(), std::strerror(errno));
#else
    (void)a;
    (void)b;
    return false;
#endif
}

void remove_tree(const std::string& path) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) {
        if (errno == ENOENT) return;
        fail_errno(errno, "cannot stat", path);
    }
    if (S_ISDIR(st.st_mode)) {
        for (const std::string& name : list_dir(path)) remove_tree(join_path(path, name));
        if (::rmdir(path.c_str()) != 0 && errno != ENOENT) fail_errno(errno, "cannot remove directory", path);
    } else if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        fail_errno(errno, "cannot remove", path);
    }
}

void replace_file_atomically(const std::string& dir, const std::string& name, const std::string& content) {
    // A unique temporary name: concurrent writers never share one (and a
    // FIFO someone left at a fixed name cannot block the save).
    const std::string tmp = join_path(dir, name + ".tmp-" + random_nonce());
    try {
        FileWriter w(tmp);
        w.write(content.data(), content.size());
        w.finish();
        rename_path(tmp, join_path(dir, name));
    } catch (const Error&) {
        try {
            remove_tree(tmp);
        } catch (const Error&) {  // a leftover the next save removes
        }
        throw;
    }
    fsync_dir(dir);
}

std::string random_nonce() {
    static thread_local std::mt19937_64 gen([] {
        std::random_device rd;
        uint64_t seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
        seed ^= static_cast<uint64_t>(::getpid()) << 16;
        seed ^= static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
        return seed;
    }());
    char buf[17];
    // The pid keeps a forked child (which inherits the generator) distinct.
    const uint64_t v = gen() ^ (static_cast<uint64_t>(::getpid()) * 0x9E3779B97F4A7C15ull);
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

}  // namespace ds::ckpt
