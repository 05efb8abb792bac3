// No hangs: a rank that stalls past the timeout, ranks that call different
// collectives (debug mode), and an abort from another thread must each turn
// into an error on every rank, quickly, and leave the communicator broken
// (sticky DS_ERR_COMM naming the first failure). Each test uses its own
// communicator and ends with an MPI barrier on the world, so one test's
// broken communicator cannot disturb the next.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "comm_test_util.h"
#include "mpi_gtest_main.h"

using namespace ds_comm_test;
using ds::comm::Communicator;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

// Runs f, which must throw ds::Error; returns it (status DS_OK if it did not throw).
template <class F>
ds::Error catch_error(F&& f) {
    try {
        f();
    } catch (const ds::Error& e) {
        return e;
    }
    return ds::Error(DS_OK, "did not throw");
}

// Later calls on a broken communicator: DS_ERR_COMM naming the first failure.
void expect_sticky(Communicator& c, const std::string& first_failure_text) {
    float x = 1;
    const ds::Error e = catch_error([&] { c.allreduce(&x, &x, 1, DType::F32, Op::Sum); });
    EXPECT_EQ(e.status(), DS_ERR_COMM) << e.what();
    EXPECT_TRUE(contains(e.what(), "broken")) << e.what();
    EXPECT_TRUE(contains(e.what(), first_failure_text)) << e.what();
    const ds::Error f = catch_error([&] { c.finalize(); });
    EXPECT_EQ(f.status(), DS_ERR_COMM) << f.what();
    EXPECT_TRUE(contains(f.what(), first_failure_text)) << f.what();
}

}  // namespace

TEST(CommMpiFailure, StalledRankTimesOutEveryOtherRankAndBreaksTheComm) {
    auto c = world_comm(/*timeout_ms=*/2000);
    c->barrier();
    std::vector<float> buf(1000, 1.0f);
    if (c->rank() == 0) {
        // Stalls past the others' timeout and never joins the allreduce.
        std::this_thread::sleep_for(std::chrono::milliseconds(4000));
        // The peers' notices have reached this rank's watchdog meanwhile.
        EXPECT_TRUE(c->broken());
        EXPECT_EQ(c->break_status(), DS_ERR_TIMEOUT);
        EXPECT_TRUE(contains(c->break_message(), "reported")) << c->break_message();
    } else {
        const auto t0 = Clock::now();
        const ds::Error e = catch_error([&] { c->allreduce(buf.data(), buf.data(), 1000, DType::F32, Op::Sum); });
        const double s = seconds_since(t0);
        EXPECT_EQ(e.status(), DS_ERR_TIMEOUT) << e.what();
        EXPECT_TRUE(contains(e.what(), "allreduce(fp32, 1000, sum)")) << e.what();
        EXPECT_TRUE(contains(e.what(), "timed out after 2000 ms")) << e.what();
        EXPECT_GE(s, 1.9);
        EXPECT_LT(s, 3.5) << "the timeout fired late";
    }
    expect_sticky(*c, "timed out after 2000 ms");
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CommMpiFailure, UnwaitedOperationExpiresThroughTheWatchdog) {
    auto c = world_comm(/*timeout_ms=*/1000);
    c->barrier();
    std::vector<float> buf(10, 1.0f);
    std::unique_ptr<ds::comm::Request> req;
    if (c->rank() != 0) req = c->allreduce_async(buf.data(), buf.data(), 10, DType::F32, Op::Sum);
    // Nobody waits: only the watchdog thread can notice the deadline.
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    EXPECT_TRUE(c->broken());
    EXPECT_EQ(c->break_status(), DS_ERR_TIMEOUT) << c->break_message();
    if (req) {
        const auto t0 = Clock::now();
        const ds::Error e = catch_error([&] { req->wait(); });
        EXPECT_EQ(e.status(), DS_ERR_TIMEOUT) << e.what();
        EXPECT_LT(seconds_since(t0), 0.5);
        req.reset();
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CommMpiFailure, DebugModeNamesTheFirstMismatchOnEveryRank) {
    auto c = world_comm(/*timeout_ms=*/30000, /*debug=*/true);
    const int R = c->rank(), S = c->size();
    std::vector<float> a(1000, 1.0f), all(1000 * S);
    c->allreduce(a.data(), a.data(), 1000, DType::F32, Op::Sum);
    c->barrier();
    // Collective #3 diverges: rank 0 reduces, the others gather.
    const ds::Error e = catch_error([&] {
        if (R == 0)
            c->allreduce(a.data(), a.data(), 1000, DType::F32, Op::Sum);
        else
            c->allgather(a.data(), all.data(), 500, DType::F32);
    });
    std::string want = "collective #3 mismatch: rank 0 called allreduce(fp32, 1000, sum)";
    for (int r = 1; r < S; ++r) want += ", rank " + std::to_string(r) + " called allgather(fp32, 500)";
    EXPECT_EQ(e.status(), DS_ERR_COMM) << e.what();
    EXPECT_EQ(std::string(e.what()), want);
    EXPECT_TRUE(c->broken());
    expect_sticky(*c, want);
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CommMpiFailure, DebugModeCatchesCountAndRootDifferences) {
    const int S = ds_mpi_test::world_size();
    {
        auto c = world_comm(30000, true);
        std::vector<uint16_t> a(100);
        const size_t n = c->rank() == S - 1 ? 99 : 100;  // the last rank is off by one
        const ds::Error e = catch_error([&] { c->allreduce(a.data(), a.data(), n, DType::BF16, Op::Avg); });
        EXPECT_EQ(e.status(), DS_ERR_COMM);
        EXPECT_TRUE(contains(e.what(), "collective #1 mismatch: rank 0 called allreduce(bf16, 100, avg)")) << e.what();
        EXPECT_TRUE(contains(e.what(), "rank " + std::to_string(S - 1) + " called allreduce(bf16, 99, avg)"))
            << e.what();
        MPI_Barrier(MPI_COMM_WORLD);
    }
    {
        auto c = world_comm(30000, true);
        std::vector<float> a(8);
        const int root = c->rank() == 1 ? 1 : 0;
        const ds::Error e = catch_error([&] { c->broadcast(a.data(), 8, DType::F32, root); });
        EXPECT_EQ(e.status(), DS_ERR_COMM);
        EXPECT_TRUE(contains(e.what(), "rank 1 called broadcast(fp32, 8, root=1)")) << e.what();
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

TEST(CommMpiFailure, AbortFromAnotherThreadUnblocksABlockedCollective) {
    auto c = world_comm(/*timeout_ms=*/600000);  // only the abort can end the wait
    c->barrier();
    std::vector<float> buf(1000, 1.0f);
    if (c->rank() == 0) {
        // Never joins; learns of the abort from its peers' notices.
        const auto t0 = Clock::now();
        while (!c->broken() && seconds_since(t0) < 10) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        EXPECT_TRUE(c->broken());
        EXPECT_EQ(c->break_status(), DS_ERR_COMM);
        EXPECT_TRUE(contains(c->break_message(), "reported")) << c->break_message();
        EXPECT_TRUE(contains(c->break_message(), "test abort")) << c->break_message();
    } else {
        std::thread killer([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
            c->abort("test abort");
        });
        const auto t0 = Clock::now();
        const ds::Error e = catch_error([&] { c->allreduce(buf.data(), buf.data(), 1000, DType::F32, Op::Sum); });
        const double s = seconds_since(t0);
        killer.join();
        // Another rank's notice may arrive first; either way it names the abort.
        EXPECT_EQ(e.status(), DS_ERR_COMM) << e.what();
        EXPECT_TRUE(contains(e.what(), "test abort")) << e.what();
        EXPECT_LT(s, 3.0) << "abort did not unblock the collective promptly";
    }
    expect_sticky(*c, "test abort");
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CommMpiFailure, PublicAbortFromAnotherThread) {
    ds_comm_options_t o;
    ds_comm_options_init(&o, sizeof o);
    ds_comm_t* h = nullptr;
    ASSERT_EQ(ds_comm_create_mpi(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &h), DS_OK) << ds_last_error();
    std::thread t([&] { EXPECT_EQ(ds_comm_abort(h, "host gave up"), DS_OK); });
    t.join();
    EXPECT_EQ(ds_comm_abort(h, nullptr), DS_OK);  // idempotent
    EXPECT_EQ(ds_comm_finalize(h), DS_ERR_COMM);
    EXPECT_TRUE(contains(ds_last_error(), "host gave up")) << ds_last_error();
    EXPECT_EQ(ds_comm_finalize(h), DS_ERR_INVALID_STATE);
    ds_comm_destroy(h);
    MPI_Barrier(MPI_COMM_WORLD);
}
