// Communicator::split (ds_comm_split) under mpirun with 2, 3 and 4 ranks:
// membership and order (MPI_Comm_split's rule: by key, ties by parent rank),
// undefined colors, every collective and point to point on a part, parts
// failing independently of their parent, a rank missing the split (timeout,
// not a hang), and a ZeRO-1 engine on a part against one process.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <thread>

#include "comm_test_util.h"
#include "engine/engine.h"
#include "mpi_gtest_main.h"

using namespace ds_comm_test;
using ds::comm::Communicator;

namespace {

// The parent ranks of `color`'s part, in their order there: by key, then parent rank.
std::vector<int> expected_members(const std::vector<int>& colors, const std::vector<int>& keys, int color) {
    std::vector<int> m;
    for (int r = 0; r < static_cast<int>(colors.size()); ++r)
        if (colors[static_cast<size_t>(r)] == color) m.push_back(r);
    std::stable_sort(m.begin(), m.end(), [&](int a, int b) { return keys[static_cast<size_t>(a)] < keys[static_cast<size_t>(b)]; });
    return m;
}

// Checks a part against the expected members: size, rank, and an allgather
// of the parent ranks (which also proves the data moves on the part).
void check_part(Communicator& part, const std::vector<int>& members, int parent_rank) {
    ASSERT_EQ(part.size(), static_cast<int>(members.size()));
    const auto it = std::find(members.begin(), members.end(), parent_rank);
    ASSERT_NE(it, members.end());
    EXPECT_EQ(part.rank(), static_cast<int>(it - members.begin()));
    int32_t mine = parent_rank;
    std::vector<int32_t> all(members.size(), -1);
    part.allgather(&mine, all.data(), 1, DType::I32);
    for (size_t i = 0; i < members.size(); ++i) EXPECT_EQ(all[i], members[i]) << "member " << i;
}

}  // namespace

TEST(CommSplit, ParityColorsReverseKeys) {
    auto world = world_comm();
    const int n = world->size(), r = world->rank();
    std::vector<int> colors(static_cast<size_t>(n)), keys(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        colors[static_cast<size_t>(i)] = i % 2;
        keys[static_cast<size_t>(i)] = -i;  // reverse order
    }
    auto part = world->split(colors[static_cast<size_t>(r)], keys[static_cast<size_t>(r)]);
    ASSERT_TRUE(part);
    EXPECT_EQ(part->backend(), ds::comm::Backend::Mpi);
    check_part(*part, expected_members(colors, keys, r % 2), r);
    part->finalize();
    world->finalize();
}

TEST(CommSplit, EqualKeysKeepParentOrderAndUndefinedColorsGetNothing) {
    auto world = world_comm();
    const int n = world->size(), r = world->rank();
    // Rank 0 joins nothing; the others form one part with equal keys.
    std::vector<int> colors(static_cast<size_t>(n), 5), keys(static_cast<size_t>(n), 0);
    colors[0] = ds::comm::kSplitUndefined;
    auto part = world->split(colors[static_cast<size_t>(r)], 0);
    if (r == 0) {
        EXPECT_FALSE(part);
    } else {
        ASSERT_TRUE(part);
        check_part(*part, expected_members(colors, keys, 5), r);
        part->finalize();
    }
    // The parent still works after a split.
    float x = 1;
    world->allreduce(&x, &x, 1, DType::F32, Op::Sum);
    EXPECT_EQ(x, static_cast<float>(n));
    world->finalize();
}

TEST(CommSplit, EveryOperationRunsOnAPart) {
    auto world = world_comm();
    const int r = world->rank();
    auto part = world->split(r / 2, r);  // pairs {0,1}, {2,3}; with 3 ranks {2} alone
    ASSERT_TRUE(part);
    const int pn = part->size(), pr = part->rank();
    const int base = (r / 2) * 2;  // the part's first parent rank
    ASSERT_EQ(pr, r - base);

    float sum = static_cast<float>(r);
    part->allreduce(&sum, &sum, 1, DType::F32, Op::Sum);
    float want = 0;
    for (int i = 0; i < pn; ++i) want += static_cast<float>(base + i);
    EXPECT_EQ(sum, want);

    std::vector<float> rs(static_cast<size_t>(pn), static_cast<float>(r)), out(1);
    part->reduce_scatter(rs.data(), out.data(), 1, DType::F32, Op::Sum);
    EXPECT_EQ(out[0], want);

    int64_t root_value = pr == 0 ? 1000 + r : -1;
    part->broadcast(&root_value, 1, DType::I64, 0);
    EXPECT_EQ(root_value, 1000 + base);

    std::vector<int32_t> to(static_cast<size_t>(pn)), from(static_cast<size_t>(pn), -1);
    for (int j = 0; j < pn; ++j) to[static_cast<size_t>(j)] = 100 * r + j;  // block j goes to part rank j
    part->alltoall(to.data(), from.data(), 1, DType::I32);
    for (int i = 0; i < pn; ++i) EXPECT_EQ(from[static_cast<size_t>(i)], 100 * (base + i) + pr);

    part->barrier();
    if (pn == 2) {  // point to point with the partner, both directions
        const int peer = 1 - pr;
        float mine = static_cast<float>(r), theirs = -1;
        auto s = part->send_async(&mine, 1, DType::F32, peer, 7);
        part->recv(&theirs, 1, DType::F32, peer, 7);
        s->wait();
        EXPECT_EQ(theirs, static_cast<float>(base + peer));
    }
    part->finalize();
    world->finalize();
}

TEST(CommSplit, AbortingAPartLeavesTheParentAndOtherPartsUsable) {
    auto world = world_comm();
    const int n = world->size(), r = world->rank();
    auto part = world->split(r == 0 ? 0 : 1, 0);
    ASSERT_TRUE(part);
    if (r == 0) part->abort("part of rank 0 dropped on purpose");
    EXPECT_EQ(part->broken(), r == 0);
    float x = 1;
    world->allreduce(&x, &x, 1, DType::F32, Op::Sum);
    EXPECT_EQ(x, static_cast<float>(n));
    if (r != 0) {
        float y = 1;
        part->allreduce(&y, &y, 1, DType::F32, Op::Sum);
        EXPECT_EQ(y, static_cast<float>(n - 1));
        part->finalize();
    } else {
        try {
            part->split(0, 0);
            ADD_FAILURE() << "split of an aborted communicator did not throw";
        } catch (const ds::Error& e) {
            EXPECT_EQ(e.status(), DS_ERR_COMM);
            EXPECT_NE(std::string(e.what()).find("dropped on purpose"), std::string::npos) << e.what();
        }
    }
    world->finalize();
}

TEST(CommSplit, ARankThatNeverSplitsTimesTheOthersOut) {
    auto world = world_comm(/*timeout_ms=*/1500);
    world->barrier();
    const auto t0 = std::chrono::steady_clock::now();
    if (world->rank() == 0) {
        // Never calls split; the others' timeout notices break this rank's communicator too.
        for (int i = 0; i < 100 && !world->broken(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        EXPECT_TRUE(world->broken());
    } else {
        try {
            world->split(0, 0);
            ADD_FAILURE() << "split without rank 0 did not fail";
        } catch (const ds::Error& e) {
            EXPECT_TRUE(e.status() == DS_ERR_TIMEOUT || e.status() == DS_ERR_COMM) << e.what();
        }
        EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

// ---------------------------------------------------------------------------
// An engine on a part: ZeRO-1 over the pair {2g, 2g+1} equals ZeRO-0 in one
// process fed the pair's global batch (fp32, one micro-batch per rank per
// step, clipping off: the same two-term sums, so bitwise; see
// test_zero_stages.cpp for the argument).
// ---------------------------------------------------------------------------
namespace {

const std::vector<int64_t> kSizes = {1, 5, 33, 257};

float grad_of(float w, int64_t k, size_t i, int64_t j) {
    const double phase = 0.37 * static_cast<double>(k) + 1.3 * static_cast<double>(i) + 0.11 * static_cast<double>(j);
    return 0.05f * (w - 0.25f) + 0.02f * static_cast<float>(std::sin(phase));
}

std::string config(int stage, int gas) {
    return "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": " + std::to_string(gas) +
           ", \"zero_optimization\": {\"stage\": " + std::to_string(stage) + "}" +
           ", \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001, \"weight_decay\": 0.01}}}";
}

DLTensor f32_view(float* p, int64_t* shape) {
    DLTensor t{};
    t.data = p;
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
    return t;
}

std::unique_ptr<ds::Engine> make(const std::string& json, std::shared_ptr<Communicator> comm) {
    ds::EngineOptions o;
    o.log_level = DS_LOG_WARN;
    auto e = std::make_unique<ds::Engine>(json, o, std::move(comm));
    for (size_t i = 0; i < kSizes.size(); ++i) {
        std::vector<float> init(static_cast<size_t>(kSizes[i]));
        for (int64_t j = 0; j < kSizes[i]; ++j) init[static_cast<size_t>(j)] = std::cos(static_cast<float>(3 * j + i));
        int64_t shape = kSizes[i];
        DLTensor t = f32_view(init.data(), &shape);
        e->add_param(("p" + std::to_string(i)).c_str(), &t, DS_PARAM_TRAINABLE);
    }
    e->init();
    return e;
}

void micro_step(ds::Engine& e, int64_t k) {
    std::vector<std::vector<float>> grads(kSizes.size());
    for (size_t i = 0; i < kSizes.size(); ++i) {
        DLTensor v{};
        e.param_view(("p" + std::to_string(i)).c_str(), &v);
        grads[i].resize(static_cast<size_t>(kSizes[i]));
        for (int64_t j = 0; j < kSizes[i]; ++j)
            grads[i][static_cast<size_t>(j)] = grad_of(static_cast<const float*>(v.data)[j], k, i, j);
    }
    for (size_t i = 0; i < kSizes.size(); ++i) {
        int64_t shape = kSizes[i];
        DLTensor t = f32_view(grads[i].data(), &shape);
        e.accumulate_grad(("p" + std::to_string(i)).c_str(), &t);
    }
    e.backward(nullptr);
    e.step();
}

}  // namespace

TEST(CommSplit, Zero1EngineOnAPairEqualsOneProcess) {
    auto world = world_comm();
    const int r = world->rank();
    const int group = r / 2;
    auto part = world->split(group, r);
    ASSERT_TRUE(part);
    const int pn = part->size(), pr = part->rank();
    auto dist = make(config(1, 1), part);
    ASSERT_EQ(dist->world_size(), pn);
    auto ref = make(config(0, pn), ds::comm::make_local(ds::comm::Options{}));
    const int steps = 20;
    // Each group trains on its own data (offset by group), so a mix-up of
    // parts would show.
    const int64_t offset = 1000 * group;
    for (int s = 0; s < steps; ++s) {
        micro_step(*dist, offset + static_cast<int64_t>(s) * pn + pr);
        for (int q = 0; q < pn; ++q) micro_step(*ref, offset + static_cast<int64_t>(s) * pn + q);
    }
    EXPECT_EQ(dist->counters().global_steps, steps);
    for (size_t i = 0; i < kSizes.size(); ++i) {
        const std::string name = "p" + std::to_string(i);
        std::vector<float> a(static_cast<size_t>(kSizes[i])), b(a.size());
        int64_t shape = kSizes[i];
        DLTensor ta = f32_view(a.data(), &shape), tb = f32_view(b.data(), &shape);
        dist->get_full(ds::FullTensor::Param, name.c_str(), nullptr, &ta);  // collective on the part
        ref->get_full(ds::FullTensor::Param, name.c_str(), nullptr, &tb);
        for (size_t j = 0; j < a.size(); ++j)
            ASSERT_EQ(std::memcmp(&a[j], &b[j], 4), 0) << name << "[" << j << "] " << a[j] << " vs " << b[j];
        // and the trained weights moved (the comparison is not of two untouched copies)
        EXPECT_NE(a[0], std::cos(static_cast<float>(i))) << name;
    }
    dist.reset();
    part->finalize();
    world->finalize();
}
