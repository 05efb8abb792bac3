#include "ckpt/consolidate.h"

#include <map>
#include <memory>
#include <unordered_map>

#include "ckpt/commit.h"
#include "ckpt/output_guard.h"
#include "ckpt/reader.h"
#include "core/error.h"
#include "core/tensor.h"

namespace ds::ckpt {

namespace {

struct OpenFile {
    std::unique_ptr<FileReader> reader;
    StHeader header;
};

// Opens `name`, checks size and CRC32C (streamed) and parses the header.
OpenFile open_verified(const std::string& tag_dir, const Manifest& m, const std::string& name) {
    const ManifestFile* mf = m.file(name);
    DS_CHECK(mf != nullptr, DS_ERR_FORMAT, "'%s': the manifest does not list '%s'",
             join_path(tag_dir, kManifestFile).c_str(), name.c_str());
    const std::string path = join_path(tag_dir, name);
    DS_CHECK(path_kind(path) != PathKind::Missing, DS_ERR_NOT_FOUND,
             "checkpoint file '%s' is missing (the manifest lists it)", path.c_str());
    OpenFile f;
    f.reader = std::make_unique<FileReader>(path);
    DS_CHECK(f.reader->size() == mf->size, DS_ERR_FORMAT,
             "'%s' is %llu bytes but the manifest records %llu (truncated or overwritten)", path.c_str(),
             static_cast<unsigned long long>(f.reader->size()), static_cast<unsigned long long>(mf->size));
    const uint32_t crc = f.reader->checksum();
    DS_CHECK(crc == mf->crc32c, DS_ERR_FORMAT, "'%s' is corrupt: CRC32C 0x%08x, the manifest records 0x%08x",
             path.c_str(), crc, mf->crc32c);
    f.header = read_safetensors_header(*f.reader);
    return f;
}

void read_tensor(const OpenFile& f, const std::string& key, void* out, uint64_t nbytes) {
    const StTensor* t = f.header.find(key);
    DS_CHECK(t != nullptr && t->nbytes() == nbytes, DS_ERR_FORMAT, "'%s': tensor '%s' missing or of the wrong size",
             f.reader->path().c_str(), key.c_str());
    f.reader->read_at(f.header.data_start + t->begin, out, static_cast<size_t>(nbytes));
}

// OUTPUT must not be, or be inside, the checkpoint being read: refused
// (DS_ERR_INVALID_ARGUMENT) before anything is written.
void check_output(const std::string& output, const std::string& tag_dir, const std::vector<std::string>& read) {
    const std::string out_dir = parent_dir(output);
    const PathKind k = path_kind(out_dir);
    DS_CHECK(k != PathKind::Missing, DS_ERR_NOT_FOUND, "OUTPUT '%s': directory '%s' does not exist",
             output.c_str(), out_dir.c_str());
    DS_CHECK(k == PathKind::Directory, DS_ERR_INVALID_ARGUMENT, "OUTPUT '%s': '%s' is not a directory",
             output.c_str(), out_dir.c_str());
    DS_CHECK(!same_file(out_dir, tag_dir), DS_ERR_INVALID_ARGUMENT,
             "OUTPUT '%s' is inside the checkpoint directory being read ('%s'); write it elsewhere",
             output.c_str(), tag_dir.c_str());
    for (const std::string& f : read)
        DS_CHECK(!same_file(output, f), DS_ERR_INVALID_ARGUMENT,
                 "OUTPUT '%s' is the checkpoint's own file '%s'; write it elsewhere", output.c_str(), f.c_str());
    check_output_file(out_dir, base_name(output), "OUTPUT");
}

}  // namespace

ConsolidateStats consolidate_fp32(const std::string& dir, const std::string& tag, const std::string& output,
                                  const ConsolidateProgress& progress) {
    // Every file is opened (and checksummed) under the shared lock; the open
    // descriptors then keep reading the same files whatever a later save does.
    FileLock reading = lock_for_reading(dir);
    const ResolvedTag where = resolve_tag(dir, tag.empty() ? nullptr : tag.c_str());
    const Manifest m = read_manifest(where.dir);
    ConsolidateStats stats;
    stats.tag = where.tag;

    OpenFile model = open_verified(where.dir, m, kModelFile);
    check_model_header(m, model.header, model.reader->path());
    std::unordered_map<std::string, OpenFile> optim;
    for (const RankPartition& r : m.partitions) {
        OpenFile f = open_verified(where.dir, m, r.file);
        check_optim_header(m, r, f.header, f.reader->path());
        optim.emplace(r.file, std::move(f));
    }
    reading.release();
    const FragmentIndex frags = index_fragments(m);

    std::vector<StTensorSpec> specs;
    uint64_t total = 0;
    for (const ManifestParam& p : m.params) {
        specs.push_back({p.name, DType::F32, p.shape});
        total += static_cast<uint64_t>(p.numel) * 4;
    }
    const std::string out_dir = parent_dir(output), out_name = base_name(output);
    std::vector<std::string> read_paths{join_path(dir, kLatestFile), join_path(where.dir, kManifestFile),
                                        model.reader->path()};
    for (const auto& [name, f] : optim) read_paths.push_back(f.reader->path());
    check_output(output, where.dir, read_paths);
    FileLock tmp_lock;  // a concurrent save's cleanup in out_dir leaves a locked temporary alone
    const std::string tmp_dir = make_locked_temp_dir(out_dir, out_name, tmp_lock);
    const std::string tmp = join_path(tmp_dir, out_name);
    try {
        SafetensorsWriter w(tmp, specs, {{"format", "pt"}});
        uint64_t done = 0;
        for (size_t i = 0; i < m.params.size(); ++i) {
            const ManifestParam& p = m.params[i];
            const uint64_t bytes = static_cast<uint64_t>(p.numel) * 4;
            std::unique_ptr<float[]> buf(new float[p.numel > 0 ? p.numel : 1]);
            uint64_t held = bytes;
            auto fi = frags.find(p.name);
            if (fi != frags.end()) {
                for (const FragmentRef& ref : fi->second)
                    read_tensor(optim.at(ref.part->file), fragment_key(p.name, ref.frag->offset, "master"),
                                buf.get() + ref.frag->offset, static_cast<uint64_t>(ref.frag->numel) * 4);
            } else {
                const std::optional<DType> wdt = st_dtype_to_dtype(p.dtype);
                DS_CHECK(wdt.has_value(), DS_ERR_FORMAT, "'%s': parameter '%s' has dtype %s, which cannot be "
                         "widened to fp32", model.reader->path().c_str(), p.name.c_str(), p.dtype.c_str());
                const DType wd = *wdt;
                const uint64_t wbytes = static_cast<uint64_t>(p.numel) * dtype_size(wd);
                std::unique_ptr<uint8_t[]> raw(new uint8_t[wbytes > 0 ? wbytes : 1]);
                held += wbytes;
                read_tensor(model, p.name, raw.get(), wbytes);
                Tensor dst = Tensor::borrow(buf.get(), p.shape, {}, DType::F32, Device{});
                dst.copy_from(Tensor::borrow(raw.get(), p.shape, {}, wd, Device{}));
            }
            stats.peak_buffer_bytes = std::max(stats.peak_buffer_bytes, held);
            w.write(buf.get(), static_cast<size_t>(bytes));
            done += bytes;
            if (progress) progress(i + 1, m.params.size(), done, total);
        }
        stats.output_bytes = w.finish().size;
        check_output(output, where.dir, read_paths);  // again: OUTPUT may have changed while we wrote
        rename_path(tmp, output);
        remove_tree(tmp_dir);
    } catch (...) {
        try {
            remove_tree(tmp_dir);
        } catch (const Error&) {
        }
        throw;
    }
    fsync_dir(out_dir);
    stats.params = m.params.size();
    return stats;
}

}  // namespace ds::ckpt
