#include "ckpt/output_guard.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "ckpt/commit.h"
#include "ckpt/manifest.h"
#include "ckpt/names.h"
#include "core/error.h"

namespace ds::ckpt {

namespace {

bool is_checkpoint_data_name(const std::string& name) {
    if (name == kModelFile) return true;
    const std::string pre = "optim_rank", suf = ".safetensors";
    if (name.size() <= pre.size() + suf.size() || name.compare(0, pre.size(), pre) != 0 ||
        name.compare(name.size() - suf.size(), suf.size(), suf) != 0)
        return false;
    for (size_t i = pre.size(); i < name.size() - suf.size(); ++i)
        if (name[i] < '0' || name[i] > '9') return false;
    return true;
}

}  // namespace

std::string parent_dir(const std::string& path) {
    std::string p = path;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    const size_t slash = p.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : p.substr(0, slash);
}

std::string base_name(const std::string& path) {
    std::string p = path;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    const size_t slash = p.rfind('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
}

bool same_file(const std::string& a, const std::string& b) {
    struct stat sa, sb;
    if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void check_output_name(const std::string& name, const char* what) {
    DS_CHECK(!name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos,
             DS_ERR_INVALID_ARGUMENT, "%s '%s' must be a plain file name (not empty, '.', '..', no '/')", what,
             name.c_str());
    DS_CHECK(name.size() <= kMaxTagBytes, DS_ERR_INVALID_ARGUMENT,
             "%s is %zu bytes: at most %zu (its temporary '<name>.tmp-<16 hex>' must fit a file name of %zu bytes)",
             what, name.size(), kMaxTagBytes, kMaxNameBytes);
    for (char c : name)
        DS_CHECK(static_cast<unsigned char>(c) >= 0x20, DS_ERR_INVALID_ARGUMENT,
                 "%s: a file name cannot contain control characters", what);
    DS_CHECK(name != kLatestFile && name.compare(0, 7, "latest.") != 0 && name != kManifestFile,
             DS_ERR_INVALID_ARGUMENT, "%s '%s' is reserved for checkpoints (it would replace a checkpoint's '%s')",
             what, name.c_str(), name == kManifestFile ? kManifestFile : kLatestFile);
    DS_CHECK(!is_leftover_name(name), DS_ERR_INVALID_ARGUMENT,
             "%s '%s' has the form of a checkpoint temporary (*.tmp-<16 hex>, *.old-<16 hex>), which a later "
             "save would remove",
             what, name.c_str());
}

void check_output_file(const std::string& dir, const std::string& name, const char* what) {
    check_output_name(name, what);
    if (is_checkpoint_data_name(name))
        DS_CHECK(path_kind(join_path(dir, kManifestFile)) == PathKind::Missing, DS_ERR_INVALID_ARGUMENT,
                 "%s '%s': '%s' is a checkpoint directory (it holds %s) and this would replace its '%s'", what,
                 name.c_str(), dir.c_str(), kManifestFile, name.c_str());
    const std::string target = join_path(dir, name);
    struct stat st;
    if (::lstat(target.c_str(), &st) == 0) {
        if (S_ISLNK(st.st_mode) && ::stat(target.c_str(), &st) != 0) return;  // a dangling link is replaced
        DS_CHECK(S_ISREG(st.st_mode), DS_ERR_INVALID_ARGUMENT,
                 "%s: '%s' exists and is not a regular file (%s); refusing to replace it", what, target.c_str(),
                 S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO"
                 : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "a special file");
    }
}

}  // namespace ds::ckpt
