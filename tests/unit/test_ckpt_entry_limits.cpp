// Saved but not loadable (issue 8): inputs a save accepted but a load
// refused. Each case must now be either refused where it enters
// (ds_engine_add_param for names and shapes, ds_save_checkpoint for tags)
// with DS_ERR_INVALID_ARGUMENT naming the limit, or saved AND loaded.
#include <cstdint>
#include <string>

#include "test_ckpt_util.h"

namespace {

using namespace ckpt_test;

// The readers' limits, written out (not taken from the library's constants,
// so that the test states them independently): safetensors headers of at
// most 100,000,000 bytes; JSON integers exact below 2^53; file names of at
// most 255 bytes, of which a tag's temporary "<tag>.tmp-<16 hex>" adds 21.
constexpr uint64_t kHeaderLimit = 100000000;
constexpr int64_t kMaxDim = (int64_t{1} << 53) - 1;
constexpr size_t kMaxTag = 255 - 21;

const char* kPlainConfig = "{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": \"AdamW\"}}";

// Adds parameters named `names` with `shape` to a fresh engine. If every one
// is accepted, the engine is initialised, saved and loaded again, and both
// must succeed. If one is refused, the status must be INVALID_ARGUMENT and
// the message must contain `why`.
void refused_or_round_trip(const std::vector<std::string>& names, std::vector<int64_t> shape, const char* why) {
    ds_engine_t* e = nullptr;
    ASSERT_EQ(ds_engine_create(kPlainConfig, nullptr, &e), DS_OK) << ds_last_error();
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n > 0 ? n : 1), 0.5f);
    DLTensor t = f32_tensor(v.data(), shape.data(), static_cast<int32_t>(shape.size()));
    // Strides for a zero-size tensor with a huge dimension: contiguous ones
    // would overflow, and the engine copies no element anyway.
    std::vector<int64_t> strides(shape.size(), 1);
    if (n == 0) t.strides = strides.data();
    for (const std::string& name : names) {
        const ds_status_t s = ds_engine_add_param(e, name.c_str(), &t, DS_PARAM_TRAINABLE);
        if (s != DS_OK) {
            EXPECT_EQ(s, DS_ERR_INVALID_ARGUMENT) << ds_last_error();
            EXPECT_NE(std::string(ds_last_error()).find(why), std::string::npos) << ds_last_error();
            ds_engine_destroy(e);
            return;
        }
    }
    ASSERT_EQ(ds_engine_init(e), DS_OK) << ds_last_error();
    TempDir d;
    ASSERT_EQ(ds_save_checkpoint(e, d.path.c_str(), "t", nullptr), DS_OK) << ds_last_error();
    EXPECT_EQ(ds_load_checkpoint(e, d.path.c_str(), nullptr, 0, nullptr), DS_OK)
        << "saved but not loadable: " << ds_last_error();
    ds_engine_destroy(e);
}

TEST(CkptEntryLimits, OneNameLongerThanTheReadersHeaderLimit) {
    refused_or_round_trip({std::string(kHeaderLimit, 'n')}, {1}, "100000000");
}

TEST(CkptEntryLimits, ManyLongNamesTogetherPastTheHeaderLimit) {
    std::vector<std::string> names;
    for (int i = 0; i < 26; ++i) names.push_back(std::to_string(i) + std::string(4000000, 'x'));
    refused_or_round_trip(names, {1}, "100000000");
}

TEST(CkptEntryLimits, ZeroSizeParameterWithHugeDimension) {
    refused_or_round_trip({"z"}, {0, int64_t{1} << 60}, "2^53");
}

TEST(CkptEntryLimits, MetadataName) { refused_or_round_trip({"__metadata__"}, {2}, "__metadata__"); }

TEST(CkptEntryLimits, InvalidUtf8Name) { refused_or_round_trip({"bad\xff\xfe"}, {2}, "UTF-8"); }

TEST(CkptEntryLimits, NamesJustInsideTheLimitsRoundTrip) {
    refused_or_round_trip({"a/b.weight", std::string(1000, 'q'), "\xc3\xa9t\xc3\xa9"}, {2, 3}, "<none>");
    refused_or_round_trip({"z"}, {0, kMaxDim}, "<none>");
}

// Tags: refused at save, or saved and loaded back through `latest`.
void tag_refused_or_round_trip(const std::string& tag, const char* why) {
    SmallEngine eng;
    TempDir d;
    const ds_status_t s = ds_save_checkpoint(eng.e, d.path.c_str(), tag.c_str(), nullptr);
    if (s != DS_OK) {
        EXPECT_EQ(s, DS_ERR_INVALID_ARGUMENT) << ds_last_error();
        EXPECT_NE(std::string(ds_last_error()).find(why), std::string::npos) << ds_last_error();
        return;
    }
    EXPECT_EQ(ds_load_checkpoint(eng.e, d.path.c_str(), nullptr, 0, nullptr), DS_OK)
        << "tag '" << tag << "' saved but not loadable via latest: " << ds_last_error();
    EXPECT_EQ(ds_load_checkpoint(eng.e, d.path.c_str(), tag.c_str(), 0, nullptr), DS_OK)
        << "tag '" << tag << "' saved but not loadable by name: " << ds_last_error();
}

TEST(CkptEntryLimits, TagWithTrailingSpace) { tag_refused_or_round_trip("step1 ", "space"); }
TEST(CkptEntryLimits, TagWithLeadingSpace) { tag_refused_or_round_trip(" step1", "space"); }
TEST(CkptEntryLimits, TagInvalidUtf8) { tag_refused_or_round_trip("step\xc0\xaf", "UTF-8"); }

TEST(CkptEntryLimits, TagLengths) {
    for (size_t len : {size_t{1}, size_t{100}, kMaxTag, kMaxTag + 1, size_t{235},
                       size_t{240}, size_t{255}, size_t{256}})
        tag_refused_or_round_trip(std::string(len, 't'), "234");
}

}  // namespace

namespace {

using namespace ckpt_test;

// client_state_json nested as deep as the JSON reader allows at save: inside
// the manifest it sits one level deeper. Refused at save, or saved and loaded.
TEST(CkptEntryLimits, DeeplyNestedClientState) {
    for (int depth : {60, 62, 63, 64, 65, 998, 999, 1000}) {
        SmallEngine eng;
        TempDir d;
        const std::string cs = std::string(static_cast<size_t>(depth), '[') + std::string(static_cast<size_t>(depth), ']');
        const ds_status_t s = ds_save_checkpoint(eng.e, d.path.c_str(), "t", cs.c_str());
        if (s != DS_OK) {
            EXPECT_EQ(s, DS_ERR_INVALID_ARGUMENT) << depth << ": " << ds_last_error();
            continue;
        }
        EXPECT_EQ(ds_load_checkpoint(eng.e, d.path.c_str(), nullptr, 0, nullptr), DS_OK)
            << "client state of depth " << depth << " saved but not loadable: " << ds_last_error();
    }
}

}  // namespace
