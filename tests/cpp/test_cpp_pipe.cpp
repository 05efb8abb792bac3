// deepspeed_c_pipe.hpp and the newer Comm/Engine calls: PipeSchedule (every
// stream of DeepSpeed's own schedules in tests/data/pipe/schedules.txt),
// Topology (round trips against the row-major formula and DeepSpeed's
// topology fixtures), Comm::split, Topology::comm, pipe_send/recv argument
// errors, and Engine::offload_states / reload_states bit-identical around an
// evaluation.
#include <stdlib.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cpp_test_util.h"

#ifndef DS_PIPE_FIXTURES_DIR
#error "DS_PIPE_FIXTURES_DIR (tests/data/pipe) must be defined"
#endif

namespace {

const std::map<std::string, ds::ScheduleKind> kKinds = {
    {"train", ds::ScheduleKind::train},
    {"inference", ds::ScheduleKind::inference},
    {"data_parallel", ds::ScheduleKind::data_parallel}};

struct Expected {
    std::string kind;
    int32_t stages = 0, micro_batches = 0, stage_id = 0, buffers = 0, steps = 0;
    std::vector<std::string> lines;  // "<step> <name> <buffer> <micro_batch>"
};

std::vector<Expected> read_schedules() {
    std::ifstream f(std::string(DS_PIPE_FIXTURES_DIR) + "/schedules.txt");
    std::vector<Expected> out;
    std::string line;
    while (std::getline(f, line)) {
        std::istringstream in(line);
        std::string tag;
        in >> tag;
        if (tag == "S") {
            out.emplace_back();
            Expected& e = out.back();
            in >> e.kind >> e.stages >> e.micro_batches >> e.stage_id >> e.buffers >> e.steps;
        } else if (tag == "I") {
            out.back().lines.push_back(line.substr(2));
        }
    }
    return out;
}

std::string text(const ds::PipeInstr& i) {
    return std::to_string(i.step) + " " + std::string(i.name()) + " " + std::to_string(i.buffer_id) + " " +
           std::to_string(i.micro_batch);
}

// One block of partitions.txt: method, stages, layers, W counts, N names, R boundaries.
struct PartitionCase {
    std::string method;
    int32_t stages = 0, layers = 0;
    std::vector<int64_t> counts;
    std::vector<std::string> names;
    std::vector<int32_t> parts;
};

std::vector<PartitionCase> read_partitions() {
    std::ifstream f(std::string(DS_PIPE_FIXTURES_DIR) + "/partitions.txt");
    std::vector<PartitionCase> out;
    std::string line;
    while (std::getline(f, line)) {
        std::istringstream in(line);
        std::string tag;
        in >> tag;
        if (tag == "P") {
            out.emplace_back();
            in >> out.back().method >> out.back().stages >> out.back().layers;
        } else if (tag == "W") {
            for (int64_t v; in >> v;) out.back().counts.push_back(v);
        } else if (tag == "N") {
            for (std::string v; in >> v;) out.back().names.push_back(v);
        } else if (tag == "R") {
            for (int32_t v; in >> v;) out.back().parts.push_back(v);
        }
    }
    return out;
}

}  // namespace

TEST(CppPipe, PartitionLayersMatchesDeepSpeed) {
    const std::vector<PartitionCase> cases = read_partitions();
    ASSERT_GE(cases.size(), 100u);
    for (const PartitionCase& c : cases)
        EXPECT_EQ(ds::partition_layers(c.method, c.stages, c.layers, c.counts, c.names), c.parts)
            << c.method << " " << c.stages << " stages, " << c.layers << " layers";
    try {
        ds::partition_layers("type:moe", 2, 2, {}, {"Embedding", "Linear"});
        ADD_FAILURE() << "no throw";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), ds::Status::invalid_argument);
        EXPECT_NE(std::string(e.what()).find("matches no layer"), std::string::npos) << e.what();
    }
    EXPECT_THROW(ds::partition_layers("parameters", 2, 3, {1, 2}), ds::Error);
}

TEST(CppPipeSchedule, EveryStreamMatchesDeepSpeed) {
    const std::vector<Expected> all = read_schedules();
    ASSERT_GT(all.size(), 100u) << "fixtures not found under " DS_PIPE_FIXTURES_DIR;
    for (const Expected& e : all) {
        ds::PipeSchedule s(kKinds.at(e.kind), e.micro_batches, e.stages, e.stage_id);
        SCOPED_TRACE(e.kind + " stages " + std::to_string(e.stages) + " micro_batches " +
                     std::to_string(e.micro_batches) + " stage " + std::to_string(e.stage_id));
        EXPECT_EQ(s.num_buffers(), e.buffers);
        EXPECT_EQ(s.num_steps(), e.steps);
        for (int pass = 0; pass < 2; ++pass) {  // range-for restarts from the first instruction
            std::vector<std::string> got;
            for (const ds::PipeInstr& i : s) got.push_back(text(i));
            ASSERT_EQ(got, e.lines);
        }
        std::vector<std::string> by_step;  // random access gives the same stream
        for (int32_t st = 0; st < s.num_steps(); ++st)
            for (const ds::PipeInstr& i : s.step_instrs(st)) by_step.push_back(text(i));
        EXPECT_EQ(by_step, e.lines);
        EXPECT_FALSE(s.next().has_value());  // exhausted after the range-for
    }
}

TEST(CppPipeSchedule, BadArgumentsAreNamed) {
    EXPECT_DS_ERROR(ds::PipeSchedule(ds::ScheduleKind::train, 4, 2, 2), ds::Status::invalid_argument, "stage_id");
    EXPECT_DS_ERROR(ds::PipeSchedule(ds::ScheduleKind::train, 0, 2, 0), ds::Status::invalid_argument,
                    "micro_batches");
    EXPECT_DS_ERROR(ds::PipeSchedule(static_cast<ds::ScheduleKind>(9), 1, 1, 0), ds::Status::invalid_argument, "kind");
    ds::PipeSchedule s(ds::ScheduleKind::train, 2, 2, 0);
    EXPECT_DS_ERROR(s.step_size(s.num_steps()), ds::Status::invalid_argument, "step");
    EXPECT_DS_ERROR(s.instr(0, 99), ds::Status::invalid_argument, "index");
    EXPECT_EQ(ds::pipe_instr_name(static_cast<ds::PipeOp>(42)), "?");
    ds::PipeSchedule moved = std::move(s);
    EXPECT_DS_ERROR(s.next(), ds::Status::invalid_handle, "");
    EXPECT_TRUE(moved.next().has_value());
}

TEST(CppTopology, RoundTripsAndRowMajorOrder) {
    ds::Topology t = ds::Topology::pipe_model_data(2, 3, 2);  // dims pipe 2, data 2, model 3
    ASSERT_EQ(t.world_size(), 12);
    std::vector<ds::TopologyAxis> axes = t.axes();
    ASSERT_EQ(axes.size(), 3u);
    EXPECT_EQ(axes[0].name, "pipe");
    EXPECT_EQ(axes[1].name, "data");
    EXPECT_EQ(axes[2].name, "model");
    EXPECT_EQ(t.dim("model"), 3);
    EXPECT_EQ(t.dim("expert"), 0);
    for (int32_t r = 0; r < 12; ++r) {
        const std::vector<int32_t> c = t.coord_of(r);
        EXPECT_EQ(c, (std::vector<int32_t>{r / 6, (r / 3) % 2, r % 3}));  // last axis fastest
        EXPECT_EQ(t.rank_of(c), r);
    }
    EXPECT_EQ(t.axis_comm_lists("pipe"),
              (std::vector<std::vector<int32_t>>{{0, 6}, {1, 7}, {2, 8}, {3, 9}, {4, 10}, {5, 11}}));
    EXPECT_EQ(t.axis_comm_lists("model"),
              (std::vector<std::vector<int32_t>>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10, 11}}));
    EXPECT_TRUE(t.axis_comm_lists("expert").empty());
    EXPECT_EQ(t.filter_match({{"pipe", 1}, {"model", 2}}), (std::vector<int32_t>{8, 11}));
    EXPECT_EQ(t.filter_match({}).size(), 12u);
    EXPECT_EQ(t.rank_repr(5), "model_02");
    EXPECT_EQ(t.rank_repr(11, std::vector<std::string>{"model"}), "pipe_01-data_01");
    EXPECT_EQ(t.rank_repr(11, std::vector<std::string>{"pipe", "data", "model"}), "");

    ds::Topology d = ds::Topology::default_for(12);  // 2, 2, 3 dealt: pipe 2*3, data 2
    EXPECT_EQ(d.dim("pipe"), 6);
    EXPECT_EQ(d.dim("data"), 2);
    ds::Topology custom({"a", "b"}, {3, 5});
    EXPECT_EQ(custom.rank_of({2, 4}), 14);
}

TEST(CppTopology, BadArgumentsAreNamed) {
    EXPECT_DS_ERROR(ds::Topology({"pipe", "pipe"}, {2, 2}), ds::Status::invalid_argument, "pipe");
    EXPECT_DS_ERROR(ds::Topology({"pipe", "data"}, {2}), ds::Status::invalid_argument, "dims");
    EXPECT_DS_ERROR(ds::Topology({"pipe"}, {0}), ds::Status::invalid_argument, "");
    ds::Topology t = ds::Topology::pipe_data(2, 2);
    EXPECT_DS_ERROR(t.rank_of({0, 2}), ds::Status::invalid_argument, "data");
    EXPECT_DS_ERROR(t.coord_of(4), ds::Status::invalid_argument, "rank");
    EXPECT_DS_ERROR(t.filter_match({{"model", 0}}), ds::Status::invalid_argument, "model");
    EXPECT_DS_ERROR(t.rank_repr(9), ds::Status::invalid_argument, "rank");
    ds::Comm world = ds::Comm::world();
    EXPECT_DS_ERROR(t.comm("pipe", world), ds::Status::invalid_argument, "has 4");
}

TEST(CppComm, SplitAndTopologyCommOnAWorldOfOne) {
    ds::CommOptions o;
    o.backend = ds::Backend::local;
    ds::Comm world = ds::Comm::world(o);
    ds::Comm sub = world.split(3, 0);
    ASSERT_TRUE(sub);
    EXPECT_EQ(sub.size(), 1);
    EXPECT_EQ(sub.rank(), 0);
    ds::Comm none = world.split(DS_COMM_SPLIT_UNDEFINED);
    EXPECT_FALSE(none);
    ds::Topology t = ds::Topology::pipe_data(1, 1);
    ds::Comm pipe = t.comm("pipe", world);
    EXPECT_EQ(pipe.size(), 1);
    ds::Comm group = t.group_comm({"pipe", "data"}, world);
    EXPECT_EQ(group.size(), 1);
    EXPECT_DS_ERROR(t.comm("model", world), ds::Status::invalid_argument, "model");
    EXPECT_DS_ERROR(ds::Comm().split(0), ds::Status::invalid_handle, "");
    // p2p needs a peer other than this rank: named, nothing sent
    std::vector<float> x{1, 2, 3};
    EXPECT_DS_ERROR(ds::pipe_send(world, {x, {3}}, 0, 0), ds::Status::invalid_argument, "peer");
    EXPECT_DS_ERROR(ds::pipe_recv(world, ds::TensorRef(x, {3}), 1, 0), ds::Status::invalid_argument, "peer");
    const std::vector<float> cx{1, 2, 3};
    EXPECT_DS_ERROR(ds::pipe_recv(world, ds::TensorRef(cx, {3}), 1, 0), ds::Status::invalid_argument, "read-only");
}

namespace {

const char* kMlp =
    R"({"type": "sequential", "seed": 3, "loss": "mse", "layers": [)"
    R"({"type": "linear", "in_features": 3, "out_features": 8}, {"type": "gelu"},)"
    R"({"type": "linear", "in_features": 8, "out_features": 2}]})";
const char* kAdam =
    R"({"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}})";

std::vector<std::vector<float>> masters(ds::Engine& e) {
    std::vector<std::vector<float>> out;
    for (const ds::ParamInfo& p : e.named_parameters()) out.push_back(e.get_full_fp32_param(p.name));
    return out;
}

}  // namespace

TEST(CppEngine, OffloadReloadBitIdenticalAroundEval) {
    char dir[] = "/tmp/ds_cpp_offload_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    ds::Engine a = ds::Engine::with_model(kAdam, ds::Model(kMlp)), b = ds::Engine::with_model(kAdam, ds::Model(kMlp));
    std::vector<float> x(12), t(8);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * float(i) - 0.5f;
    for (size_t i = 0; i < t.size(); ++i) t[i] = 0.2f * float(i % 3);
    auto train = [&](ds::Engine& e) {
        const float loss = e.forward({x, {4, 3}}, {t, {4, 2}});
        e.backward();
        e.step();
        return loss;
    };
    for (int s = 0; s < 3; ++s) EXPECT_EQ(train(a), train(b));
    const std::vector<std::vector<float>> before = masters(a);
    const int64_t resident = a.memory_report().total_bytes;

    // optimizer states, master weights and gradients out: evaluation still runs
    a.offload_states(ds::offload_optim_states | ds::offload_hp_params | ds::offload_lp_grads,
                     ds::OffloadDevice::nvme, std::string(dir));
    EXPECT_LE(a.memory_report().total_bytes, resident);
    EXPECT_GT(a.disk_report().optimizer_state_bytes, 0);
    EXPECT_GT(a.disk_report().grads_bytes, 0);
    a.eval();
    b.eval();
    EXPECT_EQ(a.forward({x, {4, 3}}, {t, {4, 2}}), b.forward({x, {4, 3}}, {t, {4, 2}}));
    a.train();
    b.train();
    a.reload_states();
    EXPECT_EQ(masters(a), before);

    // everything out: forward is refused, naming the way back
    a.offload_states(0, ds::OffloadDevice::nvme, std::string(dir));
    EXPECT_DS_ERROR(a.forward({x, {4, 3}}, {t, {4, 2}}), ds::Status::invalid_state, "reload_states");
    a.reload_states();
    a.reload_states();  // nothing out: a no-op
    EXPECT_EQ(masters(a), before);
    for (int s = 0; s < 2; ++s) EXPECT_EQ(train(a), train(b));  // training continues identically
    EXPECT_EQ(masters(a), masters(b));

    a.offload_states(0, ds::OffloadDevice::cpu);  // host memory already: nothing moves
    EXPECT_EQ(train(a), train(b));
    a.empty_partition_cache();  // below ZeRO-3: a no-op
    EXPECT_DS_ERROR(a.offload_states(0x100), ds::Status::invalid_argument, "which");
    EXPECT_DS_ERROR(a.offload_states(0, static_cast<ds::OffloadDevice>(7)), ds::Status::invalid_argument, "device");
    EXPECT_DS_ERROR(a.offload_states(0, ds::OffloadDevice::nvme, std::string(dir) + "/missing"),
                    ds::Status::invalid_argument, "missing");
    EXPECT_EQ(train(a), train(b));
    rmdir(dir);
}
