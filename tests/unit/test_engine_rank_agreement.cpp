// The config comparison behind the cross-rank check at ds_engine_create
// (engine/rank_agreement.h): what is hashed, which keys may differ per rank,
// and how the first differences are named. The multi-rank behaviour is
// tested under mpirun (tests/mpi/test_rank_agreement.cpp).
#include <gtest/gtest.h>

#include <string>

#include "comm/factory.h"
#include "config/config.h"
#include "engine/rank_agreement.h"

namespace {

std::string resolved(const std::string& json) { return ds::config::to_json(ds::config::parse(json, 2)); }

const char* kBase = "{\"train_micro_batch_size_per_gpu\": 2, \"zero_optimization\": {\"stage\": 1}}";

TEST(RankAgreementConfig, EqualConfigsHaveNoDifference) {
    const std::string a = resolved(kBase);
    EXPECT_EQ(ds::agree::config_difference(a, 0, a, 1), "");
    EXPECT_EQ(ds::agree::canonical_config(a), ds::agree::canonical_config(resolved(kBase)));
}

TEST(RankAgreementConfig, NamesTheDifferingKeyAndBothValues) {
    const std::string a = resolved(kBase);
    const std::string b =
        resolved("{\"train_micro_batch_size_per_gpu\": 2, \"zero_optimization\": {\"stage\": 2}}");
    EXPECT_NE(ds::agree::canonical_config(a), ds::agree::canonical_config(b));
    EXPECT_EQ(ds::agree::config_difference(a, 0, b, 3), "zero_optimization.stage is 1 on rank 0 and 2 on rank 3");
}

TEST(RankAgreementConfig, ClippingDifferenceIsSeen) {
    const std::string a = resolved(kBase);
    const std::string b = resolved(
        "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_clipping\": 0.5, \"zero_optimization\": {\"stage\": 1}}");
    EXPECT_NE(ds::agree::canonical_config(a), ds::agree::canonical_config(b));
    EXPECT_NE(ds::agree::config_difference(a, 0, b, 1).find("gradient_clipping"), std::string::npos);
}

TEST(RankAgreementConfig, LocalOutputPathsAreIgnored) {
    const std::string a = resolved(
        "{\"train_micro_batch_size_per_gpu\": 2, \"tensorboard\": {\"enabled\": false, \"output_path\": \"/a\"}}");
    const std::string b = resolved(
        "{\"train_micro_batch_size_per_gpu\": 2, \"tensorboard\": {\"enabled\": false, \"output_path\": \"/b\"}}");
    EXPECT_NE(a, b);
    EXPECT_EQ(ds::agree::canonical_config(a), ds::agree::canonical_config(b));
    EXPECT_EQ(ds::agree::config_difference(a, 0, b, 1), "");
}

TEST(RankAgreementConfig, SeveralDifferencesAreListed) {
    const std::string a = resolved("{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 1}");
    const std::string b = resolved("{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2}");
    const std::string d = ds::agree::config_difference(a, 0, b, 1);
    EXPECT_NE(d.find("train_batch_size is 4 on rank 0 and 8 on rank 1"), std::string::npos) << d;
    EXPECT_NE(d.find("gradient_accumulation_steps is 1 on rank 0 and 2 on rank 1"), std::string::npos) << d;
}

TEST(RankAgreementCall, WorldOfOneRunsTheChecksOnly) {
    auto comm = ds::comm::make_local(ds::comm::Options{});
    int ran = 0;
    ds::agree::enter(*comm, ds::agree::Call::Step, [&] {
        ++ran;
        return ds::agree::CallArgs{};
    });
    EXPECT_EQ(ran, 1);
    try {
        ds::agree::enter(*comm, ds::agree::Call::Step, []() -> ds::agree::CallArgs {
            ds::fail(DS_ERR_INVALID_STATE, "own check");
        });
        FAIL() << "no error";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_INVALID_STATE);
        EXPECT_STREQ(e.what(), "own check");
    }
}

}  // namespace
