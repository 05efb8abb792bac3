// Length-prefixed binary records exchanged between ranks (the checkpoint
// partition descriptions, the sharded engines' census): host-endian u64s and
// strings, and an all-gather of one variable-length record per rank.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/error.h"

namespace ds::wire {

inline void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
inline void put_i64(std::string& out, int64_t v) { put_u64(out, static_cast<uint64_t>(v)); }
inline void put_str(std::string& out, const std::string& s) {
    put_u64(out, s.size());
    out += s;
}

// Reading one record; a short record is DS_ERR_INTERNAL naming `what_`.
class Reader {
public:
    Reader(const std::string& in, const char* what) : in_(in), what_(what) {}
    uint64_t u64() {
        DS_CHECK(pos_ + 8 <= in_.size(), DS_ERR_INTERNAL, "truncated %s", what_);
        uint64_t v;
        std::memcpy(&v, in_.data() + pos_, 8);
        pos_ += 8;
        return v;
    }
    int64_t i64() { return static_cast<int64_t>(u64()); }
    bool done() const { return pos_ == in_.size(); }
    std::string str() {
        const uint64_t n = u64();
        DS_CHECK(n <= in_.size() - pos_, DS_ERR_INTERNAL, "truncated %s", what_);
        std::string s = in_.substr(pos_, n);
        pos_ += n;
        return s;
    }

private:
    const std::string& in_;
    const char* what_;
    size_t pos_ = 0;
};

// Every rank's `mine`, in rank order (collective over `comm`).
inline std::vector<std::string> allgather_records(comm::Communicator& comm, const std::string& mine) {
    const int world = comm.size();
    if (world == 1) return {mine};
    std::vector<int64_t> sizes(static_cast<size_t>(world));
    const int64_t n = static_cast<int64_t>(mine.size());
    comm.allgather(&n, sizes.data(), 1, DType::I64);
    int64_t widest = 1;
    for (int64_t s : sizes) widest = std::max(widest, s);
    std::string blob = mine;
    blob.resize(static_cast<size_t>(widest));
    std::string all(static_cast<size_t>(widest * world), '\0');
    comm.allgather(blob.data(), all.data(), static_cast<size_t>(widest), DType::U8);
    std::vector<std::string> out;
    for (int r = 0; r < world; ++r)
        out.push_back(all.substr(static_cast<size_t>(r * widest), static_cast<size_t>(sizes[static_cast<size_t>(r)])));
    return out;
}

}  // namespace ds::wire
