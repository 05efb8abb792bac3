// The config-key audit: every key the parser knows (found by watching the
// parser read keys, nested sections and every optimizer / scheduler type
// included) must be classified as implemented, unsupported when set to a
// non-default value, or ignored (a tuning knob with no effect here). A key
// added to the parser without a row in supported.cpp's tables fails here.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/json_reader.h"
#include "core/error.h"

namespace {

using ds::config::KeyClass;

void record(const std::string& path, void* ctx) { static_cast<std::set<std::string>*>(ctx)->insert(path); }

// Parse `json`, recording every key path the parser asks for (a parse error
// is fine: the keys read before it are recorded).
void collect(const std::string& json, std::set<std::string>& keys) {
    ds::config::detail::set_key_observer(record, &keys);
    try {
        ds::config::parse(json, 1);
    } catch (const ds::Error&) {
    }
    ds::config::detail::set_key_observer(nullptr, nullptr);
}

// {"a": {"b": {"c": {}}}} for "a.b.c", plus a batch size.
std::string nested_empty_object(const std::string& path) {
    std::string open, close;
    size_t start = 0;
    for (;;) {
        const size_t dot = path.find('.', start);
        open += "{\"" + path.substr(start, dot == std::string::npos ? std::string::npos : dot - start) + "\": ";
        close += "}";
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    // The outermost object also carries the batch size.
    return "{\"train_batch_size\": 1, " + open.substr(1) + "{}" + close;
}

std::set<std::string> all_parser_keys() {
    std::set<std::string> keys;
    std::vector<std::string> seeds = {R"({"train_batch_size": 1})"};
    for (const char* t : {"adam", "adamw", "lamb", "lion", "adagrad", "onebitadam", "zerooneadam", "onebitlamb",
                          "muadam", "muadamw", "musgd", "muon", "SGD"})
        seeds.push_back(std::string(R"({"train_batch_size": 1, "optimizer": {"type": ")") + t +
                        R"(", "params": {}}})");
    for (const char* t : {"LRRangeTest", "OneCycle", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR"})
        seeds.push_back(std::string(R"({"train_batch_size": 1, "optimizer": {"type": "adam"}, "scheduler": {"type": ")") +
                        t +
                        R"(", "params": {"cycle_min_lr": 0.001, "cycle_max_lr": 0.01, "total_num_steps": 100}}})");
    for (const char* k : {"hybrid_engine", "compression_training", "data_efficiency", "curriculum_learning",
                          "sparse_attention", "weight_quantization", "compile", "expert_parallel",
                          "nebula", "datastates", "autotuning", "quantize_training"})
        seeds.push_back(std::string(R"({"train_batch_size": 1, ")") + k + R"(": {}})");
    for (const std::string& s : seeds) collect(s, keys);
    // Every key seen is tried as an (empty) object, which opens the nested
    // sections; repeat until nothing new appears.
    std::set<std::string> expanded;
    for (bool grew = true; grew;) {
        grew = false;
        const std::set<std::string> now = keys;
        for (const std::string& k : now) {
            if (!expanded.insert(k).second) continue;
            collect(nested_empty_object(k), keys);
            grew = true;
        }
    }
    return keys;
}

TEST(ConfigKeyAudit, EveryParserKeyIsClassified) {
    const std::set<std::string> keys = all_parser_keys();
    ASSERT_GT(keys.size(), 200u) << "the key walk found too few keys; is the observer wired?";
    if (std::getenv("DS_PRINT_CONFIG_KEYS"))
        for (const std::string& k : keys) std::printf("%s\n", k.c_str());
    std::vector<std::string> unclassified;
    for (const std::string& k : keys)
        if (ds::config::classify_key(k) == KeyClass::Unclassified) unclassified.push_back(k);
    std::string list;
    for (const std::string& k : unclassified) list += "\n  " + k;
    EXPECT_TRUE(unclassified.empty()) << unclassified.size() << " config keys have no classification "
                                      << "(add them to a table in src/config/supported.cpp):" << list;
}

// The reverse: a classification row for a key the parser no longer reads is stale.
TEST(ConfigKeyAudit, EveryClassifiedKeyIsReadByTheParser) {
    const std::set<std::string> keys = all_parser_keys();
    std::string stale;
    for (const std::string& k : ds::config::classified_keys())
        if (!keys.count(k)) stale += "\n  " + k;
    EXPECT_TRUE(stale.empty()) << "classified keys the parser does not read:" << stale;
}

}  // namespace
