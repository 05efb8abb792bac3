#include "monitor/csv_monitor.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/json/json_writer.h"

namespace ds::monitor {

namespace {
// Python's str(float): the shortest round-trip form; nan, inf, -inf.
std::string py_str(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return json::format_number(v);
}
}  // namespace

std::string make_log_dir(const char* section, const std::string& output_path, const std::string& job_name) {
    namespace fs = std::filesystem;
    const std::string dir = output_path.empty() ? job_name : (fs::path(output_path) / job_name).string();
    std::error_code ec;
    fs::create_directories(dir, ec);
    DS_CHECK(!ec && fs::is_directory(dir), DS_ERR_IO, "%s: cannot create the output directory '%s' (%s.output_path/job_name): %s",
             section, dir.c_str(), section, ec ? ec.message().c_str() : "not a directory");
    return dir;
}

CsvMonitor::CsvMonitor(const std::string& output_path, const std::string& job_name)
    : dir_(make_log_dir("csv_monitor", output_path, job_name)) {}

std::string CsvMonitor::file_stem(const std::string& name) {
    std::string s = name;
    for (char& c : s)
        if (c == '/' || c == ' ') c = '_';
    return s;
}

std::string CsvMonitor::header_of(const std::string& name) {
    const size_t slash = name.rfind('/');
    return slash == std::string::npos ? name : name.substr(slash + 1);
}

void CsvMonitor::write_events(const Events& events) {
    for (const Event& e : events) {
        const std::string stem = file_stem(e.name);
        const std::string path = dir_ + "/" + stem + ".csv";
        std::FILE* f = std::fopen(path.c_str(), "ab");
        DS_CHECK(f != nullptr, DS_ERR_IO, "csv_monitor: cannot open '%s' for appending: %s", path.c_str(),
                 std::strerror(errno));
        std::string text;
        if (headed_.insert(stem).second) text += "step," + header_of(e.name) + "\r\n";
        text += std::to_string(e.x) + "," + py_str(e.value) + "\r\n";
        const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
        const bool closed = std::fclose(f) == 0;
        DS_CHECK(ok && closed, DS_ERR_IO, "csv_monitor: cannot write to '%s': %s", path.c_str(), std::strerror(errno));
    }
}

}  // namespace ds::monitor
