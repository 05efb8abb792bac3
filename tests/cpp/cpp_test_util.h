// Shared helpers of the C++ wrapper tests (tests/cpp): configs and an
// expectation that a call throws ds::Error with a status and a message part.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "deepspeed_c.hpp"

namespace cpptest {

// gradient_clipping 0: the library's default is 1.0 (docs/CONFIG.md), which
// would clip the hand-computed steps below.
inline std::string sgd_config(double lr, int gas = 1) {
    return "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_accumulation_steps\": " + std::to_string(gas) +
           ", \"gradient_clipping\": 0, \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": " + std::to_string(lr) + "}}}";
}

inline std::string adamw_config(double lr, double wd) {
    return "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_clipping\": 0, \"optimizer\": {\"type\": \"AdamW\", \"params\": "
           "{\"lr\": " + std::to_string(lr) + ", \"betas\": [0.9, 0.999], \"eps\": 1e-8, \"weight_decay\": " +
           std::to_string(wd) + "}}}";
}

}  // namespace cpptest

/** `stmt` throws ds::Error with `status` and a what() containing `part`. */
#define EXPECT_DS_ERROR(stmt, st, part)                                                     \
    do {                                                                                    \
        bool thrown_ = false;                                                               \
        try {                                                                               \
            stmt;                                                                           \
        } catch (const ds::Error& e_) {                                                     \
            thrown_ = true;                                                                 \
            EXPECT_EQ(e_.status(), (st)) << e_.what();                                      \
            EXPECT_NE(std::string(e_.what()).find(part), std::string::npos)                 \
                << "message \"" << e_.what() << "\" does not name \"" << (part) << "\"";    \
        }                                                                                   \
        EXPECT_TRUE(thrown_) << #stmt " did not throw ds::Error";                           \
    } while (0)
