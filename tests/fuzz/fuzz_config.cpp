// Fuzz target for the config parser (src/config): any bytes as config text
// must either be rejected with DS_ERR_INVALID_CONFIG / DS_ERR_UNSUPPORTED (a
// message naming the problem), or parse into a Config whose resolved JSON
// parses again to the same resolved JSON (to_json is a fixed point), whose
// engine check either passes or says DS_ERR_UNSUPPORTED, and whose ignored
// settings are well formed. Nothing else: no crash, no other exception, no
// UB under the sanitizers. A first byte below 8 (no JSON text starts with
// one) is taken as world size - 1, so batch resolution across ranks is
// exercised too.
// Built for libFuzzer as `fuzz_config` with clang; replay_main.cpp runs it
// over tests/fuzz/corpus/config as an ordinary test and mutates it for a
// bounded time (fuzz.config_mutate).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "config/config.h"
#include "config/parse_internal.h"
#include "core/error.h"

namespace {

bool config_status(ds_status_t s) { return s == DS_ERR_INVALID_CONFIG || s == DS_ERR_UNSUPPORTED; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    int64_t world = 1;
    if (size > 0 && data[0] < 8) {
        world = 1 + data[0];
        text.remove_prefix(1);
    }
    ds::config::Config c;
    try {
        c = ds::config::parse(text, world);
    } catch (const ds::Error& e) {
        if (!config_status(e.status()) || e.what()[0] == '\0') __builtin_trap();
        // Rejected: replay_main builds further mutants on accepted configs
        // only (libFuzzer's -1: keep out of the corpus; its coverage finds the
        // error paths anyway).
        return -1;
    }
    // Resolved JSON is a fixed point of parse . to_json.
    const std::string once = ds::config::to_json(c);
    std::string twice;
    try {
        twice = ds::config::to_json(ds::config::parse(once, world));
    } catch (const ds::Error&) {
        __builtin_trap();  // the resolved config must re-parse
    }
    if (once != twice) __builtin_trap();
    try {
        ds::config::check_supported(c);
    } catch (const ds::Error& e) {
        if (e.status() != DS_ERR_UNSUPPORTED) __builtin_trap();
    }
    // Every ignored setting comes from the ignored table. A key whose class
    // depends on its value is classed by its other row: offload_param.device
    // ("cpu" ignored, "nvme" refused) by its policy row, offload_optimizer.device
    // ("cpu" ignored, "nvme" built) as implemented.
    static const std::vector<std::string> ignored_table = ds::config::detail::ignored_keys();
    for (const ds::config::IgnoredSetting& i : ds::config::ignored_settings(c)) {
        const ds::config::KeyClass cls = ds::config::classify_key(i.key);
        const bool in_table = std::find(ignored_table.begin(), ignored_table.end(), i.key) != ignored_table.end();
        if (i.key.empty() || i.value.empty() || i.why.empty() || !in_table ||
            cls == ds::config::KeyClass::Unclassified)
            __builtin_trap();
    }
    return 0;
}
