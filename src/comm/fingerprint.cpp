#include "comm/fingerprint.h"

#include <cinttypes>

#include "comm/communicator.h"
#include "core/dtype.h"
#include "core/error.h"

namespace ds::comm {

const char* fp_kind_name(FpKind k) {
    switch (k) {
        case FpKind::Allreduce: return "allreduce";
        case FpKind::ReduceScatter: return "reduce_scatter";
        case FpKind::Allgather: return "allgather";
        case FpKind::Broadcast: return "broadcast";
        case FpKind::Alltoall: return "alltoall";
        case FpKind::Barrier: return "barrier";
        case FpKind::Send: return "send";
        case FpKind::Recv: return "recv";
    }
    return "unknown_collective";
}

bool operator==(const Fingerprint& a, const Fingerprint& b) {
    return a.seq == b.seq && a.count == b.count && a.kind == b.kind && a.dtype == b.dtype &&
           a.op == b.op && a.root == b.root;
}

namespace {
// Names taken defensively: a fingerprint may come from a diverged peer.
const char* safe_kind(int32_t k) {
    return k >= 0 && k <= static_cast<int32_t>(FpKind::Recv)
               ? fp_kind_name(static_cast<FpKind>(k))
               : "unknown_collective";
}
const char* safe_dtype(int32_t d) {
    return d >= 0 && d <= static_cast<int32_t>(DType::I64) ? dtype_name(static_cast<DType>(d))
                                                           : "unknown_dtype";
}
const char* safe_op(int32_t o) {
    return o >= 0 && o <= static_cast<int32_t>(Op::Max) ? op_name(static_cast<Op>(o)) : "unknown_op";
}
}  // namespace

std::string describe(const Fingerprint& fp) {
    const auto kind = static_cast<FpKind>(fp.kind);
    std::string s = safe_kind(fp.kind);
    if (kind == FpKind::Barrier) return s + "()";
    s += format("(%s, %" PRIu64, safe_dtype(fp.dtype), fp.count);
    if (fp.op >= 0) s += format(", %s", safe_op(fp.op));
    if (kind == FpKind::Broadcast) s += format(", root=%d", fp.root);
    if (kind == FpKind::Send || kind == FpKind::Recv) s += format(", peer=%d", fp.root);
    return s + ")";
}

std::string label(const Fingerprint& fp) {
    if (fp.seq == 0) return describe(fp);
    return format("collective #%" PRIu64 " ", fp.seq) + describe(fp);
}

std::string find_mismatch(const Fingerprint* all, size_t n) {
    if (n == 0) return "";
    bool same = true;
    for (size_t r = 1; r < n && same; ++r) same = all[r] == all[0];
    if (same) return "";
    std::string msg = format("collective #%" PRIu64 " mismatch: rank 0 called %s", all[0].seq,
                             describe(all[0]).c_str());
    for (size_t r = 1; r < n; ++r) {
        if (all[r] == all[0]) continue;
        msg += format(", rank %zu called %s", r, describe(all[r]).c_str());
        if (all[r].seq != all[0].seq)
            msg += format(" as its collective #%" PRIu64, all[r].seq);
    }
    return msg;
}

}  // namespace ds::comm
