#include "engine/rank_agreement.h"

#include <cjson/cJSON.h>

#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "core/error.h"
#include "zero/param_store.h"

namespace ds::agree {

const char* call_name(int32_t call) {
    switch (static_cast<Call>(call)) {
        case Call::Create: return "ds_engine_create";
        case Call::Init: return "ds_engine_init";
        case Call::Backward: return "ds_backward";
        case Call::Step: return "ds_step";
        case Call::SaveCheckpoint: return "ds_save_checkpoint";
        case Call::LoadCheckpoint: return "ds_load_checkpoint";
        case Call::Save16bitModel: return "ds_save_16bit_model";
        case Call::Gather: return "ds_engine_gather";
        case Call::GetFull: return "ds_engine_get_full_*";
        case Call::Forward: return "ds_forward";
    }
    return "an unknown call";
}

uint64_t hash_bytes(const void* data, size_t n, uint64_t h) {
    const unsigned char* b = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

namespace {

// One rank's record: fixed size and layout, so the exchange's count can
// never differ between ranks.
struct Record {
    int32_t call = 0;
    int32_t status = DS_OK;  // this rank's own checks
    uint64_t args = 0;
    int64_t detail = 0;
    uint64_t reserved = 0;
};
static_assert(sizeof(Record) == 32, "Record has no padding");

std::vector<Record> exchange(comm::Communicator& comm, const Record& mine) {
    std::vector<Record> all(static_cast<size_t>(comm.size()));
    comm.allgather(&mine, all.data(), sizeof(Record), DType::U8);
    return all;
}

// Every rank's text (slow path: only after a mismatch, which every rank saw).
std::vector<std::string> exchange_texts(comm::Communicator& comm, const std::string& mine) {
    const size_t world = static_cast<size_t>(comm.size());
    std::vector<int64_t> sizes(world);
    const int64_t n = static_cast<int64_t>(mine.size());
    comm.allgather(&n, sizes.data(), 1, DType::I64);
    int64_t widest = 1;
    for (int64_t s : sizes) widest = std::max(widest, s);
    std::string padded = mine;
    padded.resize(static_cast<size_t>(widest), '\0');
    std::string all(static_cast<size_t>(widest) * world, '\0');
    comm.allgather(padded.data(), all.data(), static_cast<size_t>(widest), DType::U8);
    std::vector<std::string> out(world);
    for (size_t r = 0; r < world; ++r)
        out[r] = all.substr(r * static_cast<size_t>(widest),
                            static_cast<size_t>(std::min<int64_t>(std::max<int64_t>(sizes[r], 0), widest)));
    return out;
}

// Runs f, turning anything it throws into a ds::Error (a rank must always
// reach the exchange, or the others would wait for it).
template <class F>
bool run_checks(F&& f, Error* out) {
    try {
        f();
        return true;
    } catch (const Error& e) {
        *out = e;
    } catch (const std::bad_alloc&) {
        *out = Error(DS_ERR_OUT_OF_MEMORY, "out of host memory");
    } catch (const std::exception& e) {
        *out = Error(DS_ERR_INTERNAL, std::string("internal error: ") + e.what());
    }
    return false;
}

// The checks every agreement shares, in order: the same call everywhere;
// this rank's own failure; another rank's failure. Returns normally when
// every rank is in `mine.call` and every rank's checks passed.
void check_common(const std::vector<Record>& all, int me, const Record& mine, const Error* local) {
    std::string others;
    for (size_t r = 0; r < all.size(); ++r)
        if (all[r].call != mine.call)
            others += format("%s rank %zu is in %s", others.empty() ? "" : ",", r, call_name(all[r].call));
    if (!others.empty())
        fail(DS_ERR_INVALID_STATE,
             "ranks are in different collective calls: this rank (%d) is in %s while%s; every rank must make "
             "the same collective calls in the same order (nothing was done; the engine is unchanged)",
             me, call_name(mine.call), others.c_str());
    if (local) throw *local;
    for (size_t r = 0; r < all.size(); ++r)
        if (all[r].status != DS_OK)
            fail(static_cast<ds_status_t>(all[r].status),
                 "%s failed on rank %zu (%s; see that rank's error); nothing was done on this rank",
                 call_name(mine.call), r, ds_status_string(static_cast<ds_status_t>(all[r].status)));
}

// The first rank whose args differ from rank 0's, or -1.
int first_differing(const std::vector<Record>& all) {
    for (size_t r = 1; r < all.size(); ++r)
        if (all[r].args != all[0].args || all[r].detail != all[0].detail) return static_cast<int>(r);
    return -1;
}

}  // namespace

void enter(comm::Communicator& comm, Call call, const std::function<CallArgs()>& checks) {
    Error local(DS_OK, "");
    CallArgs args;
    const bool ok = run_checks([&] { args = checks(); }, &local);
    if (comm.size() == 1) {
        if (!ok) throw local;
        return;
    }
    Record mine;
    mine.call = static_cast<int32_t>(call);
    mine.status = ok ? DS_OK : local.status();
    mine.args = ok ? args.args : 0;
    mine.detail = ok ? args.detail : 0;
    const std::vector<Record> all = exchange(comm, mine);
    check_common(all, comm.rank(), mine, ok ? nullptr : &local);
    const int d = first_differing(all);
    if (d < 0) return;
    std::string shown;
    if (args.detail_name && all[static_cast<size_t>(d)].detail != all[0].detail)
        shown = format(" (rank 0: %s=%lld, rank %d: %s=%lld)", args.detail_name,
                       static_cast<long long>(all[0].detail), d, args.detail_name,
                       static_cast<long long>(all[static_cast<size_t>(d)].detail));
    fail(DS_ERR_INVALID_ARGUMENT,
         "%s: rank %d passed different arguments than rank 0%s; every rank must pass the same %s (nothing was "
         "done; the engine is unchanged)",
         call_name(mine.call), d, shown.c_str(), args.what);
}

// ---------------------------------------------------------------------------
// Config at create
// ---------------------------------------------------------------------------

namespace {

struct JsonDeleter {
    void operator()(cJSON* p) const { cJSON_Delete(p); }
};
using Json = std::unique_ptr<cJSON, JsonDeleter>;

// Keys that name this rank's local files: they may differ between ranks.
bool local_key(const char* k) {
    return k && (std::strcmp(k, "output_path") == 0 || std::strcmp(k, "output_file") == 0 ||
                 std::strcmp(k, "nvme_path") == 0);
}

void strip_local(cJSON* v) {
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v)) return;
    cJSON* c = v->child;
    while (c) {
        cJSON* next = c->next;
        if (cJSON_IsObject(v) && local_key(c->string))
            cJSON_Delete(cJSON_DetachItemViaPointer(v, c));
        else
            strip_local(c);
        c = next;
    }
}

Json parse_stripped(const std::string& text) {
    Json j(cJSON_ParseWithLength(text.data(), text.size()));
    if (j) strip_local(j.get());
    return j;
}

std::string render(const cJSON* v) {
    if (!v) return "absent";
    std::unique_ptr<char, void (*)(void*)> s(cJSON_PrintUnformatted(v), cJSON_free);
    std::string out = s ? s.get() : "?";
    if (out.size() > 80) out = out.substr(0, 77) + "...";
    return out;
}

std::string child_path(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : parent + "." + key;
}

// The first difference under (a, b): its path and both nodes (either may be null).
bool first_diff(const cJSON* a, const cJSON* b, const std::string& path, std::string* where, const cJSON** da,
                const cJSON** db) {
    auto found = [&](const std::string& p, const cJSON* x, const cJSON* y) {
        *where = p;
        *da = x;
        *db = y;
        return true;
    };
    if (!a || !b) return found(path, a, b);
    if (cJSON_IsObject(a) && cJSON_IsObject(b)) {
        for (const cJSON* c = a->child; c; c = c->next)
            if (first_diff(c, cJSON_GetObjectItemCaseSensitive(b, c->string), child_path(path, c->string), where,
                           da, db))
                return true;
        for (const cJSON* c = b->child; c; c = c->next)
            if (!cJSON_GetObjectItemCaseSensitive(a, c->string)) return found(child_path(path, c->string), nullptr, c);
        return false;
    }
    if (cJSON_IsArray(a) && cJSON_IsArray(b)) {
        const int na = cJSON_GetArraySize(a), nb = cJSON_GetArraySize(b);
        if (na != nb) return found(path, a, b);
        for (int i = 0; i < na; ++i)
            if (first_diff(cJSON_GetArrayItem(a, i), cJSON_GetArrayItem(b, i), format("%s[%d]", path.c_str(), i),
                           where, da, db))
                return true;
        return false;
    }
    if (cJSON_Compare(a, b, /*case_sensitive=*/1)) return false;
    return found(path, a, b);
}

// The node whose direct child is `item` (nullptr when none).
cJSON* find_parent(cJSON* root, const cJSON* item) {
    for (cJSON* c = root ? root->child : nullptr; c; c = c->next) {
        if (c == item) return root;
        if (cJSON* p = find_parent(c, item)) return p;
    }
    return nullptr;
}

}  // namespace

std::string canonical_config(const std::string& resolved_json) {
    Json j = parse_stripped(resolved_json);
    if (!j) return resolved_json;
    std::unique_ptr<char, void (*)(void*)> s(cJSON_PrintUnformatted(j.get()), cJSON_free);
    if (!s) throw std::bad_alloc();
    return s.get();
}

std::string config_difference(const std::string& a, int rank_a, const std::string& b, int rank_b) {
    Json ja = parse_stripped(a), jb = parse_stripped(b);
    if (!ja || !jb) return a == b ? "" : "the resolved config text";
    // Up to three differences (one setting often derives another, e.g.
    // gradient_accumulation_steps and train_batch_size): each found one is
    // made equal in b's tree and the walk repeats.
    std::string out;
    for (int n = 0; n < 3; ++n) {
        std::string where;
        const cJSON *da = nullptr, *db = nullptr;
        if (!first_diff(ja.get(), jb.get(), "", &where, &da, &db)) break;
        out += format("%s%s is %s on rank %d and %s on rank %d", out.empty() ? "" : "; ",
                      where.empty() ? "(the whole config)" : where.c_str(), render(da).c_str(), rank_a,
                      render(db).c_str(), rank_b);
        if (!da || !db || where.empty()) break;
        cJSON* copy = cJSON_Duplicate(da, 1);
        if (!copy || !cJSON_ReplaceItemViaPointer(find_parent(jb.get(), db), const_cast<cJSON*>(db), copy)) {
            cJSON_Delete(copy);
            break;
        }
    }
    return out;
}

namespace {

const char* placement_name(int64_t p) {
    return p == static_cast<int64_t>(Placement::Device) ? "GPU memory (device-resident)" : "host memory";
}

}  // namespace

void agree_on_config(comm::Communicator& comm, const std::function<std::string()>& make_config,
                     const std::function<Placement()>& placement) {
    Error local(DS_OK, "");
    std::string resolved;
    Placement where = Placement::Host;
    const bool ok = run_checks([&] {
        resolved = make_config();
        if (placement) where = placement();
    }, &local);
    if (comm.size() == 1) {
        if (!ok) throw local;
        return;
    }
    Record mine;
    mine.call = static_cast<int32_t>(Call::Create);
    mine.status = ok ? DS_OK : local.status();
    std::string canon;
    if (ok) {
        canon = canonical_config(resolved);
        mine.args = hash_bytes(canon.data(), canon.size());
        mine.detail = static_cast<int64_t>(where);
    }
    const std::vector<Record> all = exchange(comm, mine);
    check_common(all, comm.rank(), mine, ok ? nullptr : &local);
    const int d = first_differing(all);
    if (d < 0) return;
    if (all[static_cast<size_t>(d)].args == all[0].args)  // the same config, buffers in different memory
        fail(DS_ERR_INVALID_ARGUMENT,
             "ranks keep the engine's buffers in different memory: %s on rank 0, %s on rank %d; give every rank the "
             "same kind of options.device (with the same zero_optimization.offload_optimizer)",
             placement_name(all[0].detail), placement_name(all[static_cast<size_t>(d)].detail), d);
    const std::vector<std::string> texts = exchange_texts(comm, canon);
    std::string diff = config_difference(texts[0], 0, texts[static_cast<size_t>(d)], d);
    if (diff.empty()) diff = format("rank %d's resolved config differs from rank 0's", d);
    fail(DS_ERR_INVALID_CONFIG,
         "ranks were given different configs: %s; every rank must resolve the same config (only output_path, "
         "output_file and nvme_path may differ)",
         diff.c_str());
}

// ---------------------------------------------------------------------------
// Parameters at init
// ---------------------------------------------------------------------------

namespace {

std::string describe_param(const Param& p) {
    std::string s = "'" + p.name + "' [";
    for (size_t i = 0; i < p.shape.size(); ++i)
        s += format("%s%lld", i ? ", " : "", static_cast<long long>(p.shape[i]));
    s += p.trainable ? "] trainable" : "] frozen";
    return s;
}

// Descriptions separated by NUL (names cannot contain one).
std::string describe_params(const ParamStore& params) {
    std::string out;
    for (const Param& p : params.all()) {
        out += describe_param(p);
        out += '\0';
    }
    return out;
}

std::vector<std::string> split_nul(const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i)
        if (s[i] == '\0') {
            out.push_back(s.substr(start, i - start));
            start = i + 1;
        }
    return out;
}

std::string param_difference(const std::string& a, const std::string& b, int rank_b) {
    const std::vector<std::string> pa = split_nul(a), pb = split_nul(b);
    for (size_t i = 0; i < std::min(pa.size(), pb.size()); ++i)
        if (pa[i] != pb[i])
            return format("parameter #%zu is %s on rank 0 and %s on rank %d", i, pa[i].c_str(), pb[i].c_str(),
                          rank_b);
    return format("rank 0 registered %zu parameters, rank %d %zu", pa.size(), rank_b, pb.size());
}

}  // namespace

void agree_on_init(comm::Communicator& comm, const ParamStore& params, const std::function<void()>& checks) {
    Error local(DS_OK, "");
    const bool ok = run_checks(checks, &local);
    if (comm.size() == 1) {
        if (!ok) throw local;
        return;
    }
    std::string desc;
    Record mine;
    mine.call = static_cast<int32_t>(Call::Init);
    mine.status = ok ? DS_OK : local.status();
    if (ok) {
        desc = describe_params(params);
        mine.args = hash_bytes(desc.data(), desc.size());
        mine.detail = static_cast<int64_t>(params.size());
    }
    const std::vector<Record> all = exchange(comm, mine);
    check_common(all, comm.rank(), mine, ok ? nullptr : &local);
    const int d = first_differing(all);
    if (d < 0) return;
    const std::vector<std::string> texts = exchange_texts(comm, desc);
    fail(DS_ERR_INVALID_ARGUMENT,
         "ds_engine_init: ranks registered different parameters: %s; every rank must add the same parameters "
         "(names, shapes, trainable flags) in the same order (nothing was done)",
         param_difference(texts[0], texts[static_cast<size_t>(d)], d).c_str());
}

}  // namespace ds::agree
