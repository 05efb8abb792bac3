#include "ckpt/reader.h"

#include "core/error.h"

namespace ds::ckpt {

namespace {

void expect_tensor(const StHeader& h, const std::string& path, const std::string& key, const std::string& dtype,
                   const Shape& shape) {
    const StTensor* t = h.find(key);
    DS_CHECK(t != nullptr, DS_ERR_FORMAT, "'%s' has no tensor '%s'", path.c_str(), key.c_str());
    DS_CHECK(t->dtype == dtype, DS_ERR_FORMAT, "'%s': tensor '%s' is %s, the manifest records %s", path.c_str(),
             key.c_str(), t->dtype.c_str(), dtype.c_str());
    DS_CHECK(t->shape == shape, DS_ERR_FORMAT, "'%s': tensor '%s' has shape %s, the manifest records %s",
             path.c_str(), key.c_str(), shape_to_string(t->shape).c_str(), shape_to_string(shape).c_str());
}

}  // namespace

Manifest read_manifest(const std::string& tag_dir) {
    const std::string path = join_path(tag_dir, kManifestFile);
    DS_CHECK(path_kind(path) != PathKind::Missing, DS_ERR_NOT_FOUND,
             "'%s' is missing: '%s' is not a committed checkpoint", path.c_str(), tag_dir.c_str());
    return parse_manifest(read_text_file(path, kMaxManifestBytes), path);
}

const uint8_t* LoadedFile::tensor(const std::string& key, const std::string& dtype, const Shape& shape) const {
    expect_tensor(header, path, key, dtype, shape);
    const StTensor* t = header.find(key);
    return buf.data() + header.data_start + t->begin;
}

LoadedFile load_verified(const std::string& tag_dir, const Manifest& m, const std::string& name) {
    const ManifestFile* mf = m.file(name);
    DS_CHECK(mf != nullptr, DS_ERR_FORMAT, "'%s': the manifest does not list '%s'",
             join_path(tag_dir, kManifestFile).c_str(), name.c_str());
    LoadedFile f;
    f.path = join_path(tag_dir, name);
    DS_CHECK(path_kind(f.path) != PathKind::Missing, DS_ERR_NOT_FOUND,
             "checkpoint file '%s' is missing (the manifest lists it)", f.path.c_str());
    f.buf = read_file(f.path, mf->size);
    DS_CHECK(f.buf.crc32c == mf->crc32c, DS_ERR_FORMAT,
             "'%s' is corrupt: CRC32C 0x%08x, the manifest records 0x%08x", f.path.c_str(), f.buf.crc32c,
             mf->crc32c);
    f.header = parse_safetensors(f.buf.data(), f.buf.size, f.path);
    return f;
}

void check_model_header(const Manifest& m, const StHeader& h, const std::string& path) {
    for (const ManifestParam& p : m.params) expect_tensor(h, path, p.name, p.dtype, p.shape);
    DS_CHECK(h.tensors.size() == m.params.size(), DS_ERR_FORMAT,
             "'%s' holds %zu tensors, the manifest lists %zu parameters", path.c_str(), h.tensors.size(),
             m.params.size());
}

void check_optim_header(const Manifest& m, const RankPartition& r, const StHeader& h, const std::string& path) {
    DS_CHECK(m.optimizer.has_value(), DS_ERR_FORMAT, "'%s': partition files without an optimizer record",
             path.c_str());
    size_t expected = 0;
    for (const Fragment& f : r.fragments) {
        const Shape shape{f.numel};
        expect_tensor(h, path, fragment_key(f.param, f.offset, "master"), m.master_dtype, shape);
        for (const std::string& s : m.optimizer->state_names)
            expect_tensor(h, path, fragment_key(f.param, f.offset, s), m.optimizer->state_dtype, shape);
        expected += 1 + m.optimizer->state_names.size();
    }
    DS_CHECK(h.tensors.size() == expected, DS_ERR_FORMAT, "'%s' holds %zu tensors, the manifest implies %zu",
             path.c_str(), h.tensors.size(), expected);
}

}  // namespace ds::ckpt
