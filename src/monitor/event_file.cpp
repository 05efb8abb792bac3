#include "monitor/event_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/crc32c.h"
#include "core/error.h"

namespace ds::monitor {

uint32_t masked_crc32c(const void* data, size_t n) {
    const uint32_t c = crc32c(0, data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

namespace {

void put_le(std::string& out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

// Protobuf wire format: a key is (field << 3) | wire type; 0 varint,
// 1 fixed64, 2 length-delimited, 5 fixed32.
void put_varint(std::string& out, uint64_t v) {
    while (v >= 0x80u) {
        out.push_back(static_cast<char>((v & 0x7Fu) | 0x80u));
        v >>= 7;
    }
    out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, uint32_t field, uint32_t wire) { put_varint(out, (field << 3) | wire); }
void put_bytes(std::string& out, uint32_t field, const std::string& s) {
    put_key(out, field, 2);
    put_varint(out, s.size());
    out += s;
}
void put_double(std::string& out, uint32_t field, double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    put_key(out, field, 1);
    put_le(out, bits, 8);
}
void put_float(std::string& out, uint32_t field, float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    put_key(out, field, 5);
    put_le(out, bits, 4);
}
void put_int64(std::string& out, uint32_t field, int64_t v) {
    put_key(out, field, 0);
    put_varint(out, static_cast<uint64_t>(v));  // two's complement, as protobuf's int64
}

std::atomic<int> g_file_counter{0};

}  // namespace

std::string tfrecord_frame(const std::string& data) {
    std::string out;
    out.reserve(data.size() + 16);
    put_le(out, data.size(), 8);
    put_le(out, masked_crc32c(out.data(), 8), 4);
    out += data;
    put_le(out, masked_crc32c(data.data(), data.size()), 4);
    return out;
}

std::string encode_file_version_event(double wall_time) {
    std::string ev;
    put_double(ev, 1, wall_time);
    put_bytes(ev, 3, "brain.Event:2");
    return ev;
}

std::string encode_scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
    std::string val;
    put_bytes(val, 1, tag);
    put_float(val, 2, value);
    std::string summary;
    put_bytes(summary, 1, val);
    std::string ev;
    put_double(ev, 1, wall_time);
    put_int64(ev, 2, step);
    put_bytes(ev, 5, summary);
    return ev;
}

double wall_time_now() {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

EventFileWriter::EventFileWriter(const std::string& dir) {
    char host[256] = {0};
    if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
    const double now = wall_time_now();
    path_ = dir + "/" +
            format("events.out.tfevents.%010lld.%s.%d.%d", static_cast<long long>(now), host,
                   static_cast<int>(getpid()), g_file_counter.fetch_add(1));
    f_ = std::fopen(path_.c_str(), "wb");
    DS_CHECK(f_ != nullptr, DS_ERR_IO, "tensorboard: cannot create the event file '%s': %s", path_.c_str(),
             std::strerror(errno));
    write_record(encode_file_version_event(now));
    flush();
}

EventFileWriter::~EventFileWriter() {
    if (f_) std::fclose(f_);
}

void EventFileWriter::write_record(const std::string& data) {
    const std::string rec = tfrecord_frame(data);
    DS_CHECK(std::fwrite(rec.data(), 1, rec.size(), f_) == rec.size(), DS_ERR_IO,
             "tensorboard: cannot write to the event file '%s': %s", path_.c_str(), std::strerror(errno));
}

void EventFileWriter::add_scalar(const std::string& tag, float value, int64_t step, double wall_time) {
    write_record(encode_scalar_event(wall_time, step, tag, value));
}

void EventFileWriter::flush() {
    DS_CHECK(std::fflush(f_) == 0, DS_ERR_IO, "tensorboard: cannot write to the event file '%s': %s",
             path_.c_str(), std::strerror(errno));
}

}  // namespace ds::monitor
