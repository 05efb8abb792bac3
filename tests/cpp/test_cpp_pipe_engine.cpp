// deepspeed_c.hpp: Engine::train_batch / eval_batch / pipe_info on a world of
// one. An engine that is not a pipeline stage refuses all three with
// DS_ERR_INVALID_STATE naming the pipeline, and a GPT spec asking for two
// stages is refused by engine creation, naming pipeline.stages, and a bad
// pipeline object by the model, naming its key (the training itself needs
// several ranks: tests/mpi/test_pipe_engine.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "cpp_test_util.h"

namespace {

std::string gpt_spec(const std::string& extra) {
    return R"({"type": "gpt", "vocab_size": 16, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 16,)"
           R"( "seed": 3)" + extra + "}";
}

const char* kConfig =
    R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,)"
    R"( "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}})";

}  // namespace

TEST(CppPipeEngine, PlainEngineRefusesTheBatchCalls) {
    ds::Engine e = ds::Engine::with_model(kConfig, ds::Model(gpt_spec("")));
    std::vector<int32_t> ids(4 * 8, 1), targets(4 * 8, 2);
    const ds::TensorRef x(ids, {4, 8}), y(targets, {4, 8});
    EXPECT_DS_ERROR(e.train_batch(x, y), ds::Status::invalid_state, "pipeline");
    EXPECT_DS_ERROR(e.train_batch(nullptr, nullptr), ds::Status::invalid_state, "pipeline");
    EXPECT_DS_ERROR(e.eval_batch(x, y), ds::Status::invalid_state, "pipeline");
    EXPECT_DS_ERROR(e.pipe_info(), ds::Status::invalid_state, "pipeline");
    // the refusals changed nothing: the engine still trains through forward/backward/step
    std::vector<int32_t> mb(2 * 8, 3);
    const float loss = e.forward({mb, {2, 8}}, {mb, {2, 8}});
    EXPECT_GT(loss, 0.0f);
    e.backward();
    EXPECT_FALSE(e.step().stepped);  // micro-step 1 of 2
    EXPECT_EQ(e.micro_steps(), 1);
}

TEST(CppPipeEngine, TwoStagesOnAWorldOfOneAreRefused) {
    ds::Model m(gpt_spec(R"(, "pipeline": {"stages": 2, "partition_method": "parameters"})"));
    EXPECT_DS_ERROR(ds::Engine::with_model(kConfig, m), ds::Status::invalid_argument, "pipeline.stages");
}

TEST(CppPipeEngine, BadPipelineObjectsNameTheKey) {
    EXPECT_DS_ERROR(ds::Model(gpt_spec(R"(, "pipeline": {"stagez": 2})")), ds::Status::invalid_config,
                    "pipeline.stagez");
    EXPECT_DS_ERROR(ds::Model(gpt_spec(R"(, "pipeline": {"stages": 0})")), ds::Status::invalid_config,
                    "pipeline.stages");
}
