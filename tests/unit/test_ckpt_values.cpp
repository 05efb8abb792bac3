// Checkpoint values (issue 8): a manifest edited by hand and re-sealed
// (its checksum recomputed) with values the config would refuse — lr < 0,
// betas outside [0, 1) — or with another optimizer or schedule type than the
// engine's loaded with DS_OK. Each must now fail with DS_ERR_FORMAT naming
// the key (and for types both values), leaving the engine unchanged; the
// flags that skip that state still load.
#include <regex>

#include "test_ckpt_util.h"

namespace {

using namespace ckpt_test;

struct Snapshot {
    std::vector<float> w, b;
    double lr = 0;
    int64_t steps = 0;
    explicit Snapshot(SmallEngine& e) : w(e.get("w", {3, 4})), b(e.get("b", {4})) {
        EXPECT_EQ(ds_engine_get_lr(e.e, &lr), DS_OK);
        EXPECT_EQ(ds_engine_global_steps(e.e, &steps), DS_OK);
    }
    bool operator==(const Snapshot& o) const { return w == o.w && b == o.b && lr == o.lr && steps == o.steps; }
};

class CkptValues : public ::testing::Test {
protected:
    TempDir d;
    std::string manifest_path, original;
    void SetUp() override {
        SmallEngine src;
        for (int i = 0; i < 3; ++i) src.step();
        ASSERT_EQ(ds_save_checkpoint(src.e, d.path.c_str(), "t", nullptr), DS_OK) << ds_last_error();
        manifest_path = d / "t/manifest.json";
        original = slurp(manifest_path);
    }
    // Replaces the first match of `re` in the optimizer / lr_scheduler record
    // (which precede the config copy) and re-seals the manifest.
    void forge(const std::string& re, const std::string& with) {
        std::smatch m;
        ASSERT_TRUE(std::regex_search(original, m, std::regex(re))) << re;
        spit(manifest_path, reseal(original.substr(0, static_cast<size_t>(m.position(0))) + with +
                                   original.substr(static_cast<size_t>(m.position(0) + m.length(0)))));
    }
    // A fresh engine (other values than the checkpoint) must refuse the
    // forged checkpoint, name `key` (and `also`), and stay unchanged.
    void expect_refused(const char* config, uint32_t flags, const char* key, const char* also = nullptr) {
        SmallEngine eng(config, 2.0f);
        eng.step();
        const Snapshot before(eng);
        const ds_status_t s = ds_load_checkpoint(eng.e, d.path.c_str(), "t", flags, nullptr);
        EXPECT_EQ(s, DS_ERR_FORMAT) << ds_last_error();
        const std::string msg = ds_last_error();
        EXPECT_NE(msg.find(key), std::string::npos) << msg;
        if (also) EXPECT_NE(msg.find(also), std::string::npos) << msg;
        EXPECT_TRUE(Snapshot(eng) == before) << "a refused load changed the engine";
    }
    void expect_loads(const char* config, uint32_t flags) {
        SmallEngine eng(config, 2.0f);
        EXPECT_EQ(ds_load_checkpoint(eng.e, d.path.c_str(), "t", flags, nullptr), DS_OK) << ds_last_error();
    }
};

TEST_F(CkptValues, UnforgedLoads) { expect_loads(kAdamWConfig, 0); }

TEST_F(CkptValues, NegativeLr) {
    forge("\"lr\": [0-9.eE+-]+", "\"lr\": -1");
    expect_refused(kAdamWConfig, 0, "optimizer.lr");
}

TEST_F(CkptValues, BetasOutOfRange) {
    forge("\"betas\": \\[[^\\]]*\\]", "\"betas\": [2, 2]");
    expect_refused(kAdamWConfig, 0, "optimizer.betas[0]");
}

TEST_F(CkptValues, BetaEqualToOne) {
    forge("\"betas\": \\[[^\\]]*\\]", "\"betas\": [0.9, 1]");
    expect_refused(kAdamWConfig, 0, "optimizer.betas[1]");
}

TEST_F(CkptValues, OtherOptimizerType) {
    // Adam keeps the same state (exp_avg, exp_avg_sq) as AdamW: only the type tells them apart.
    forge("\"type\": \"AdamW\"", "\"type\": \"Adam\"");
    expect_refused(kAdamWConfig, 0, "optimizer.type", "AdamW");
    expect_loads(kAdamWConfig, DS_LOAD_NO_OPTIMIZER_STATES);
    expect_loads(kAdamWConfig, DS_LOAD_MODULE_ONLY);
}

TEST_F(CkptValues, OtherSchedulerType) {
    forge("\"type\": \"WarmupLR\"", "\"type\": \"WarmupDecayLR\"");
    expect_refused(kAdamWConfig, 0, "lr_scheduler.type", "WarmupLR");
    expect_loads(kAdamWConfig, DS_LOAD_NO_LR_SCHEDULER_STATES);
    expect_loads(kAdamWConfig, DS_LOAD_MODULE_ONLY);
}

}  // namespace
