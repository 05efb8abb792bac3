// csv_monitor's file layout (DeepSpeed's: one file per event name, header
// "step,<last component>", append mode, a second header after a restart),
// the wall-clock timers and their log line, the GPT FLOPs formula.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "core/error.h"
#include "monitor/csv_monitor.h"
#include "monitor/monitor_hub.h"
#include "monitor/timers.h"

namespace {

using namespace ds::monitor;
namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct TempDir {
    fs::path path;
    explicit TempDir(const char* tag) : path(fs::temp_directory_path() / (std::string(tag) + std::to_string(getpid()))) {
        fs::remove_all(path);
    }
    ~TempDir() { fs::remove_all(path); }
};

TEST(MonitorCsv, FileNamesAndHeaders) {
    EXPECT_EQ(CsvMonitor::file_stem("Train/Samples/lr"), "Train_Samples_lr");
    EXPECT_EQ(CsvMonitor::file_stem("my metric/a b"), "my_metric_a_b");
    EXPECT_EQ(CsvMonitor::header_of("Train/Samples/elapsed_time_ms_forward"), "elapsed_time_ms_forward");
    EXPECT_EQ(CsvMonitor::header_of("loss"), "loss");
}

TEST(MonitorCsv, OneFilePerEventAppendsAndReheadersAfterRestart) {
    TempDir d("ds_csv_");
    {
        CsvMonitor m(d.path.string(), "run1");
        EXPECT_EQ(fs::path(m.log_dir()), d.path / "run1");
        m.write_events({{"Train/Samples/lr", 0.001, 4}, {"Train/Samples/train_loss", 2.5, 4}});
        m.write_events({{"Train/Samples/lr", 1e-05, 8}});
    }
    EXPECT_EQ(slurp(d.path / "run1" / "Train_Samples_lr.csv"), "step,lr\r\n4,0.001\r\n8,1e-05\r\n");
    EXPECT_EQ(slurp(d.path / "run1" / "Train_Samples_train_loss.csv"), "step,train_loss\r\n4,2.5\r\n");
    {  // a restarted job (a new monitor) appends, with a second header, as DeepSpeed's does
        CsvMonitor m(d.path.string(), "run1");
        m.write_events({{"Train/Samples/lr", 3.0, 12}});
    }
    EXPECT_EQ(slurp(d.path / "run1" / "Train_Samples_lr.csv"),
              "step,lr\r\n4,0.001\r\n8,1e-05\r\nstep,lr\r\n12,3.0\r\n");
}

TEST(MonitorCsv, ValuesArePythonFloatStrings) {
    TempDir d("ds_csv_v_");
    CsvMonitor m(d.path.string(), "j");
    m.write_events({{"x", 0.1, 1}, {"x", 1.0 / 3.0, 2}, {"x", NAN, 3}, {"x", -INFINITY, 4}, {"x", 1234.5, 5}});
    EXPECT_EQ(slurp(d.path / "j" / "x.csv"),
              "step,x\r\n1,0.1\r\n2,0.3333333333333333\r\n3,nan\r\n4,-inf\r\n5,1234.5\r\n");
}

TEST(MonitorCsv, EmptyOutputPathIsRelativeJobName) {
    const fs::path cwd = fs::current_path();
    TempDir d("ds_csv_cwd_");
    fs::create_directories(d.path);
    fs::current_path(d.path);
    {
        CsvMonitor m("", "DeepSpeedJobName");
        m.write_events({{"a/b", 1.0, 1}});
    }
    fs::current_path(cwd);
    EXPECT_TRUE(fs::exists(d.path / "DeepSpeedJobName" / "a_b.csv"));
}

TEST(MonitorCsv, UnwritableDirectoryIsAnIoErrorNamingIt) {
    TempDir d("ds_csv_bad_");
    fs::create_directories(d.path);
    { std::ofstream((d.path / "job").string()) << "x"; }
    try {
        CsvMonitor m(d.path.string(), "job");
        FAIL() << "expected DS_ERR_IO";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_IO);
        EXPECT_NE(std::string(e.what()).find("csv_monitor"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find((d.path / "job").string()), std::string::npos) << e.what();
    }
}

TEST(MonitorTimers, AccumulateResetAndLogLine) {
    Timers t;
    t.start("a");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    t.stop("a");
    t.stop("a");  // a second stop is ignored
    t.start("a");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    t.stop("a");
    const double a = t.elapsed_ms("a", false);
    EXPECT_GE(a, 30.0);
    EXPECT_LT(a, 2000.0);
    EXPECT_EQ(t.elapsed_ms("a", false), a);  // not reset
    // Only timers that exist are listed (DeepSpeed's timers.log); the listed ones are reset.
    const std::string line = t.log_line({"a", "missing"});
    EXPECT_EQ(line.rfind("time (ms) | a: ", 0), 0u) << line;
    EXPECT_EQ(line.find("missing"), std::string::npos) << line;
    char want[64];
    std::snprintf(want, sizeof want, "time (ms) | a: %.2f", a);
    EXPECT_EQ(line, want);
    EXPECT_EQ(t.elapsed_ms("a", false), 0.0);
    EXPECT_EQ(t.log_line({}), "time (ms)");
}

TEST(MonitorTimers, GptFlopsPerToken) {
    // 6N + 12 L T C, from the float64 formula.
    EXPECT_DOUBLE_EQ(gpt_flops_per_token(124e6, 12, 1024, 768), 6.0 * 124e6 + 12.0 * 12 * 1024 * 768);
}

}  // namespace
