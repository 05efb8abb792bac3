// The base class's deadline, watchdog and break machinery, driven by a fake
// backend whose operations finish only when the test says so. (The MPI tests
// in tests/mpi check the same behaviour across real ranks.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "catch_error.h"
#include "comm/async_op.h"
#include "comm/communicator.h"

using ds::DType;
using ds::comm::AsyncOp;
using ds::comm::Communicator;
using ds::comm::Fingerprint;
using ds::comm::Op;
using Clock = std::chrono::steady_clock;

namespace {

// An operation that completes when `*gate` opens, then writes 1 into *out
// and counts itself in *completions.
class GateOp final : public AsyncOp {
public:
    GateOp(const Fingerprint& fp, Clock::time_point deadline, std::shared_ptr<std::atomic<bool>> gate,
           std::shared_ptr<std::atomic<int>> completions, float* out)
        : AsyncOp(fp, deadline), gate_(std::move(gate)), completions_(std::move(completions)), out_(out) {}
    bool progress() override { return gate_->load(); }
    void complete() override {
        if (out_) *out_ = 1.0f;
        ++*completions_;
    }

private:
    std::shared_ptr<std::atomic<bool>> gate_;
    std::shared_ptr<std::atomic<int>> completions_;
    float* out_;
};

// A two-rank world whose peer never shows up unless the gate opens.
class FakeComm final : public Communicator {
public:
    explicit FakeComm(const ds::comm::Options& o) : Communicator(o) { start_watchdog(); }
    ~FakeComm() override { stop_watchdog(); }
    int rank() const override { return 0; }
    int size() const override { return 2; }
    ds::comm::Backend backend() const override { return ds::comm::Backend::Mpi; }

    std::shared_ptr<std::atomic<bool>> gate = std::make_shared<std::atomic<bool>>(false);
    std::shared_ptr<std::atomic<int>> completions = std::make_shared<std::atomic<int>>(0);
    std::atomic<int> breaks{0};
    std::atomic<bool> notified{false};

protected:
    std::unique_ptr<ds::comm::Request> op(const Fingerprint& fp, void* out) {
        return track(std::make_shared<GateOp>(fp, deadline(), gate, completions, static_cast<float*>(out)));
    }
    std::unique_ptr<ds::comm::Request> start_allreduce(const void*, void* recv, size_t, DType, Op,
                                                       const Fingerprint& fp) override {
        return op(fp, recv);
    }
    std::unique_ptr<ds::comm::Request> start_reduce_scatter(const void*, void* recv, size_t, DType, Op,
                                                            const Fingerprint& fp) override {
        return op(fp, recv);
    }
    std::unique_ptr<ds::comm::Request> start_allgather(const void*, void*, size_t, DType,
                                                       const Fingerprint& fp) override {
        return op(fp, nullptr);
    }
    std::unique_ptr<ds::comm::Request> start_broadcast(void*, size_t, DType, int, const Fingerprint& fp) override {
        return op(fp, nullptr);
    }
    std::unique_ptr<ds::comm::Request> start_alltoall(const void*, void*, size_t, DType,
                                                      const Fingerprint& fp) override {
        return op(fp, nullptr);
    }
    std::unique_ptr<ds::comm::Request> start_barrier(const Fingerprint& fp) override { return op(fp, nullptr); }
    std::unique_ptr<ds::comm::Request> start_send(const void*, size_t, DType, int, int,
                                                  const Fingerprint& fp) override {
        return op(fp, nullptr);
    }
    std::unique_ptr<ds::comm::Request> start_recv(void*, size_t, DType, int, int, const Fingerprint& fp) override {
        return op(fp, nullptr);
    }
    void on_break(ds_status_t, const std::string&, bool notify_peers) override {
        ++breaks;
        notified = notify_peers;
    }
};

std::shared_ptr<FakeComm> fake(int64_t timeout_ms) {
    ds::comm::Options o;
    o.timeout_ms = timeout_ms;
    return std::make_shared<FakeComm>(o);
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

bool contains(const std::string& s, const char* sub) { return s.find(sub) != std::string::npos; }

}  // namespace

TEST(CommWatchdog, CompletedOperationRunsItsCompletionOnce) {
    auto c = fake(60000);
    float x = 0, y = 0;
    auto r = c->allreduce_async(&x, &y, 1, DType::F32, Op::Sum);
    EXPECT_FALSE(r->test());
    c->gate->store(true);
    r->wait();
    EXPECT_EQ(y, 1.0f);
    EXPECT_TRUE(r->test());
    EXPECT_EQ(c->completions->load(), 1);
    EXPECT_FALSE(c->broken());
}

TEST(CommWatchdog, ExpiredWaitThrowsTimeoutAndBreaksTheComm) {
    auto c = fake(300);
    float x = 0;
    const auto t0 = Clock::now();
    auto e = catch_error([&] { c->allreduce(&x, &x, 1000, DType::BF16, Op::Avg); });
    const double s = since(t0);
    EXPECT_EQ(e.status(), DS_ERR_TIMEOUT);
    EXPECT_EQ(std::string(e.what()),
              "collective #1 allreduce(bf16, 1000, avg) on rank 0 of 2 (mpi) timed out after 300 ms; the "
              "communicator is now broken");
    EXPECT_GE(s, 0.29);
    EXPECT_LT(s, 1.5);
    EXPECT_TRUE(c->broken());
    EXPECT_EQ(c->break_status(), DS_ERR_TIMEOUT);
    EXPECT_EQ(c->breaks.load(), 1);
    EXPECT_TRUE(c->notified.load());  // peers are told
    e = catch_error([&] { c->barrier(); });
    EXPECT_EQ(e.status(), DS_ERR_COMM);
    EXPECT_TRUE(contains(e.what(), "barrier: the communicator is broken: collective #1 allreduce")) << e.what();
}

TEST(CommWatchdog, UnwaitedOperationIsExpiredByTheWatchdogThread) {
    auto c = fake(200);
    float x = 0;
    auto r = c->broadcast_async(&x, 1, DType::F32, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    EXPECT_TRUE(c->broken()) << "the watchdog did not expire the operation";
    EXPECT_EQ(c->break_status(), DS_ERR_TIMEOUT);
    const auto t0 = Clock::now();
    auto e = catch_error([&] { r->wait(); });
    EXPECT_EQ(e.status(), DS_ERR_TIMEOUT);
    EXPECT_TRUE(contains(e.what(), "broadcast(fp32, 1, root=1)")) << e.what();
    EXPECT_LT(since(t0), 0.1);
}

TEST(CommWatchdog, WatchdogCompletesOperationsNobodyWaitsFor) {
    auto c = fake(60000);
    float y = 0;
    auto r = c->reduce_scatter_async(&y, &y, 1, DType::F32, Op::Sum);
    c->gate->store(true);
    const auto t0 = Clock::now();
    while (c->completions->load() == 0 && since(t0) < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(c->completions->load(), 1) << "the watchdog did not drive the operation to completion";
    r->wait();
    EXPECT_EQ(y, 1.0f);
    EXPECT_EQ(c->completions->load(), 1);
}

TEST(CommWatchdog, AbortFromAnotherThreadUnblocksAWait) {
    auto c = fake(600000);
    float x = 0;
    std::thread t([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        c->abort("operator pressed stop");
    });
    const auto t0 = Clock::now();
    auto e = catch_error([&] { c->allreduce(&x, &x, 1, DType::F32, Op::Sum); });
    t.join();
    EXPECT_EQ(e.status(), DS_ERR_COMM);
    EXPECT_TRUE(contains(e.what(), "communicator aborted on rank 0 of 2 (mpi): operator pressed stop")) << e.what();
    EXPECT_LT(since(t0), 1.0);
    EXPECT_EQ(c->breaks.load(), 1);
}

TEST(CommWatchdog, DroppedRequestWaitsUntilTheDeadline) {
    auto c = fake(300);
    float x = 0;
    const auto t0 = Clock::now();
    c->allreduce_async(&x, &x, 1, DType::F32, Op::Sum);  // destructor waits, swallows the timeout
    EXPECT_GE(since(t0), 0.29);
    EXPECT_TRUE(c->broken());
}

TEST(CommWatchdog, OperationsInFlightFailWithTheFirstBreak) {
    auto c = fake(60000);
    float a = 0, b = 0;
    auto r1 = c->allreduce_async(&a, &a, 1, DType::F32, Op::Sum);
    auto r2 = c->allgather_async(&b, &b, 0, DType::F32);
    c->abort("first");
    c->abort("second");
    auto e1 = catch_error([&] { r1->wait(); });
    auto e2 = catch_error([&] { r2->test(); });
    EXPECT_TRUE(contains(e1.what(), "first")) << e1.what();
    EXPECT_TRUE(contains(e2.what(), "first")) << e2.what();
    EXPECT_EQ(e1.status(), DS_ERR_COMM);
    EXPECT_EQ(c->breaks.load(), 1);
}
