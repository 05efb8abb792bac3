// Fingerprint: what one rank asked a collective to do (kind, dtype, count,
// op, root), stamped with the collective's sequence number. In debug mode the
// ranks exchange fingerprints before each collective; any difference means
// the ranks' programs diverged, and every rank reports the same message
// naming the first mismatch instead of hanging or reducing garbage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ds::comm {

enum class FpKind : int32_t {
    Allreduce = 0,
    ReduceScatter,
    Allgather,
    Broadcast,
    Alltoall,
    Barrier,
    Send,
    Recv,
};

// "allreduce", "reduce_scatter", "allgather", "broadcast", "alltoall",
// "barrier", "send", "recv".
const char* fp_kind_name(FpKind k);

// Fixed layout (no implicit padding) so it travels as bytes between ranks.
struct Fingerprint {
    uint64_t seq = 0;     // 1-based collective number on this communicator; 0 for point to point
    uint64_t count = 0;   // elements (per rank, as the caller passed it)
    int32_t kind = 0;     // FpKind
    int32_t dtype = -1;   // ds::DType, -1 for barrier
    int32_t op = -1;      // ds::comm::Op for reductions, else -1
    int32_t root = -1;    // broadcast root, send/recv peer, else -1
};
static_assert(sizeof(Fingerprint) == 32, "Fingerprint must have no padding");

bool operator==(const Fingerprint& a, const Fingerprint& b);
inline bool operator!=(const Fingerprint& a, const Fingerprint& b) { return !(a == b); }

// "allreduce(fp32, 1000, sum)", "allgather(bf16, 500)", "broadcast(fp16, 7, root=2)",
// "barrier()", "send(fp32, 10, peer=1)".
std::string describe(const Fingerprint& fp);

// "collective #17 allreduce(fp32, 1000, sum)" (point to point: no number).
std::string label(const Fingerprint& fp);

// Given every rank's fingerprint (rank order), "" when they all agree, else
// "collective #17 mismatch: rank 0 called allreduce(fp32, 1000, sum), rank 1
// called allgather(fp32, 500)" naming rank 0 and every rank that differs
// from it (the same text on every rank).
std::string find_mismatch(const Fingerprint* all, size_t n);

}  // namespace ds::comm
