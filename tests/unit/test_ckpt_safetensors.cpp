// safetensors: the exact bytes the writer produces for a small case, a
// round trip through a file, and one rejection per validation rule (each
// DS_ERR_FORMAT naming the file).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/crc32c.h"
#include "ckpt/file_io.h"
#include "ckpt/safetensors.h"
#include "core/error.h"

namespace {

using namespace ds;
using namespace ds::ckpt;

std::string le64(uint64_t n) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
    return s;
}

// A file image: length prefix + header JSON (unpadded) + data bytes.
std::string image(const std::string& json, size_t data_bytes) {
    return le64(json.size()) + json + std::string(data_bytes, '\x11');
}

ds_status_t parse_status(const std::string& img, std::string* msg = nullptr) {
    try {
        parse_safetensors(reinterpret_cast<const uint8_t*>(img.data()), img.size(), "t.safetensors");
        return DS_OK;
    } catch (const Error& e) {
        if (msg) *msg = e.what();
        return e.status();
    }
}

TEST(CkptSafetensors, WriterHeaderBytes) {
    std::vector<StTensorSpec> specs{{"a", DType::F32, {2}}, {"b", DType::BF16, {1, 3}}};
    const std::string h = make_safetensors_header(specs, {{"format", "pt"}});
    std::string json =
        "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"BF16\",\"shape\":[1,3],\"data_offsets\":[8,14]}}";
    while (json.size() % 8) json += ' ';
    EXPECT_EQ(h, le64(json.size()) + json);
}

TEST(CkptSafetensors, RoundTripThroughFile) {
    char dir[] = "/tmp/ds_st_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    const std::string path = std::string(dir) + "/x.safetensors";
    const float a[3] = {1.5f, -2.0f, 3.25f};
    const uint16_t b[2] = {0x3F80, 0xC000};
    {
        SafetensorsWriter w(path, {{"w/0/master", DType::F32, {3}}, {"b", DType::F16, {2, 1}}, {"e", DType::F32, {0}}},
                            {{"rank", "0"}});
        w.write(a, sizeof a);
        w.write(b, 2);  // in pieces
        w.write(reinterpret_cast<const uint8_t*>(b) + 2, 2);
        FileSummary s = w.finish();
        EXPECT_EQ(s.size, FileReader(path).size());
        EXPECT_EQ(s.crc32c, FileReader(path).checksum());
    }
    FileBuffer buf = read_file(path);
    StHeader h = parse_safetensors(buf.data(), buf.size, path);
    ASSERT_EQ(h.tensors.size(), 3u);
    EXPECT_EQ(h.metadata.at("rank"), "0");
    EXPECT_EQ(h.data_start % 8, 0u);
    const StTensor* t = h.find("w/0/master");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype, "F32");
    EXPECT_EQ(t->shape, Shape{3});
    EXPECT_EQ(std::memcmp(buf.data() + h.data_start + t->begin, a, sizeof a), 0);
    EXPECT_EQ(h.find("b")->shape, (Shape{2, 1}));
    EXPECT_EQ(h.find("e")->nbytes(), 0u);
    FileReader r(path);
    StHeader h2 = read_safetensors_header(r);
    EXPECT_EQ(h2.data_start, h.data_start);
    EXPECT_EQ(h2.tensors.size(), 3u);
    remove_tree(dir);
}

TEST(CkptSafetensors, AcceptsMinimalValidFiles) {
    EXPECT_EQ(parse_status(image("{}", 0)), DS_OK);
    EXPECT_EQ(parse_status(image("{\"x\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}   ", 1)), DS_OK);
    // Offsets need not be in key order, only tile the data.
    EXPECT_EQ(parse_status(image("{\"b\":{\"dtype\":\"I16\",\"shape\":[1],\"data_offsets\":[4,6]},"
                                 "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                                 6)),
              DS_OK);
}

struct BadCase {
    const char* what;
    std::string img;
    const char* expect;  // substring of the message
};

TEST(CkptSafetensors, RejectsEachViolation) {
    const std::string t1 = "\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
    std::vector<BadCase> cases = {
        {"too short", std::string("\x02\0\0", 3), "too short"},
        {"zero length", le64(0), "header length 0"},
        {"huge length", le64(100000001) + "{}", "outside"},
        {"length beyond file", le64(64) + "{}", "exceeds the file"},
        {"not json", image("{\"t\":", 0), "JSON syntax"},
        {"not an object", image("[1,2]   ", 0), "not a JSON object"},
        {"duplicate key", image("{" + t1 + "," + t1 + "}", 8), "duplicate key"},
        {"unknown dtype", image("{\"t\":{\"dtype\":\"F31\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8), "unknown dtype"},
        {"dtype not string", image("{\"t\":{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}}", 8), "dtype must be"},
        {"negative dim", image("{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8), "not an integer"},
        {"fractional dim", image("{\"t\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,6]}}", 6), "not an integer"},
        {"huge shape", image("{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8),
         "too large"},
        {"offsets wrong size", image("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,7]}}", 7), "needs 8"},
        {"offsets reversed", image("{\"t\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8), "end before begin"},
        {"offsets one number", image("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8), "[begin, end]"},
        {"missing key", image("{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8), "lacks 'data_offsets'"},
        {"extra key", image("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8), "unknown key"},
        {"overlap", image("{" + t1 + ",\"u\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8), "overlap"},
        {"gap", image("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8), "gap"},
        {"trailing data", image("{" + t1 + "}", 9), "cover 8 data bytes but the file holds 9"},
        {"data missing", image("{" + t1 + "}", 7), "cover 8 data bytes but the file holds 7"},
        {"metadata not strings", image("{\"__metadata__\":{\"a\":1}}", 0), "__metadata__.a"},
        {"metadata not object", image("{\"__metadata__\":[]}", 0), "__metadata__ must be"},
        {"tensor not object", image("{\"t\":3}", 0), "not a JSON object"},
        {"empty name", image("{\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1), "empty name"},
    };
    for (const BadCase& c : cases) {
        std::string msg;
        EXPECT_EQ(parse_status(c.img, &msg), DS_ERR_FORMAT) << c.what;
        EXPECT_NE(msg.find("t.safetensors"), std::string::npos) << c.what << ": " << msg;
        EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": " << msg;
    }
}

TEST(CkptSafetensors, FileWriterChecksumsLargeAndSmallWrites) {
    char dir[] = "/tmp/ds_st_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    const std::string path = std::string(dir) + "/big.bin";
    std::vector<uint8_t> data((size_t{40} << 20) + 12345);
    uint32_t x = 1;
    for (auto& b : data) b = static_cast<uint8_t>((x = x * 1664525u + 1013904223u) >> 24);
    FileWriter w(path);
    w.write(data.data(), 7);                                  // small, inline
    w.write(data.data() + 7, (size_t{36} << 20));            // large: in 4 MiB slices
    w.write(data.data() + 7 + (size_t{36} << 20), data.size() - 7 - (size_t{36} << 20));
    FileSummary s = w.finish();
    EXPECT_EQ(s.size, data.size());
    EXPECT_EQ(s.crc32c, crc32c_table(0, data.data(), data.size()));
    FileBuffer b = read_file(path, data.size());
    EXPECT_EQ(b.crc32c, s.crc32c);
    EXPECT_EQ(std::memcmp(b.data(), data.data(), data.size()), 0);
    remove_tree(dir);
}

TEST(CkptSafetensors, WriterRefusesWrongByteCount) {
    char dir[] = "/tmp/ds_st_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    SafetensorsWriter w(std::string(dir) + "/x.safetensors", {{"a", DType::F32, {2}}}, {});
    float v = 1.0f;
    w.write(&v, 4);
    EXPECT_THROW(w.finish(), Error);
    remove_tree(dir);
}

}  // namespace
