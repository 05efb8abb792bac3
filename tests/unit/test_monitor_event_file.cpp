// TensorBoard event files: TFRecord framing with masked CRC32C (values
// computed independently with a bit-at-a-time CRC32C in Python from the
// definition: reflected polynomial 0x82F63B78, mask = rotr15 + 0xa282ead8),
// the hand-encoded Event/Summary protobuf bytes (worked out by hand from the
// wire format), and a written file read back record by record.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/error.h"
#include "monitor/event_file.h"
#include "monitor/tensorboard_writer.h"

namespace {

using namespace ds::monitor;
namespace fs = std::filesystem;

std::string bytes(std::initializer_list<unsigned> v) {
    std::string s;
    for (unsigned b : v) s.push_back(static_cast<char>(b));
    return s;
}

uint32_t le32(const std::string& s, size_t at) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
    return v;
}

TEST(MonitorEventFile, MaskedCrc32cKnownVectors) {
    EXPECT_EQ(masked_crc32c("", 0), 0xa282ead8u);
    EXPECT_EQ(masked_crc32c("123456789", 9), 0xc78ab0e5u);
    const std::string zero8(8, '\0');
    EXPECT_EQ(masked_crc32c(zero8.data(), 8), 0x07980329u);
    EXPECT_EQ(masked_crc32c("hello tensorboard", 17), 0xd8746fa4u);
}

TEST(MonitorEventFile, TfRecordFraming) {
    const std::string data = "hello tensorboard";
    const std::string rec = tfrecord_frame(data);
    ASSERT_EQ(rec.size(), 8 + 4 + data.size() + 4);
    EXPECT_EQ(rec.substr(0, 8), bytes({17, 0, 0, 0, 0, 0, 0, 0}));  // uint64 length, little endian
    EXPECT_EQ(le32(rec, 8), masked_crc32c(rec.data(), 8));
    EXPECT_EQ(rec.substr(12, data.size()), data);
    EXPECT_EQ(le32(rec, 12 + data.size()), 0xd8746fa4u);
    const std::string empty = tfrecord_frame("");
    EXPECT_EQ(le32(empty, 8), 0x07980329u);  // masked CRC of eight zero bytes
    EXPECT_EQ(le32(empty, 12), 0xa282ead8u);
}

TEST(MonitorEventFile, ScalarEventProtobufBytes) {
    // Event{wall_time=1.5 (field 1, fixed64), step=3 (field 2, varint),
    //       summary (field 5) = Summary{value (1) = Value{tag (1) = "a", simple_value (2, fixed32) = 2.0f}}}
    const std::string want = bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0x10, 0x03, 0x2A, 0x0A, 0x0A, 0x08,
                                    0x0A, 0x01, 'a', 0x15, 0, 0, 0, 0x40});
    EXPECT_EQ(encode_scalar_event(1.5, 3, "a", 2.0f), want);
    // step 300 is a two-byte varint (0xAC 0x02); a negative step takes ten bytes.
    const std::string big = encode_scalar_event(1.5, 300, "a", 2.0f);
    EXPECT_EQ(big.substr(9, 3), bytes({0x10, 0xAC, 0x02}));
    EXPECT_EQ(encode_scalar_event(1.5, -1, "a", 2.0f).size(), want.size() + 9);
}

TEST(MonitorEventFile, FileVersionEvent) {
    const std::string want = bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F, 0x1A, 13}) + "brain.Event:2";
    EXPECT_EQ(encode_file_version_event(1.0), want);
}

TEST(MonitorEventFile, WrittenFileHoldsVersionThenScalars) {
    const fs::path root = fs::temp_directory_path() / ("ds_tb_" + std::to_string(getpid()));
    fs::remove_all(root);
    std::string file;
    {
        TensorBoardMonitor tb(root.string(), "job");
        tb.write_events({{"Train/Samples/lr", 0.5, 8}, {"Train/Samples/loss_scale", 1024.0, 8}});
        file = tb.file();
        EXPECT_EQ(fs::path(file).parent_path(), root / "job");
        EXPECT_EQ(fs::path(file).filename().string().rfind("events.out.tfevents.", 0), 0u) << file;
    }
    std::ifstream in(file, std::ios::binary);
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t at = 0;
    int records = 0;
    std::string last;
    while (at < all.size()) {
        ASSERT_GE(all.size() - at, 12u);
        uint64_t len = 0;
        for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<unsigned char>(all[at + i]);
        ASSERT_EQ(le32(all, at + 8), masked_crc32c(all.data() + at, 8));
        ASSERT_LE(at + 12 + len + 4, all.size());
        const std::string data = all.substr(at + 12, len);
        ASSERT_EQ(le32(all, at + 12 + len), masked_crc32c(data.data(), data.size()));
        if (records == 0) EXPECT_NE(data.find("brain.Event:2"), std::string::npos);
        last = data;
        at += 12 + len + 4;
        ++records;
    }
    EXPECT_EQ(records, 3);
    EXPECT_NE(last.find("Train/Samples/loss_scale"), std::string::npos);
    fs::remove_all(root);
}

TEST(MonitorEventFile, UncreatableDirectoryIsAnIoErrorNamingIt) {
    const fs::path root = fs::temp_directory_path() / ("ds_tb_file_" + std::to_string(getpid()));
    { std::ofstream(root.string()) << "x"; }  // a file where the directory would go
    try {
        TensorBoardMonitor tb(root.string(), "job");
        FAIL() << "expected DS_ERR_IO";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_IO);
        EXPECT_NE(std::string(e.what()).find("tensorboard"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(root.string()), std::string::npos) << e.what();
    }
    fs::remove(root);
}

}  // namespace
