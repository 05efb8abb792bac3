// Special files in a checkpoint (issue 8, "Special files"): a FIFO in place
// of `latest`, `manifest.json` or a data file made ds_load_checkpoint and
// ds-to-fp32 block forever (the file was opened before the regular-file
// check). Each must now fail with a status naming the file. alarm() bounds
// every case: a hang kills the test binary instead of stalling the suite.
#include <sys/stat.h>

#include "ckpt/consolidate.h"
#include "core/error.h"
#include "test_ckpt_util.h"

namespace {

using namespace ckpt_test;

struct Alarm {
    explicit Alarm(unsigned s) { alarm(s); }
    ~Alarm() { alarm(0); }
};

void replace_with_fifo(const std::string& path) {
    ASSERT_EQ(::unlink(path.c_str()), 0) << path;
    ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0) << path;
}

class CkptSpecialFiles : public ::testing::TestWithParam<const char*> {};

TEST_P(CkptSpecialFiles, FifoIsRefusedNotWaitedOn) {
    const std::string which = GetParam();
    TempDir d;
    SmallEngine eng;
    eng.step();
    ASSERT_EQ(ds_save_checkpoint(eng.e, d.path.c_str(), "t1", nullptr), DS_OK) << ds_last_error();
    const std::string victim = which == "latest" ? d / "latest" : d / ("t1/" + which);
    replace_with_fifo(victim);
    const std::vector<float> before = eng.get("w", {3, 4});
    Alarm guard(30);
    const ds_status_t s = ds_load_checkpoint(eng.e, d.path.c_str(), nullptr, 0, nullptr);
    EXPECT_TRUE(s == DS_ERR_IO || s == DS_ERR_FORMAT) << ds_status_string(s);
    EXPECT_NE(std::string(ds_last_error()).find(victim), std::string::npos) << ds_last_error();
    EXPECT_NE(std::string(ds_last_error()).find("FIFO"), std::string::npos) << ds_last_error();
    EXPECT_EQ(eng.get("w", {3, 4}), before) << "a failed load changed the engine";
    // ds-to-fp32 (the same reader) refuses it too.
    try {
        ds::ckpt::consolidate_fp32(d.path, "", d / "out.safetensors");
        ADD_FAILURE() << "consolidation read a FIFO";
    } catch (const ds::Error& e) {
        EXPECT_NE(std::string(e.what()).find(victim), std::string::npos) << e.what();
    }
    EXPECT_EQ(ds::ckpt::path_kind(d / "out.safetensors"), ds::ckpt::PathKind::Missing);
    EXPECT_TRUE(is_fifo(victim));
}

INSTANTIATE_TEST_SUITE_P(EachFileKind, CkptSpecialFiles,
                         ::testing::Values("latest", "manifest.json", "model.safetensors",
                                           "optim_rank0.safetensors"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                             std::string n = i.param;
                             for (char& c : n)
                                 if (c == '.') c = '_';
                             return n;
                         });

// A FIFO someone left where a save writes its temporaries cannot block it.
TEST(CkptSpecialFilesSave, FifoAtOldLatestTemporaryDoesNotBlock) {
    TempDir d;
    SmallEngine eng;
    ASSERT_EQ(::mkfifo((d / "latest.tmp").c_str(), 0644), 0);
    Alarm guard(30);
    EXPECT_EQ(ds_save_checkpoint(eng.e, d.path.c_str(), "t1", nullptr), DS_OK) << ds_last_error();
    EXPECT_EQ(slurp(d / "latest"), "t1");
}

}  // namespace
