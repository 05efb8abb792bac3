// Fuzz target for the checkpoint manifest reader (ckpt/manifest_read.cpp).
// Any input must either parse into a manifest whose invariants hold, or be
// rejected with DS_ERR_FORMAT; nothing else (no crash, no other status, no
// out-of-bounds read under the sanitizers). A manifest that parses must
// also survive a round trip: written back (manifest_to_json) and parsed
// again, it gives the same manifest — so whatever the reader accepts, the
// writer can reproduce and the reader accepts again. Each input is also
// tried re-sealed (see below), so mutations reach past the checksum.
// Built for libFuzzer as `fuzz_manifest` with clang; replay_main.cpp runs
// it over tests/fuzz/corpus/manifest as an ordinary test.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/crc32c.h"
#include "ckpt/manifest.h"
#include "core/error.h"

namespace {

void check_invariants(const ds::ckpt::Manifest& m) {
    if (m.world_size < 1 || m.zero_stage < 0 || m.zero_stage > 3) __builtin_trap();
    for (const ds::ckpt::RankPartition& r : m.partitions) {
        if (r.rank < 0 || r.rank >= m.world_size || m.file(r.file) == nullptr) __builtin_trap();
        for (const ds::ckpt::Fragment& f : r.fragments)
            if (f.offset < 0 || f.numel < 1) __builtin_trap();
    }
    for (const ds::ckpt::ManifestParam& p : m.params)
        if (p.numel < 0 || p.name.empty()) __builtin_trap();
    if (m.optimizer && !(m.optimizer->lr >= 0 && m.optimizer->beta1 >= 0 && m.optimizer->beta1 < 1 &&
                         m.optimizer->beta2 >= 0 && m.optimizer->beta2 < 1))
        __builtin_trap();
    if (!(m.loss_scaler.cur_scale > 0)) __builtin_trap();
}

bool same(const ds::ckpt::Manifest& a, const ds::ckpt::Manifest& b) {
    if (a.tag != b.tag || a.world_size != b.world_size || a.zero_stage != b.zero_stage ||
        a.global_steps != b.global_steps || a.params.size() != b.params.size() ||
        a.partitions.size() != b.partitions.size() || a.files.size() != b.files.size() ||
        a.config_json != b.config_json || a.client_state_json != b.client_state_json ||
        a.optimizer.has_value() != b.optimizer.has_value() || a.scheduler.has_value() != b.scheduler.has_value())
        return false;
    for (size_t i = 0; i < a.params.size(); ++i)
        if (a.params[i].name != b.params[i].name || a.params[i].shape != b.params[i].shape) return false;
    if (a.optimizer && (a.optimizer->lr != b.optimizer->lr || a.optimizer->type != b.optimizer->type))
        return false;
    return true;
}

void run_one(const std::string& text) {
    ds::ckpt::Manifest m;
    try {
        m = ds::ckpt::parse_manifest(text, "fuzz-input");
    } catch (const ds::Error& e) {
        if (e.status() != DS_ERR_FORMAT) __builtin_trap();
        return;
    }
    check_invariants(m);
    try {
        const ds::ckpt::Manifest again = ds::ckpt::parse_manifest(ds::ckpt::manifest_to_json(m), "round-trip");
        if (!same(m, again)) __builtin_trap();
    } catch (const ds::Error&) {
        __builtin_trap();  // the writer produced what the reader refuses
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    run_one(text);
    // Almost every mutation breaks the self-checksum, which would stop the
    // reader at its first check: the input is also tried re-sealed (its
    // manifest_crc32c recomputed, as a forger would), reaching every rule.
    const size_t seal = text.rfind("\"manifest_crc32c\"");
    if (seal != std::string::npos) {
        const std::string resealed = text.substr(0, seal) + "\"manifest_crc32c\": " +
                                     std::to_string(ds::crc32c(0, text.data(), seal)) + "\n}\n";
        if (resealed != text) run_one(resealed);
    }
    return 0;
}
