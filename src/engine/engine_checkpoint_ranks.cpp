// The collective parts of saving and loading with several ranks: agreeing
// on success, and gathering every rank's optimizer-file description to
// rank 0 for the manifest.
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/engine_checkpoint.h"
#include "engine/wire_codec.h"

namespace ds {

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
        wire::put_u64(blob, static_cast<uint64_t>(p.rank));
        wire::put_str(blob, p.file);
        wire::put_u64(blob, mine->second.size);
        wire::put_u64(blob, mine->second.crc32c);
        wire::put_u64(blob, p.fragments.size());
        for (const ckpt::Fragment& f : p.fragments) {
            wire::put_str(blob, f.param);
            wire::put_i64(blob, f.offset);
            wire::put_i64(blob, f.numel);
        }
    }
    for (const std::string& one : wire::allgather_records(comm, blob)) {
        if (one.empty()) continue;  // a rank that wrote no optimizer file
        wire::Reader in(one, "partition description");
        ckpt::RankPartition p;
        ckpt::ManifestFile f;
        p.rank = static_cast<int32_t>(in.u64());
        p.file = in.str();
        f.name = p.file;
        f.size = in.u64();
        f.crc32c = static_cast<uint32_t>(in.u64());
        const uint64_t count = in.u64();
        for (uint64_t i = 0; i < count; ++i) {
            ckpt::Fragment fr;
            fr.param = in.str();
            fr.offset = in.i64();
            fr.numel = in.i64();
            p.fragments.push_back(std::move(fr));
        }
        out.emplace_back(std::move(p), std::move(f));
    }
    return out;
}

}  // namespace ds
