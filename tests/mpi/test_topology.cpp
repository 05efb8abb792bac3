// ds_topology_comm / ds_topology_group_comm under mpirun (2, 3 and 4 ranks):
// for every layout of the world as 2 or 3 named axes, each axis'
// communicator has the members of this rank's list in
// ds_topology_axis_comm_lists (checked against DeepSpeed's output in
// tests/c_api/test_topology.c), ranked by coordinate: an all-reduce of the
// world ranks gives their sum, an all-gather gives them in order. The
// multi-axis groups (DeepSpeed's model-parallel group = pipe x model) too.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "api/comm_handles.h"
#include "comm_test_util.h"
#include "deepspeed_c.h"
#include "mpi_gtest_main.h"

using namespace ds_comm_test;

namespace {

// Every ordered tuple of `k` sizes >= 1 whose product is n.
void layouts(int n, int k, std::vector<int>& cur, std::vector<std::vector<int>>& out) {
    if (static_cast<int>(cur.size()) == k - 1) {
        cur.push_back(n);
        out.push_back(cur);
        cur.pop_back();
        return;
    }
    for (int d = 1; d <= n; ++d) {
        if (n % d) continue;
        cur.push_back(d);
        layouts(n / d, k, cur, out);
        cur.pop_back();
    }
}

// Checks that `h` has exactly `members` (world ranks, in rank order of the new communicator).
void check_members(ds_comm_t* h, const std::vector<int32_t>& members, int world_rank, const std::string& what) {
    int32_t size = -1, rank = -1;
    ASSERT_EQ(ds_comm_size(h, &size), DS_OK) << what;
    ASSERT_EQ(ds_comm_rank(h, &rank), DS_OK) << what;
    ASSERT_EQ(size, static_cast<int32_t>(members.size())) << what;
    ASSERT_GE(rank, 0);
    EXPECT_EQ(members[static_cast<size_t>(rank)], world_rank) << what;
    auto c = ds::api::comm_retain(h);
    int64_t sum = world_rank;
    c->allreduce(&sum, &sum, 1, DType::I64, Op::Sum);
    EXPECT_EQ(sum, std::accumulate(members.begin(), members.end(), int64_t(0))) << what;
    std::vector<int32_t> all(members.size(), -1);
    int32_t mine = world_rank;
    c->allgather(&mine, all.data(), 1, DType::I32);
    EXPECT_EQ(all, members) << what;
}

}  // namespace

TEST(TopologyComm, EveryAxisOfEveryLayout) {
    ds_comm_t* world = nullptr;
    ASSERT_EQ(ds_comm_create_mpi(MPI_Comm_c2f(MPI_COMM_WORLD), nullptr, &world), DS_OK) << ds_last_error();
    int32_t n = 0, me = 0;
    ds_comm_size(world, &n);
    ds_comm_rank(world, &me);
    const char* names[] = {"pipe", "data", "model"};
    int checked = 0;
    for (int k = 2; k <= 3; ++k) {
        std::vector<std::vector<int>> all;
        std::vector<int> cur;
        layouts(n, k, cur, all);
        for (const std::vector<int>& dims : all) {
            ds_topology_t* t = nullptr;
            ASSERT_EQ(ds_topology_create(names, dims.data(), k, &t), DS_OK) << ds_last_error();
            std::string layout;
            for (int i = 0; i < k; ++i) layout += std::string(i ? " x " : "") + names[i] + "=" + std::to_string(dims[static_cast<size_t>(i)]);
            for (int a = 0; a < k; ++a) {
                // The expected members: this rank's list among the axis' comm lists.
                std::vector<int32_t> flat(static_cast<size_t>(n));
                int32_t lists = 0, len = 0;
                ASSERT_EQ(ds_topology_axis_comm_lists(t, names[a], flat.data(), n, &lists, &len), DS_OK);
                std::vector<int32_t> members;
                for (int32_t l = 0; l < lists && members.empty(); ++l)
                    for (int32_t j = 0; j < len; ++j)
                        if (flat[static_cast<size_t>(l * len + j)] == me)
                            members.assign(flat.begin() + l * len, flat.begin() + (l + 1) * len);
                ASSERT_EQ(static_cast<int32_t>(members.size()), dims[static_cast<size_t>(a)]);
                ds_comm_t* c = nullptr;
                ASSERT_EQ(ds_topology_comm(t, world, names[a], &c), DS_OK) << ds_last_error();
                check_members(c, members, me, layout + ", axis " + names[a]);
                // the new rank is this rank's coordinate on the axis
                int32_t coord[3], rank = -1;
                ds_topology_coord_of(t, me, coord, 3);
                ds_comm_rank(c, &rank);
                EXPECT_EQ(rank, coord[a]) << layout << ", axis " << names[a];
                EXPECT_EQ(ds_comm_finalize(c), DS_OK) << ds_last_error();
                ds_comm_destroy(c);
                ++checked;
            }
            if (k == 3) {
                // DeepSpeed's model-parallel group: the ranks with this rank's data coordinate.
                int32_t coord[3];
                ds_topology_coord_of(t, me, coord, 3);
                const char* data_axis[] = {"data"};
                std::vector<int32_t> members(static_cast<size_t>(n));
                int32_t count = 0;
                ASSERT_EQ(ds_topology_filter_match(t, data_axis, &coord[1], 1, members.data(), n, &count), DS_OK);
                members.resize(static_cast<size_t>(count));
                const char* pipe_model[] = {"pipe", "model"};
                ds_comm_t* c = nullptr;
                ASSERT_EQ(ds_topology_group_comm(t, world, pipe_model, 2, &c), DS_OK) << ds_last_error();
                check_members(c, members, me, layout + ", group pipe x model");
                EXPECT_EQ(ds_comm_finalize(c), DS_OK) << ds_last_error();
                ds_comm_destroy(c);
            }
            ds_topology_destroy(t);
        }
    }
    EXPECT_GT(checked, 0);
    EXPECT_EQ(ds_comm_finalize(world), DS_OK) << ds_last_error();
    ds_comm_destroy(world);
}

TEST(TopologyComm, AWorldOfTheWrongSizeIsRefusedOnEveryRank) {
    ds_comm_t* world = nullptr;
    ASSERT_EQ(ds_comm_create_mpi(MPI_Comm_c2f(MPI_COMM_WORLD), nullptr, &world), DS_OK) << ds_last_error();
    int32_t n = 0;
    ds_comm_size(world, &n);
    ds_topology_t* t = nullptr;
    ASSERT_EQ(ds_topology_create_pipe_data(n, 2, &t), DS_OK);
    ds_comm_t* c = nullptr;
    EXPECT_EQ(ds_topology_comm(t, world, "pipe", &c), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ds_last_error()).find("has " + std::to_string(2 * n)), std::string::npos) << ds_last_error();
    EXPECT_EQ(c, nullptr);
    ds_topology_destroy(t);
    // nothing collective happened: the world is still usable
    EXPECT_EQ(ds_comm_finalize(world), DS_OK) << ds_last_error();
    ds_comm_destroy(world);
}
