// ds_save_16bit_model / ds_save_16bit_model_ex (issue 8): names that would
// destroy a checkpoint or replace a non-regular file are refused;
// DS_SAVE_EXCLUDE_FROZEN leaves frozen parameters out (DeepSpeed's
// exclude_frozen_parameters); at ZeRO stage 3 without
// stage3_gather_16bit_weights_on_model_save nothing is written (DeepSpeed
// returns False).
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "ckpt/file_io.h"
#include "ckpt/safetensors.h"
#include "test_ckpt_util.h"

namespace {

using namespace ckpt_test;

std::vector<std::string> tensor_names(const std::string& path) {
    const std::string bytes = slurp(path);
    const ds::ckpt::StHeader h =
        ds::ckpt::parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
    std::vector<std::string> names;
    for (const ds::ckpt::StTensor& t : h.tensors) names.push_back(t.name);
    std::sort(names.begin(), names.end());
    return names;
}

struct Saved : public ::testing::Test {
    TempDir d;
    SmallEngine eng;
    void SetUp() override {
        eng.step();
        ASSERT_EQ(ds_save_checkpoint(eng.e, d.path.c_str(), "t", nullptr), DS_OK) << ds_last_error();
    }
    void expect_refused(const std::string& dir, const char* name, const char* why) {
        const std::string latest = slurp(d / "latest"), manifest = slurp(d / "t/manifest.json"),
                          model = slurp(d / "t/model.safetensors");
        EXPECT_EQ(ds_save_16bit_model(eng.e, dir.c_str(), name), DS_ERR_INVALID_ARGUMENT) << name;
        EXPECT_NE(std::string(ds_last_error()).find(why), std::string::npos) << ds_last_error();
        EXPECT_EQ(slurp(d / "latest"), latest);
        EXPECT_EQ(slurp(d / "t/manifest.json"), manifest);
        EXPECT_EQ(slurp(d / "t/model.safetensors"), model);
        EXPECT_EQ(ds_load_checkpoint(eng.e, d.path.c_str(), nullptr, 0, nullptr), DS_OK) << ds_last_error();
    }
};

TEST_F(Saved, ReservedNamesAreRefused) {
    expect_refused(d.path, "latest", "reserved");
    expect_refused(d.path, "latest.tmp", "reserved");
    expect_refused(d.path, "manifest.json", "reserved");
    expect_refused(d / "t", "manifest.json", "reserved");
    expect_refused(d / "t", "model.safetensors", "checkpoint directory");
    expect_refused(d / "t", "optim_rank0.safetensors", "checkpoint directory");
    expect_refused(d.path, "x.tmp-0123456789abcdef", "temporary");
    expect_refused(d.path, "t", "not a regular file");  // the tag directory itself
    expect_refused(d.path, "..", "plain file name");
    expect_refused(d.path, "a/b", "plain file name");
    // Ordinary names next to the checkpoint are fine.
    EXPECT_EQ(ds_save_16bit_model(eng.e, d.path.c_str(), "model.safetensors"), DS_OK) << ds_last_error();
    EXPECT_EQ(ds_save_16bit_model(eng.e, (d / "t").c_str(), "extra.safetensors"), DS_OK) << ds_last_error();
    EXPECT_EQ(ds_load_checkpoint(eng.e, d.path.c_str(), nullptr, 0, nullptr), DS_OK) << ds_last_error();
}

TEST_F(Saved, FifoAndDeviceAreNotReplaced) {
    ASSERT_EQ(::mkfifo((d / "pipe").c_str(), 0644), 0);
    alarm(30);
    EXPECT_EQ(ds_save_16bit_model(eng.e, d.path.c_str(), "pipe"), DS_ERR_INVALID_ARGUMENT);
    alarm(0);
    EXPECT_NE(std::string(ds_last_error()).find("FIFO"), std::string::npos) << ds_last_error();
    EXPECT_TRUE(is_fifo(d / "pipe"));
    // A device node of our own (never a system one: before the fix the save
    // renamed a regular file over it). Creating one needs privileges.
    const std::string dev = d / "devnull";
    if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) GTEST_SKIP() << "mknod not permitted here";
    EXPECT_EQ(ds_save_16bit_model(eng.e, d.path.c_str(), "devnull"), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ds_last_error()).find("device"), std::string::npos) << ds_last_error();
    struct stat st;
    ASSERT_EQ(::lstat(dev.c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device node was replaced";
}

TEST(Ckpt16bit, ExcludeFrozen) {
    TempDir d;
    SmallEngine eng;
    ASSERT_EQ(ds_save_16bit_model_ex(eng.e, d.path.c_str(), "all.safetensors", 0), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_save_16bit_model_ex(eng.e, d.path.c_str(), "trained.safetensors", DS_SAVE_EXCLUDE_FROZEN), DS_OK)
        << ds_last_error();
    EXPECT_EQ(tensor_names(d / "all.safetensors"), (std::vector<std::string>{"b", "frozen", "w"}));
    EXPECT_EQ(tensor_names(d / "trained.safetensors"), (std::vector<std::string>{"b", "w"}));
    EXPECT_EQ(ds_save_16bit_model_ex(eng.e, d.path.c_str(), "x.safetensors", 2u), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ds_last_error()).find("flags"), std::string::npos) << ds_last_error();
    for (const std::string& n : ds::ckpt::list_dir(d.path))
        EXPECT_TRUE(n == "all.safetensors" || n == "trained.safetensors") << "left behind: " << n;
}

const char* stage3(bool gather) {
    return gather ? "{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": \"AdamW\"},"
                    " \"zero_optimization\": {\"stage\": 3, \"stage3_gather_16bit_weights_on_model_save\": true}}"
                  : "{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": \"AdamW\"},"
                    " \"zero_optimization\": {\"stage\": 3}}";
}

TEST(Ckpt16bit, Stage3NeedsGatherFlag) {
    TempDir d;
    {
        SmallEngine eng(stage3(false));
        EXPECT_EQ(ds_save_16bit_model(eng.e, d.path.c_str(), nullptr), DS_ERR_INVALID_CONFIG);
        EXPECT_NE(std::string(ds_last_error()).find("stage3_gather_16bit_weights_on_model_save"), std::string::npos)
            << ds_last_error();
        EXPECT_TRUE(ds::ckpt::list_dir(d.path).empty()) << "something was written";
    }
    SmallEngine eng(stage3(true));
    ASSERT_EQ(ds_save_16bit_model_ex(eng.e, d.path.c_str(), nullptr, DS_SAVE_EXCLUDE_FROZEN), DS_OK)
        << ds_last_error();
    EXPECT_EQ(tensor_names(d / "model.safetensors"), (std::vector<std::string>{"b", "w"}));
}

}  // namespace
