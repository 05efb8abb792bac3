// Agreement across ranks before any collective work (DESIGN.md §6 "Ranks that disagree").
//
// Every engine entry point that runs collectives first exchanges one fixed
// 32-byte record per rank (one all-gather whose size cannot differ between
// ranks): which call this rank is in, a hash of the arguments every rank
// must pass alike, and whether this rank's own argument/state checks
// passed. When the records differ, or a rank's checks failed, every rank
// throws before posting anything else, so no collective is left half-posted
// and the engine stays usable: the next matching call works.
//
// At create the record carries a hash of the resolved config, and at init
// one of the registered parameters; on a mismatch the ranks exchange the
// full text (slow path, errors only) to name the first difference.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "comm/communicator.h"

namespace ds {
class ParamStore;
}

namespace ds::agree {

// The collective entry points (values travel between ranks; append only).
enum class Call : int32_t {
    Create = 1,
    Init,
    Backward,
    Step,
    SaveCheckpoint,
    LoadCheckpoint,
    Save16bitModel,
    Gather,
    GetFull,
    Forward,
};

// "ds_engine_create", "ds_step", ... (defensive: unknown values from a
// diverged peer read "an unknown call").
const char* call_name(int32_t call);

// FNV-1a 64 over bytes, chainable.
constexpr uint64_t kHashBasis = 1469598103934665603ull;
uint64_t hash_bytes(const void* data, size_t n, uint64_t h = kHashBasis);
inline uint64_t hash_str(const char* s, uint64_t h = kHashBasis) {
    return s ? hash_bytes(s, std::char_traits<char>::length(s) + 1, h) : hash_bytes("", 0, h ^ 0x5a5a);
}

// What one call must agree on. `detail` is a small value shown in messages
// (e.g. the number of names, the load flags); `args` hashes the rest.
struct CallArgs {
    uint64_t args = 0;
    int64_t detail = 0;
    const char* detail_name = nullptr;  // "n", "flags", ...: shown as "n=3"; nullptr: not shown
    const char* what = "arguments";     // what must match, for messages: "names", "tag and flags"
};

// Runs `checks` (this rank's own argument and state checks; they may throw
// ds::Error; they return the arguments to agree on), then agrees with every rank on (call, args, outcome). Throws:
// this rank's own error when its checks failed; DS_ERR_INVALID_STATE when
// ranks are in different calls ("this rank (0) is in ds_step while rank 1 is
// in ds_save_checkpoint"); DS_ERR_INVALID_ARGUMENT when they pass different
// arguments; another rank's status when only its checks failed; DS_ERR_COMM /
// DS_ERR_TIMEOUT from the exchange. In a world of one: just `checks`.
void enter(comm::Communicator& comm, Call call, const std::function<CallArgs()>& checks);

// ds_engine_create: `make_config` parses and resolves this rank's config and
// returns the resolved JSON (it may throw). Every rank's resolved config
// must be the same except for the keys that name local paths
// (output_path, output_file, nvme_path). Throws this rank's own error,
// DS_ERR_INVALID_CONFIG naming the first differing key and its value on
// each rank, or another rank's status when only its config failed.
// `placement`, if given, is called after make_config succeeds and says
// where this rank's engine keeps its buffers (a Placement); every rank must
// say the same, else DS_ERR_INVALID_ARGUMENT names both.
enum class Placement : int64_t { Host = 0, Device = 1 };
void agree_on_config(comm::Communicator& comm, const std::function<std::string()>& make_config,
                     const std::function<Placement()>& placement = {});

// ds_engine_init: runs `checks`, then agrees on the call and on the
// registered parameters (names, shapes, dtypes, trainable flags, order).
// A difference throws DS_ERR_INVALID_ARGUMENT naming the first differing
// parameter on each rank.
void agree_on_init(comm::Communicator& comm, const ParamStore& params, const std::function<void()>& checks);

// The text of the first difference between two resolved configs, as
// "gradient_clipping: 1.0 on rank 0, 0.5 on rank 1" ("" when equal,
// ignoring the local-path keys). Exposed for unit tests.
std::string config_difference(const std::string& a, int rank_a, const std::string& b, int rank_b);

// The resolved config without the keys that may differ per rank (what is hashed).
std::string canonical_config(const std::string& resolved_json);

}  // namespace ds::agree
