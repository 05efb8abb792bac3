// The collective parts of saving and loading with several ranks: agreeing
// on success, and gathering every rank's optimizer-file description to
// rank 0 for the manifest.
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/engine_checkpoint.h"

namespace ds {

namespace {

// Length-prefixed binary encoding of the partition descriptions.
void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
void put_str(std::string& out, const std::string& s) {
    put_u64(out, s.size());
    out += s;
}
uint64_t get_u64(const std::string& in, size_t& pos) {
    DS_CHECK(pos + 8 <= in.size(), DS_ERR_INTERNAL, "truncated partition description");
    uint64_t v;
    std::memcpy(&v, in.data() + pos, 8);
    pos += 8;
    return v;
}
std::string get_str(const std::string& in, size_t& pos) {
    const uint64_t n = get_u64(in, pos);
    DS_CHECK(pos + n <= in.size(), DS_ERR_INTERNAL, "truncated partition description");
    std::string s = in.substr(pos, n);
    pos += n;
    return s;
}

}  // namespace

void agree_across_ranks(comm::Communicator& comm, const char* call, const Error* local_error) {
    if (comm.size() == 1) {
        if (local_error) throw *local_error;
        return;
    }
    const int32_t mine = local_error ? local_error->status() : DS_OK;
    std::vector<int32_t> all(static_cast<size_t>(comm.size()));
    comm.allgather(&mine, all.data(), 1, DType::I32);
    if (local_error) throw *local_error;
    for (int r = 0; r < comm.size(); ++r)
        if (all[static_cast<size_t>(r)] != DS_OK)
            fail(all[static_cast<size_t>(r)], "%s failed on rank %d (%s); see that rank's error", call, r,
                 ds_status_string(all[static_cast<size_t>(r)]));
}

std::vector<std::pair<ckpt::RankPartition, ckpt::ManifestFile>> exchange_partitions(
    comm::Communicator& comm, const std::optional<std::pair<ckpt::RankPartition, ckpt::ManifestFile>>& mine) {
    std::vector<std::pair<ckpt::RankPartition, ckpt::ManifestFile>> out;
    std::string blob;
    if (mine) {
        const ckpt::RankPartition& p = mine->first;
        put_u64(blob, static_cast<uint64_t>(p.rank));
        put_str(blob, p.file);
        put_u64(blob, mine->second.size);
        put_u64(blob, mine->second.crc32c);
        put_u64(blob, p.fragments.size());
        for (const ckpt::Fragment& f : p.fragments) {
            put_str(blob, f.param);
            put_u64(blob, static_cast<uint64_t>(f.offset));
            put_u64(blob, static_cast<uint64_t>(f.numel));
        }
    }
    const int world = comm.size();
    std::vector<int64_t> sizes(static_cast<size_t>(world));
    const int64_t n = static_cast<int64_t>(blob.size());
    if (world == 1) {
        sizes[0] = n;
    } else {
        comm.allgather(&n, sizes.data(), 1, DType::I64);
    }
    int64_t widest = 1;
    for (int64_t s : sizes) widest = std::max(widest, s);
    blob.resize(static_cast<size_t>(widest));
    std::string all(static_cast<size_t>(widest * world), '\0');
    if (world == 1) all = blob;
    else comm.allgather(blob.data(), all.data(), static_cast<size_t>(widest), DType::U8);
    for (int r = 0; r < world; ++r) {
        if (sizes[static_cast<size_t>(r)] == 0) continue;
        const std::string one = all.substr(static_cast<size_t>(r * widest), static_cast<size_t>(sizes[static_cast<size_t>(r)]));
        size_t pos = 0;
        ckpt::RankPartition p;
        ckpt::ManifestFile f;
        p.rank = static_cast<int32_t>(get_u64(one, pos));
        p.file = get_str(one, pos);
        f.name = p.file;
        f.size = get_u64(one, pos);
        f.crc32c = static_cast<uint32_t>(get_u64(one, pos));
        const uint64_t count = get_u64(one, pos);
        for (uint64_t i = 0; i < count; ++i) {
            ckpt::Fragment fr;
            fr.param = get_str(one, pos);
            fr.offset = static_cast<int64_t>(get_u64(one, pos));
            fr.numel = static_cast<int64_t>(get_u64(one, pos));
            p.fragments.push_back(std::move(fr));
        }
        out.emplace_back(std::move(p), std::move(f));
    }
    return out;
}

}  // namespace ds
