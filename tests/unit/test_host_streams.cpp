// The host-backed test device's streams and events (core/host_streams.h):
// work queued on a created stream runs only when something waits for it,
// so a copy reads its source late — which is what lets the engine's tests
// catch a missing wait or a source reused too early. On a real GPU the same
// calls are cudaStream*/cudaEvent* (gpu.test_gpu_streams).
#include <gtest/gtest.h>

#include <vector>

#include "core/device_memory.h"
#include "core/host_streams.h"
#include "host_backed_device.h"

namespace {

namespace dm = ds::device_memory;

struct Streams : ::testing::Test {
    test_device::HostBackedDevice device;
    void TearDown() override { EXPECT_EQ(dm::host_streams::queued(), 0u) << "a test left work queued"; }
};

TEST_F(Streams, QueuedCopyRunsWhenItsEventIsSynchronized) {
    void* s = dm::stream_create("test");
    void* ev = dm::event_create("test");
    int src = 1, dst = 0;
    dm::copy_async(&dst, &src, sizeof src, s, "test");
    dm::event_record(ev, s, "test");
    EXPECT_EQ(dst, 0) << "the copy ran before anything waited for it";
    src = 2;  // a source written again before the wait: the copy sees it (a real hazard)
    dm::event_synchronize(ev, "test");
    EXPECT_EQ(dst, 2);
    dm::event_destroy(ev);
    dm::stream_destroy(s);
}

TEST_F(Streams, AnEventCoversOnlyTheWorkBeforeItsRecord) {
    void* s = dm::stream_create("test");
    void* ev = dm::event_create("test");
    int a = 1, b = 2, da = 0, db = 0;
    dm::copy_async(&da, &a, sizeof a, s, "test");
    dm::event_record(ev, s, "test");
    dm::copy_async(&db, &b, sizeof b, s, "test");
    dm::event_synchronize(ev, "test");
    EXPECT_EQ(da, 1);
    EXPECT_EQ(db, 0);
    EXPECT_EQ(dm::host_streams::queued(), 1u);
    dm::event_destroy(ev);
    dm::stream_destroy(s);  // runs the rest
    EXPECT_EQ(db, 2);
}

TEST_F(Streams, TheLegacyStreamWaitingRunsTheQueueAtOnce) {
    void* s = dm::stream_create("test");
    void* ev = dm::event_create("test");
    int src = 5, dst = 0;
    dm::copy_async(&dst, &src, sizeof src, s, "test");
    dm::event_record(ev, s, "test");
    dm::stream_wait_event(nullptr, ev, "test");  // the next kernel (run on the host at once) needs it
    EXPECT_EQ(dst, 5);
    src = 6;
    int dst2 = 0;
    dm::copy_async(&dst2, &src, sizeof src, s, "test");
    dm::order_after(nullptr, s, "test");
    EXPECT_EQ(dst2, 6);
    dm::event_destroy(ev);
    dm::stream_destroy(s);
}

TEST_F(Streams, AStreamWaitingForAnotherRunsItFirst) {
    void* s1 = dm::stream_create("test");
    void* s2 = dm::stream_create("test");
    void* ev = dm::event_create("test");
    int x = 7, mid = 0, out = 0;
    dm::copy_async(&mid, &x, sizeof x, s1, "test");
    dm::event_record(ev, s1, "test");
    dm::stream_wait_event(s2, ev, "test");
    dm::copy_async(&out, &mid, sizeof mid, s2, "test");  // reads what s1's copy wrote
    dm::event_record(ev, s2, "test");
    EXPECT_EQ(mid, 0);
    dm::event_synchronize(ev, "test");
    EXPECT_EQ(mid, 7);
    EXPECT_EQ(out, 7);
    dm::event_destroy(ev);
    dm::stream_destroy(s2);
    dm::stream_destroy(s1);
}

TEST_F(Streams, ASynchronousCopyOnAStreamRunsItsQueueFirst) {
    void* s = dm::stream_create("test");
    int a = 3, mid = 0, out = 0;
    dm::copy_async(&mid, &a, sizeof a, s, "test");
    dm::copy_on_stream(&out, &mid, sizeof mid, s, "test");
    EXPECT_EQ(out, 3);
    dm::stream_destroy(s);
}

TEST_F(Streams, CopiesOnTheLegacyStreamRunAtOnce) {
    int a = 4, out = 0;
    dm::copy_async(&out, &a, sizeof a, nullptr, "test");
    EXPECT_EQ(out, 4);
    void* ev = dm::event_create("test");
    dm::event_record(ev, nullptr, "test");
    dm::event_synchronize(ev, "test");  // nothing to wait for
    dm::event_destroy(ev);
}

TEST_F(Streams, AnEventOfADestroyedStreamIsComplete) {
    void* s = dm::stream_create("test");
    void* ev = dm::event_create("test");
    int a = 9, out = 0;
    dm::copy_async(&out, &a, sizeof a, s, "test");
    dm::event_record(ev, s, "test");
    dm::stream_destroy(s);
    EXPECT_EQ(out, 9);
    dm::event_synchronize(ev, "test");
    dm::stream_wait_event(nullptr, ev, "test");
    dm::event_destroy(ev);
}

}  // namespace
