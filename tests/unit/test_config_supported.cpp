// check_supported(): configs that parse but that this build of the engine
// cannot run are DS_ERR_UNSUPPORTED naming the key and the value; the
// supported set (ZeRO 0-3, fp32/fp16/bf16 with fp32 masters, adam/adamw/lamb/
// lion/SGD, DeepSpeed's five schedulers) passes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "core/error.h"

namespace {

struct Unsup {
    const char* name;
    const char* body;   // keys after "train_batch_size": 4
    int64_t world;
    const char* prefix; // message starts with "<key>: <value> is not supported yet"
};

const std::vector<Unsup>& unsupported() {
    static const std::vector<Unsup> v = {
        {"lamb_zero_2", "\"zero_optimization\": {\"stage\": 2}, \"zero_allow_untested_optimizer\": true, "
         "\"optimizer\": {\"type\": \"Lamb\"}", 2, "optimizer.type: \"lamb\" is not supported yet"},
        {"comm_dtype", "\"bf16\": {\"enabled\": true}, \"communication_data_type\": \"fp32\"", 1,
         "communication_data_type: \"fp32\" is not supported yet"},
        {"aio_use_gds", "\"aio\": {\"use_gds\": true}", 1, "aio.use_gds: true is not supported yet"},
        {"offload_param", "\"zero_optimization\": {\"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"/x\"}}", 1,
         "zero_optimization.offload_param.device: \"nvme\" is not supported yet"},
        {"fp16_auto_cast", "\"fp16\": {\"enabled\": true, \"auto_cast\": true}", 1, "fp16.auto_cast: true is not supported yet"},
        {"onebitadam", "\"optimizer\": {\"type\": \"OneBitAdam\"}", 1, "optimizer.type: \"onebitadam\" is not supported yet"},
        {"zerooneadam", "\"optimizer\": {\"type\": \"ZeroOneAdam\"}", 1, "optimizer.type: \"zerooneadam\" is not supported yet"},
        {"onebitlamb", "\"optimizer\": {\"type\": \"OneBitLamb\"}", 1, "optimizer.type: \"onebitlamb\" is not supported yet"},
        {"adagrad", "\"optimizer\": {\"type\": \"Adagrad\"}", 1, "optimizer.type: \"adagrad\" is not supported yet"},
        {"muadam", "\"optimizer\": {\"type\": \"MuAdam\"}", 1, "optimizer.type: \"muadam\" is not supported yet"},
        {"muadamw", "\"optimizer\": {\"type\": \"muadamw\"}", 1, "optimizer.type: \"muadamw\" is not supported yet"},
        {"musgd", "\"optimizer\": {\"type\": \"MuSGD\"}", 1, "optimizer.type: \"musgd\" is not supported yet"},
        {"muon", "\"optimizer\": {\"type\": \"Muon\"}", 1, "optimizer.type: \"muon\" is not supported yet"},
        {"torch_rmsprop", "\"optimizer\": {\"type\": \"RMSprop\"}", 1, "optimizer.type: \"RMSprop\" is not supported yet"},
        {"sgd_maximize", "\"optimizer\": {\"type\": \"SGD\", \"params\": {\"maximize\": true}}", 1,
         "optimizer.params.maximize: true is not supported yet"},
        {"torch_scheduler", "\"scheduler\": {\"type\": \"StepLR\", \"params\": {\"step_size\": 1}}", 1,
         "scheduler.type: \"StepLR\" is not supported yet"},
        {"wandb", "\"wandb\": {\"enabled\": true}", 1, "wandb.enabled: true is not supported yet"},
        {"comet", "\"comet\": {\"enabled\": true}", 1, "comet.enabled: true is not supported yet"},
        {"torch_autocast", "\"torch_autocast\": {\"enabled\": true}", 1, "torch_autocast.enabled: true is not supported yet"},
        {"ac_partition", "\"activation_checkpointing\": {\"partition_activations\": true}", 1,
         "activation_checkpointing.partition_activations: true is not supported yet"},
        {"ac_profile", "\"activation_checkpointing\": {\"profile\": true}", 1,
         "activation_checkpointing.profile: true is not supported yet"},
        {"load_universal", "\"checkpoint\": {\"load_universal\": true}", 1, "checkpoint.load_universal: true is not supported yet"},
        {"writer", "\"checkpoint\": {\"writer\": {}}", 1, "checkpoint.writer: an object is not supported yet"},
        // Issue 8 §3: keys DeepSpeed parses that would change what is computed or stored.
        {"zq_weights", "\"zero_optimization\": {\"stage\": 3, \"zero_quantized_weights\": true}", 1,
         "zero_optimization.zero_quantized_weights: true is not supported yet"},
        {"zq_nontrainable", "\"zero_optimization\": {\"zero_quantized_nontrainable_weights\": true}", 1,
         "zero_optimization.zero_quantized_nontrainable_weights: true is not supported yet"},
        {"zq_grads", "\"zero_optimization\": {\"zero_quantized_gradients\": true}", 1,
         "zero_optimization.zero_quantized_gradients: true is not supported yet"},
        {"hpz", "\"zero_optimization\": {\"zero_hpz_partition_size\": 8}", 1,
         "zero_optimization.zero_hpz_partition_size: 8 is not supported yet"},
        {"loco", "\"zero_optimization\": {\"zeropp_loco_param\": {\"err_beta\": 0.8, \"reset_T\": 1024}}", 1,
         "zero_optimization.zeropp_loco_param: an object is not supported yet"},
        {"mics_shard", "\"zero_optimization\": {\"stage\": 3, \"mics_shard_size\": 2}", 2,
         "zero_optimization.mics_shard_size: 2 is not supported yet"},
        {"mics_hier", "\"zero_optimization\": {\"mics_hierarchical_params_gather\": true}", 1,
         "zero_optimization.mics_hierarchical_params_gather: true is not supported yet"},
        {"elastic_ckpt", "\"zero_optimization\": {\"stage\": 2, \"elastic_checkpoint\": true}", 1,
         "zero_optimization.elastic_checkpoint: true is not supported yet"},
        {"node_local", "\"checkpoint\": {\"use_node_local_storage\": true}", 1,
         "checkpoint.use_node_local_storage: true is not supported yet"},
        {"bf16_no_check", "\"bf16\": {\"enabled\": true, \"check_grad_overflow\": false}", 1,
         "bf16.check_grad_overflow: false is not supported yet"},
        {"param_dtype", "\"data_types\": {\"param_dtype\": \"bf16\"}", 1,
         "data_types.param_dtype: \"bf16\" is not supported yet"},
        {"sparse_gradients", "\"sparse_gradients\": true", 1, "sparse_gradients: true is not supported yet"},
        {"pipeline_stages", "\"pipeline\": {\"stages\": 2}", 1, "pipeline.stages: 2 is not supported yet"},
        {"pipeline_partition", "\"pipeline\": {\"partition\": \"uniform\"}", 1,
         "pipeline.partition: \"uniform\" is not supported yet"},
        {"pipeline_seed", "\"pipeline\": {\"seed_layers\": true}", 1, "pipeline.seed_layers: true is not supported yet"},
        {"pipeline_interval", "\"pipeline\": {\"activation_checkpoint_interval\": 1}", 1,
         "pipeline.activation_checkpoint_interval: 1 is not supported yet"},
        {"pipeline_pipe_partitioned", "\"pipeline\": {\"pipe_partitioned\": false}", 1,
         "pipeline.pipe_partitioned: false is not supported yet"},
        {"pipeline_grad_partitioned", "\"pipeline\": {\"grad_partitioned\": false}", 1,
         "pipeline.grad_partitioned: false is not supported yet"},
    };
    return v;
}

// Master-weight options only parse together with ZeRO stage >= 1, whose rule
// fires first; set them on a parsed stage-0 Config to reach their own rows.
TEST(ConfigSupported, MasterWeightOptionsAreUnsupported) {
    ds::config::Config c = ds::config::parse("{\"train_batch_size\": 4}", 1);
    c.fp16.fp16_master_weights_and_grads = true;
    try {
        ds::config::check_supported(c);
        FAIL();
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_UNSUPPORTED);
        EXPECT_EQ(std::string(e.what()).rfind("fp16.fp16_master_weights_and_grads: true is not supported yet", 0), 0u);
    }
    c = ds::config::parse("{\"train_batch_size\": 4}", 1);
    c.bf16.bf16_master_weights_and_grads = true;
    EXPECT_THROW(ds::config::check_supported(c), ds::Error);
    c = ds::config::parse("{\"train_batch_size\": 4}", 1);
    c.bf16.bf16_optimizer_states = true;
    try {
        ds::config::check_supported(c);
        FAIL();
    } catch (const ds::Error& e) {
        EXPECT_EQ(std::string(e.what()).rfind("bf16.bf16_optimizer_states: true", 0), 0u) << e.what();
    }
}

void PrintTo(const Unsup& u, std::ostream* os) { *os << u.body; }

class ConfigUnsupported : public ::testing::TestWithParam<Unsup> {};

TEST_P(ConfigUnsupported, NamesKeyAndValue) {
    const Unsup& u = GetParam();
    const std::string json = std::string("{\"train_batch_size\": 4") + (u.body[0] ? ", " : "") + u.body + "}";
    const ds::config::Config c = ds::config::parse(json, u.world);  // parses fine
    try {
        ds::config::check_supported(c);
        FAIL() << "supported: " << json;
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_UNSUPPORTED);
        EXPECT_EQ(std::string(e.what()).rfind(u.prefix, 0), 0u) << e.what();
    }
}

INSTANTIATE_TEST_SUITE_P(Config, ConfigUnsupported, ::testing::ValuesIn(unsupported()),
                         [](const ::testing::TestParamInfo<Unsup>& i) { return std::string(i.param.name); });

TEST(ConfigSupported, EngineSupportedConfigsPass) {
    const std::vector<std::string> ok = {
        "{\"train_batch_size\": 4}",
        "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"Adam\"}, \"fp16\": {\"enabled\": true}, "
        "\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"total_num_steps\": 10}}}",
        "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"lamb\"}, \"fp16\": {\"enabled\": true, \"loss_scale\": 0}}",
        "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"lion\"}, \"bf16\": {\"enabled\": true}, "
        "\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 0.001, \"cycle_max_lr\": 0.01}}}",
        "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.1}}, "
        "\"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {\"total_num_steps\": 10}}}",
        "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"adamw\"}, \"scheduler\": {\"type\": \"LRRangeTest\"}, "
        "\"zero_optimization\": {\"stage\": 0, \"offload_optimizer\": {\"device\": \"none\"}}, "
        "\"activation_checkpointing\": {}, \"pipeline\": {\"stages\": \"auto\"}, \"checkpoint\": {\"writer\": null}}",
    };
    for (const auto& j : ok) EXPECT_NO_THROW(ds::config::check_supported(ds::config::parse(j, 1))) << j;
    const std::vector<std::string> ok_world3 = {
        "{\"train_batch_size\": 6, \"optimizer\": {\"type\": \"Adam\"}, \"zero_optimization\": {\"stage\": 1}}",
        "{\"train_batch_size\": 6, \"optimizer\": {\"type\": \"Adam\"}, \"bf16\": {\"enabled\": true}, "
        "\"zero_optimization\": {\"stage\": 2, \"overlap_comm\": true, \"round_robin_gradients\": true}}",
        "{\"train_batch_size\": 6, \"optimizer\": {\"type\": \"lamb\"}, \"zero_optimization\": {\"stage\": 0}}",
    };
    // Optimizer offload: "cpu" is what the CPU engine does (said in the
    // resolved config's "ignored" list), "nvme" is built below ZeRO-3.
    const std::vector<std::string> offload = {
        "{\"train_batch_size\": 6, \"optimizer\": {\"type\": \"Adam\"}, \"zero_optimization\": {\"stage\": 2, "
        "\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"/x\"}}, \"aio\": {\"block_size\": 262144}}",
        "{\"train_batch_size\": 6, \"optimizer\": {\"type\": \"Adam\"}, \"zero_optimization\": {\"stage\": 1, "
        "\"offload_optimizer\": {\"device\": \"cpu\"}, \"offload_param\": {\"device\": \"cpu\"}}}",
    };
    for (const auto& j : offload) EXPECT_NO_THROW(ds::config::check_supported(ds::config::parse(j, 3))) << j;
    for (const auto& j : ok_world3) EXPECT_NO_THROW(ds::config::check_supported(ds::config::parse(j, 3))) << j;
}

}  // namespace

namespace {

// offload_optimizer.device "cpu" is accepted and the resolved config says
// what it means on this engine; aio's older thread_count spelling is read.
TEST(ConfigOffload, CpuDeviceIsStateInHostMemoryInResolvedConfig) {
    const ds::config::Config c = ds::config::parse(
        "{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": \"cpu\"}}}",
        1);
    EXPECT_NO_THROW(ds::config::check_supported(c));
    const std::string json = ds::config::to_json(c);
    EXPECT_NE(json.find("state in host memory"), std::string::npos) << json;
    const ds::config::Config none = ds::config::parse("{\"train_batch_size\": 4}", 1);
    EXPECT_EQ(ds::config::to_json(none).find("state in host memory"), std::string::npos);
}

TEST(ConfigOffload, AioDefaultsAndThreadCountAlias) {
    const ds::config::Config d = ds::config::parse("{\"train_batch_size\": 4}", 1);
    EXPECT_EQ(d.sections.aio.block_size, 1048576);
    EXPECT_EQ(d.sections.aio.queue_depth, 8);
    EXPECT_EQ(d.sections.aio.intra_op_parallelism, 1);
    EXPECT_FALSE(d.sections.aio.single_submit);
    EXPECT_TRUE(d.sections.aio.overlap_events);
    EXPECT_FALSE(d.sections.aio.use_gds);
    const ds::config::Config c = ds::config::parse("{\"train_batch_size\": 4, \"aio\": {\"thread_count\": 3}}", 1);
    EXPECT_EQ(c.sections.aio.intra_op_parallelism, 3);
    try {
        (void)ds::config::parse("{\"train_batch_size\": 4, \"aio\": {\"queue_depth\": 0}}", 1);
        FAIL();
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_INVALID_CONFIG);
        EXPECT_NE(std::string(e.what()).find("aio.queue_depth"), std::string::npos) << e.what();
    }
    const ds::config::Config o = ds::config::parse(
        "{\"train_batch_size\": 4, \"zero_optimization\": {\"offload_optimizer\": {\"device\": \"nvme\", "
        "\"nvme_path\": \"/x\"}}}", 1);
    EXPECT_EQ(o.zero_optimization.offload_optimizer->buffer_count, 4);
    EXPECT_FALSE(o.zero_optimization.offload_optimizer->pipeline_read);
    EXPECT_FALSE(o.zero_optimization.offload_optimizer->pipeline_write);
    EXPECT_EQ(o.zero_optimization.sub_group_size, 1000000000);
}

// The ZeRO-3 prefetch and reuse knobs are honoured (zero/prefetch_plan.h),
// except with parameters on NVMe, where the resolved config lists them as
// ignored.
TEST(ConfigPrefetch, HonouredExceptWithParametersOnNvme) {
    const char* knobs = "\"stage3_prefetch_bucket_size\": 1000, \"stage3_max_live_parameters\": 5000, "
                        "\"stage3_allgather_sequential\": true, \"stage3_max_reuse_distance\": 7";
    const ds::config::Config c = ds::config::parse(
        std::string("{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": 3, ") + knobs + "}}", 1);
    EXPECT_EQ(c.zero_optimization.prefetch_bucket_size, 1000);
    EXPECT_EQ(c.zero_optimization.max_live_parameters, 5000);
    EXPECT_TRUE(c.zero_optimization.allgather_sequential);
    const std::string json = ds::config::to_json(c);
    EXPECT_EQ(json.find("\"zero_optimization.stage3_prefetch_bucket_size\":"), std::string::npos) << json;
    EXPECT_EQ(json.find("\"zero_optimization.stage3_max_live_parameters\":"), std::string::npos) << json;
    EXPECT_EQ(json.find("\"zero_optimization.stage3_allgather_sequential\":"), std::string::npos) << json;
    EXPECT_EQ(json.find("\"zero_optimization.stage3_max_reuse_distance\":"), std::string::npos) << json;
    EXPECT_EQ(c.zero_optimization.max_reuse_distance, 7);
    const ds::config::Config n = ds::config::parse(
        std::string("{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": 3, ") + knobs +
            ", \"offload_optimizer\": {\"device\": \"cpu\"}, \"offload_param\": {\"device\": \"nvme\", "
            "\"nvme_path\": \"/x\"}}}",
        1);
    const std::string nj = ds::config::to_json(n);
    for (const char* key : {"stage3_prefetch_bucket_size", "stage3_max_live_parameters", "stage3_allgather_sequential",
                            "stage3_max_reuse_distance"})
        EXPECT_NE(nj.find(std::string("\"zero_optimization.") + key + "\": \"with offload_param.device \\\"nvme\\\""),
                  std::string::npos)
            << key << ": " << nj;
}

}  // namespace
