// Schedule::idle_steps (the bubble the pipeline engine's benchmark compares
// with): 1F1B leaves 2(S-1) of 2(M+S-1) steps idle on every stage,
// inference S-1 of M+S-1, data parallel none. The instruction streams
// themselves are checked against DeepSpeed in tests/c_api/test_pipe_schedule.c.
#include <gtest/gtest.h>

#include "core/error.h"
#include "pipe/schedule.h"

using ds::pipe::Schedule;
using ds::pipe::ScheduleKind;

TEST(PipeSchedule, IdleStepsAreTheBubble) {
    for (int32_t S = 1; S <= 6; ++S)
        for (int32_t M = 1; M <= 9; ++M)
            for (int32_t s = 0; s < S; ++s) {
                const Schedule train(ScheduleKind::Train, M, S, s);
                EXPECT_EQ(train.num_steps(), 2 * (M + S - 1));
                EXPECT_EQ(train.idle_steps(), 2 * (S - 1)) << "S " << S << " M " << M << " stage " << s;
                const Schedule inference(ScheduleKind::Inference, M, S, s);
                EXPECT_EQ(inference.idle_steps(), S - 1) << "S " << S << " M " << M << " stage " << s;
                EXPECT_EQ(Schedule(ScheduleKind::DataParallel, M, S, s).idle_steps(), 0);
            }
}

TEST(PipeSchedule, BadArgumentsAreNamed) {
    try {
        Schedule(ScheduleKind::Train, 4, 3, 3);
        FAIL() << "stage_id 3 of 3 accepted";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(e.what()).find("stage_id = 3"), std::string::npos) << e.what();
    }
    const Schedule s(ScheduleKind::Train, 2, 2, 0);
    EXPECT_THROW(s.step(s.num_steps()), ds::Error);
    EXPECT_THROW(s.step(-1), ds::Error);
}
