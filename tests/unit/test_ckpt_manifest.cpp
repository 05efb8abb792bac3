// manifest.json round trip (doubles bit for bit), its self-checksum, its
// structural checks, and the commit protocol's tag rules, leftover cleanup,
// tag replacement and `latest` resolution.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "ckpt/commit.h"
#include "core/crc32c.h"
#include "ckpt/file_io.h"
#include "ckpt/manifest.h"
#include "ckpt/reader.h"
#include "core/error.h"

namespace {

using namespace ds;
using namespace ds::ckpt;

Manifest sample() {
    Manifest m;
    m.library_version = "0.1.0";
    m.tag = "global_step7";
    m.world_size = 2;
    m.zero_stage = 1;
    m.working_dtype = "BF16";
    m.grad_accum_dtype = "F32";
    m.global_steps = 7;
    m.global_samples = 56;
    m.micro_steps = 14;
    m.skipped_steps = 1;
    OptimizerRecord o;
    o.type = "AdamW";
    o.step = 6;
    o.state_names = {"exp_avg", "exp_avg_sq"};
    o.lr = 0.1 + 0.2;                         // 0.30000000000000004
    o.beta1 = 1.0 / 3.0;
    o.beta2 = std::numeric_limits<double>::denorm_min();
    m.optimizer = o;
    m.scheduler = SchedulerRecord{"WarmupLR", 5};
    m.loss_scaler_dynamic = true;
    m.loss_scaler = {32768.0, 7, 3, 2};
    m.params = {{"layer.0/w \"q\"", {3, 2}, 6, "BF16", true}, {"frozen", {4}, 4, "BF16", false}};
    m.partitions = {{0, "optim_rank0.safetensors", {{"layer.0/w \"q\"", 0, 4}}},
                    {1, "optim_rank1.safetensors", {{"layer.0/w \"q\"", 4, 2}}}};
    m.files = {{"model.safetensors", 123, 0xDEADBEEFu}, {"optim_rank0.safetensors", 45, 1},
               {"optim_rank1.safetensors", 67, 0xFFFFFFFFu}};
    m.config_json = "{\"train_batch_size\":8,\"x\":[1,2.5]}";
    m.client_state_json = "{\"epoch\":3,\"name\":\"r\\u00e9sum\\u00e9\"}";
    return m;
}

uint64_t bits(double d) {
    uint64_t u;
    std::memcpy(&u, &d, 8);
    return u;
}

TEST(CkptManifest, RoundTripExact) {
    const Manifest a = sample();
    const std::string text = manifest_to_json(a);
    const Manifest b = parse_manifest(text, "m.json");
    EXPECT_EQ(b.tag, a.tag);
    EXPECT_EQ(b.world_size, 2);
    EXPECT_EQ(b.zero_stage, 1);
    EXPECT_EQ(b.working_dtype, "BF16");
    EXPECT_EQ(b.global_steps, 7);
    EXPECT_EQ(b.global_samples, 56);
    EXPECT_EQ(b.micro_steps, 14);
    EXPECT_EQ(b.skipped_steps, 1);
    ASSERT_TRUE(b.optimizer.has_value());
    EXPECT_EQ(b.optimizer->type, "AdamW");
    EXPECT_EQ(b.optimizer->step, 6);
    EXPECT_EQ(b.optimizer->state_names, a.optimizer->state_names);
    EXPECT_EQ(bits(b.optimizer->lr), bits(a.optimizer->lr));
    EXPECT_EQ(bits(b.optimizer->beta1), bits(a.optimizer->beta1));
    EXPECT_EQ(bits(b.optimizer->beta2), bits(a.optimizer->beta2));
    ASSERT_TRUE(b.scheduler.has_value());
    EXPECT_EQ(b.scheduler->type, "WarmupLR");
    EXPECT_EQ(b.scheduler->last_batch_iteration, 5);
    EXPECT_TRUE(b.loss_scaler_dynamic);
    EXPECT_EQ(b.loss_scaler.cur_scale, 32768.0);
    EXPECT_EQ(b.loss_scaler.cur_iter, 7);
    EXPECT_EQ(b.loss_scaler.last_overflow_iter, 3);
    EXPECT_EQ(b.loss_scaler.cur_hysteresis, 2);
    EXPECT_TRUE(b.rng_states.empty());
    ASSERT_EQ(b.params.size(), 2u);
    EXPECT_EQ(b.params[0].name, "layer.0/w \"q\"");
    EXPECT_EQ(b.params[0].shape, (Shape{3, 2}));
    EXPECT_EQ(b.params[0].numel, 6);
    EXPECT_FALSE(b.params[1].trainable);
    ASSERT_EQ(b.partitions.size(), 2u);
    EXPECT_EQ(b.partitions[1].fragments[0].offset, 4);
    EXPECT_EQ(b.partitions[1].fragments[0].numel, 2);
    ASSERT_EQ(b.files.size(), 3u);
    EXPECT_EQ(b.file("model.safetensors")->crc32c, 0xDEADBEEFu);
    EXPECT_EQ(b.file("optim_rank1.safetensors")->crc32c, 0xFFFFFFFFu);
    EXPECT_EQ(b.config_json, a.config_json);
    EXPECT_EQ(b.client_state_json, "{\"epoch\":3,\"name\":\"r\xC3\xA9sum\xC3\xA9\"}");
    // The sealed text ends with the checksum key.
    EXPECT_NE(text.find("\"manifest_crc32c\": "), std::string::npos);
}

ds_status_t parse_status(const std::string& text, std::string* msg) {
    try {
        parse_manifest(text, "m.json");
        return DS_OK;
    } catch (const Error& e) {
        *msg = e.what();
        return e.status();
    }
}

// Re-seals edited manifest text so a structural check (not the checksum) fires.
std::string reseal(std::string text) {
    const size_t pos = text.rfind("\"manifest_crc32c\"");
    text = text.substr(0, pos);
    const uint32_t crc = ds::crc32c(0, text.data(), text.size());
    return text + "\"manifest_crc32c\": " + std::to_string(crc) + "\n}\n";
}

std::string replace_once(std::string s, const std::string& a, const std::string& b) {
    const size_t pos = s.find(a);
    EXPECT_NE(pos, std::string::npos) << a;
    return pos == std::string::npos ? s : s.replace(pos, a.size(), b);
}

TEST(CkptManifest, SelfChecksumDetectsAnyEdit) {
    const std::string text = manifest_to_json(sample());
    std::string msg;
    // A semantically valid edit (a different lr) is still caught.
    const std::string edited = replace_once(text, "\"lr\": 0.30000000000000004", "\"lr\": 0.30000000000000005");
    EXPECT_EQ(parse_status(edited, &msg), DS_ERR_FORMAT);
    EXPECT_NE(msg.find("m.json is corrupt"), std::string::npos) << msg;
    EXPECT_EQ(parse_status(text.substr(0, text.size() / 2), &msg), DS_ERR_FORMAT);
    EXPECT_EQ(parse_status("", &msg), DS_ERR_FORMAT);
    EXPECT_EQ(parse_status(reseal(edited), &msg), DS_OK) << msg;
}

TEST(CkptManifest, StructuralChecks) {
    const std::string text = manifest_to_json(sample());
    struct Case {
        const char* from;
        const char* to;
        const char* expect;
    } cases[] = {
        {"\"format_version\": 1", "\"format_version\": 2", "newer"},
        {"\"format\": \"deepspeed_c.checkpoint\"", "\"format\": \"other\"", "format"},
        {"\"world_size\": 2", "\"world_size\": 1", "partition.optim_rank1.safetensors.rank"},
        {"\"offset\": 4", "\"offset\": 5", "leaves a gap"},
        {"\"offset\": 4", "\"offset\": 3", "overlaps"},
        {"\"numel\": 2", "\"numel\": 1", "cover 5 of 6"},
        {"\"optim_rank1.safetensors\": {\n      \"size\"", "\"optim_rank9.safetensors\": {\n      \"size\"",
         "not listed"},
        {"\"cur_hysteresis\": 2", "\"cur_hysteresis\": 0", "loss_scaler.cur_hysteresis"},
        {"\"global_steps\": 7", "\"global_steps\": -7", "counters.global_steps"},
        {"\"global_steps\": 7", "\"global_steps\": 7.5", "counters.global_steps"},
        {"\"dtype\": \"BF16\",\n      \"trainable\": false", "\"dtype\": \"Q7\",\n      \"trainable\": false",
         "params.frozen.dtype"},
        {"\"trainable\": true", "\"trainable\": false", "frozen parameter"},
        {"\"rng_states\": []", "\"rng_states\": {}", "rng_states"},
    };
    for (const Case& c : cases) {
        std::string msg;
        EXPECT_EQ(parse_status(reseal(replace_once(text, c.from, c.to)), &msg), DS_ERR_FORMAT) << c.from;
        EXPECT_NE(msg.find(c.expect), std::string::npos) << c.from << " -> " << msg;
        EXPECT_NE(msg.find("m.json"), std::string::npos) << msg;
    }
}

TEST(CkptCommit, TagRules) {
    for (const char* bad : {"", "a/b", ".", "..", "latest", "latest.tmp", "x.tmp-1", "x.old-2", "tab\there"}) {
        try {
            check_tag(bad, "tag");
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const Error& e) {
            EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT) << bad;
        }
    }
    EXPECT_NO_THROW(check_tag("global_step10", "tag"));
    EXPECT_NO_THROW(check_tag("epoch 3 (best)", "tag"));
    EXPECT_THROW(check_tag(std::string(256, 'a'), "tag"), Error);
    EXPECT_TRUE(is_leftover_name("global_step1.tmp-0123456789abcdef"));
    EXPECT_TRUE(is_leftover_name("t.old-0123456789ABCDEF"));
    EXPECT_TRUE(is_leftover_name("latest.tmp"));
    EXPECT_FALSE(is_leftover_name("global_step1"));
    EXPECT_FALSE(is_leftover_name("x.tmp-123"));
}

struct TempDir {
    std::string path;
    TempDir() {
        char buf[] = "/tmp/ds_ckpt_XXXXXX";
        path = mkdtemp(buf);
    }
    ~TempDir() { remove_tree(path); }
};

void commit_tag(const std::string& dir, const std::string& tag, const std::string& payload) {
    TagWriter w(dir, tag);
    FileWriter f(w.file_path("data.bin"));
    f.write(payload.data(), payload.size());
    w.add_file("data.bin", f.finish());
    w.commit("{\"payload\": \"" + payload + "\"}\n");
}

TEST(CkptCommit, CommitReplaceLatestAndLeftovers) {
    TempDir t;
    const std::string dir = t.path + "/sub/ckpts";  // created on demand
    commit_tag(dir, "a", "first");
    EXPECT_EQ(read_text_file(dir + "/latest", 100), "a");  // no trailing newline
    EXPECT_EQ(read_text_file(dir + "/a/data.bin", 100), "first");
    // Leftovers of an interrupted save are removed by the next save...
    make_dirs(dir + "/b.tmp-0123456789abcdef");
    make_dirs(dir + "/a.old-0123456789abcdef");
    make_dirs(dir + "/keep.tmp-xyz");  // not our pattern: left alone
    { FileWriter f(dir + "/latest.tmp"); f.finish(); }
    commit_tag(dir, "a", "second");  // ...and an existing tag is replaced
    EXPECT_EQ(read_text_file(dir + "/a/data.bin", 100), "second");
    EXPECT_EQ(path_kind(dir + "/b.tmp-0123456789abcdef"), PathKind::Missing);
    EXPECT_EQ(path_kind(dir + "/a.old-0123456789abcdef"), PathKind::Missing);
    EXPECT_EQ(path_kind(dir + "/latest.tmp"), PathKind::Missing);
    EXPECT_EQ(path_kind(dir + "/keep.tmp-xyz"), PathKind::Directory);
    std::vector<std::string> names = list_dir(dir);
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"a", "keep.tmp-xyz", "latest"}));
    // An abandoned writer removes its temporary directory.
    { TagWriter w(dir, "c"); }
    names = list_dir(dir);
    EXPECT_EQ(names.size(), 3u);
}

TEST(CkptCommit, ResolveTag) {
    TempDir t;
    auto status = [&](const char* tag, std::string* msg) {
        try {
            resolve_tag(t.path, tag);
            return DS_OK;
        } catch (const Error& e) {
            *msg = e.what();
            return e.status();
        }
    };
    std::string msg;
    EXPECT_EQ(status(nullptr, &msg), DS_ERR_NOT_FOUND);
    EXPECT_NE(msg.find("latest"), std::string::npos);
    commit_tag(t.path, "s1", "x");
    EXPECT_EQ(resolve_tag(t.path, nullptr).tag, "s1");
    replace_file_atomically(t.path, "latest", "gone\n");
    EXPECT_EQ(status(nullptr, &msg), DS_ERR_NOT_FOUND);
    EXPECT_NE(msg.find("/latest' names tag 'gone'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(t.path + "/gone' does not exist"), std::string::npos) << msg;
    replace_file_atomically(t.path, "latest", "s1\n");  // a trailing newline is tolerated
    EXPECT_EQ(resolve_tag(t.path, nullptr).dir, t.path + "/s1");
    replace_file_atomically(t.path, "latest", "");
    EXPECT_EQ(status(nullptr, &msg), DS_ERR_FORMAT);
    EXPECT_EQ(status("nope", &msg), DS_ERR_NOT_FOUND);
    EXPECT_EQ(status("a/b", &msg), DS_ERR_INVALID_ARGUMENT);
    EXPECT_THROW(resolve_tag(t.path + "/missing", "s1"), Error);
    // A tag directory without a manifest is not a checkpoint.
    make_dirs(t.path + "/bare");
    try {
        read_manifest(resolve_tag(t.path, "bare").dir);
        ADD_FAILURE();
    } catch (const Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_NOT_FOUND);
        EXPECT_NE(std::string(e.what()).find("bare/manifest.json"), std::string::npos);
    }
}

}  // namespace
