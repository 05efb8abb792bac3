// Batch-size triple resolution, DEEPSPEED_SEMANTICS.md §1.6: every row of the table, the
// worked examples (T=10,M=3 and T=2,M=4) and world sizes 1, 2 and 3.
// Expected values are computed by hand from the table's formulas.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "core/error.h"

namespace {

struct Row {
    const char* name;
    const char* json;  // the three batch keys only
    int64_t world;
    bool ok;
    int64_t T, M, G;               // when ok
    const char* error_prefix;      // when !ok: the message starts with this
};

const std::vector<Row>& rows() {
    static const std::vector<Row> v = {
        // T, M, G given: nothing derived; equality checked.
        {"TMG_ok_w2", "{\"train_batch_size\": 12, \"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 3}", 2, true, 12, 2, 3, nullptr},
        {"TMG_mismatch_w2", "{\"train_batch_size\": 12, \"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2}", 2, false, 0, 0, 0,
         "train_batch_size: 12 != train_micro_batch_size_per_gpu 2 * gradient_accumulation_steps 2 * world_size 2"},
        // T, M: G = (T // M) // W
        {"TM_w1", "{\"train_batch_size\": 8, \"train_micro_batch_size_per_gpu\": 2}", 1, true, 8, 2, 4, nullptr},
        {"TM_w3", "{\"train_batch_size\": 12, \"train_micro_batch_size_per_gpu\": 2}", 3, true, 12, 2, 2, nullptr},
        {"TM_example_10_3", "{\"train_batch_size\": 10, \"train_micro_batch_size_per_gpu\": 3}", 1, false, 0, 0, 0,
         "train_batch_size: 10 != train_micro_batch_size_per_gpu 3 * gradient_accumulation_steps 3 * world_size 1"},
        {"TM_example_2_4", "{\"train_batch_size\": 2, \"train_micro_batch_size_per_gpu\": 4}", 1, false, 0, 0, 0,
         "gradient_accumulation_steps: derived value 0 is not > 0"},
        {"TM_w2_not_divisible", "{\"train_batch_size\": 12, \"train_micro_batch_size_per_gpu\": 4}", 2, false, 0, 0, 0,
         "train_batch_size: 12 != train_micro_batch_size_per_gpu 4 * gradient_accumulation_steps 1 * world_size 2"},
        // T, G: M = (T // W) // G
        {"TG_w3", "{\"train_batch_size\": 12, \"gradient_accumulation_steps\": 2}", 3, true, 12, 2, 2, nullptr},
        {"TG_w2_mismatch", "{\"train_batch_size\": 13, \"gradient_accumulation_steps\": 2}", 2, false, 0, 0, 0,
         "train_batch_size: 13 != train_micro_batch_size_per_gpu 3 * gradient_accumulation_steps 2 * world_size 2"},
        {"TG_zero_micro", "{\"train_batch_size\": 3, \"gradient_accumulation_steps\": 4}", 1, false, 0, 0, 0,
         "train_micro_batch_size_per_gpu: derived value 0 is not > 0"},
        // M, G: T = M * G * W
        {"MG_w3", "{\"train_micro_batch_size_per_gpu\": 3, \"gradient_accumulation_steps\": 2}", 3, true, 18, 3, 2, nullptr},
        {"MG_w1", "{\"train_micro_batch_size_per_gpu\": 5, \"gradient_accumulation_steps\": 4}", 1, true, 20, 5, 4, nullptr},
        // T only: G = 1, M = T // W
        {"T_w3", "{\"train_batch_size\": 12}", 3, true, 12, 4, 1, nullptr},
        {"T_w2", "{\"train_batch_size\": 8}", 2, true, 8, 4, 1, nullptr},
        {"T_w3_not_divisible", "{\"train_batch_size\": 10}", 3, false, 0, 0, 0,
         "train_batch_size: 10 != train_micro_batch_size_per_gpu 3 * gradient_accumulation_steps 1 * world_size 3"},
        {"T_smaller_than_world", "{\"train_batch_size\": 2}", 3, false, 0, 0, 0,
         "train_micro_batch_size_per_gpu: derived value 0 is not > 0"},
        // M only: G = 1, T = M * W
        {"M_w2", "{\"train_micro_batch_size_per_gpu\": 5}", 2, true, 10, 5, 1, nullptr},
        {"M_w3", "{\"train_micro_batch_size_per_gpu\": 1}", 3, true, 3, 1, 1, nullptr},
        // G only, or none: error
        {"G_only", "{\"gradient_accumulation_steps\": 4}", 1, false, 0, 0, 0,
         "train_batch_size / train_micro_batch_size_per_gpu: at least one is required"},
        {"none", "{}", 2, false, 0, 0, 0, "train_batch_size / train_micro_batch_size_per_gpu: at least one is required"},
        // Positivity of given values
        {"T_zero", "{\"train_batch_size\": 0}", 1, false, 0, 0, 0, "train_batch_size: must be > 0, got 0"},
        {"M_negative", "{\"train_micro_batch_size_per_gpu\": -2}", 1, false, 0, 0, 0,
         "train_micro_batch_size_per_gpu: must be > 0, got -2"},
        {"G_zero", "{\"train_batch_size\": 4, \"gradient_accumulation_steps\": 0}", 1, false, 0, 0, 0,
         "gradient_accumulation_steps: must be > 0, got 0"},
        // "auto" and null mean "not given"
        {"auto_T_G", "{\"train_batch_size\": \"auto\", \"train_micro_batch_size_per_gpu\": 4, \"gradient_accumulation_steps\": \"auto\"}",
         2, true, 8, 4, 1, nullptr},
        {"null_M", "{\"train_batch_size\": 6, \"train_micro_batch_size_per_gpu\": null}", 3, true, 6, 2, 1, nullptr},
        {"integral_double", "{\"train_batch_size\": 1.6e1, \"train_micro_batch_size_per_gpu\": 2e0}", 2, true, 16, 2, 4, nullptr},
    };
    return v;
}

void PrintTo(const Row& r, std::ostream* os) { *os << r.json << " W=" << r.world; }

class ConfigBatch : public ::testing::TestWithParam<Row> {};

TEST_P(ConfigBatch, ResolvesPerReferenceTable) {
    const Row& r = GetParam();
    if (r.ok) {
        const auto c = ds::config::parse(r.json, r.world);
        EXPECT_EQ(c.train_batch_size, r.T);
        EXPECT_EQ(c.train_micro_batch_size_per_gpu, r.M);
        EXPECT_EQ(c.gradient_accumulation_steps, r.G);
        EXPECT_EQ(c.world_size, r.world);
        EXPECT_EQ(c.train_batch_size, c.train_micro_batch_size_per_gpu * c.gradient_accumulation_steps * r.world);
        return;
    }
    try {
        ds::config::parse(r.json, r.world);
        FAIL() << "accepted";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_INVALID_CONFIG);
        EXPECT_EQ(std::string(e.what()).rfind(r.error_prefix, 0), 0u) << e.what();
    }
}

INSTANTIATE_TEST_SUITE_P(Config, ConfigBatch, ::testing::ValuesIn(rows()),
                         [](const ::testing::TestParamInfo<Row>& i) { return std::string(i.param.name); });

TEST(ConfigBatchExamples, BriefExampleMessageIsExact) {
    try {
        ds::config::parse("{\"train_batch_size\": 8, \"train_micro_batch_size_per_gpu\": 3}", 1);
        FAIL();
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_INVALID_CONFIG);
        EXPECT_STREQ(e.what(),
                     "train_batch_size: 8 != train_micro_batch_size_per_gpu 3 * gradient_accumulation_steps 2 * "
                     "world_size 1");
    }
}

TEST(ConfigBatchExamples, WorldSizeMustBePositive) {
    try {
        ds::config::parse("{\"train_batch_size\": 8}", 0);
        FAIL();
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
        EXPECT_EQ(std::string(e.what()).rfind("world_size", 0), 0u);
    }
}

TEST(ConfigBatchExamples, OverflowIsAnError) {
    try {
        ds::config::parse("{\"train_micro_batch_size_per_gpu\": 4611686018427387904, \"gradient_accumulation_steps\": 4}", 1);
        FAIL();
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_INVALID_CONFIG);
        EXPECT_NE(std::string(e.what()).find("overflows"), std::string::npos) << e.what();
    }
}

}  // namespace
