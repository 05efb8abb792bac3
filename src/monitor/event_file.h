// TensorBoard event files written by the library (no TensorFlow, no
// protobuf library): each record is TFRecord-framed
//   uint64 length (little endian) | uint32 masked_crc32c(length bytes)
//   | data | uint32 masked_crc32c(data)
// and its data is a hand-encoded tensorboard `Event` protobuf message:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// A file starts with the file_version event ("brain.Event:2"), then one
// event per scalar. The readers (tensorboard's EventAccumulator, tbparse)
// check both CRCs.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace ds::monitor {

// TFRecord's masked CRC32C: rotate right by 15, add 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t n);

// One TFRecord: the framing above around `data`.
std::string tfrecord_frame(const std::string& data);

// The serialized Event messages.
std::string encode_file_version_event(double wall_time);
std::string encode_scalar_event(double wall_time, int64_t step, const std::string& tag, float value);

// An open event file in `dir` named as PyTorch's SummaryWriter names it:
// events.out.tfevents.<10-digit unix time>.<host>.<pid>.<n>. Throws
// ds::Error (DS_ERR_IO naming the path) when it cannot be created or written.
class EventFileWriter {
public:
    explicit EventFileWriter(const std::string& dir);
    ~EventFileWriter();
    EventFileWriter(const EventFileWriter&) = delete;
    EventFileWriter& operator=(const EventFileWriter&) = delete;

    void add_scalar(const std::string& tag, float value, int64_t step, double wall_time);
    void flush();
    const std::string& path() const { return path_; }

private:
    void write_record(const std::string& data);
    std::string path_;
    std::FILE* f_ = nullptr;
};

// Seconds since the epoch, with sub-second resolution (Event.wall_time).
double wall_time_now();

}  // namespace ds::monitor
