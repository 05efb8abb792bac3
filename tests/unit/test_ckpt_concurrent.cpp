// Concurrent saves into one save_dir (issue 8, "Concurrent saves"): two
// processes save in a loop — different tags, or the same tag — into one
// directory. Every save must return DS_OK, and every save that returned
// DS_OK must load and hold values one of the savers wrote. Before the
// save-dir locks, one process's leftover cleanup deleted the other's
// in-flight temporary directory.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>

#include <csignal>

#include "ckpt/commit.h"
#include "ckpt/file_lock.h"
#include "test_ckpt_util.h"

namespace {

using namespace ckpt_test;

constexpr int kRounds = 25;

// The value pattern process `who` writes in round `k`: w[i] = who*1000 + k + 0.001*i.
float base_of(int who, int k) { return static_cast<float>(who * 1000 + k); }

// Runs in a child: saves kRounds times, loading and checking after each.
// Returns the number of failures (the exit status).
int saver(const std::string& dir, int who, bool same_tag) {
    SmallEngine eng;
    int failures = 0;
    for (int k = 0; k < kRounds; ++k) {
        const float base = base_of(who, k);
        if (eng.set("w", 12, {3, 4}, base) != DS_OK) return 100;
        const std::string tag = same_tag ? "shared" : "p" + std::to_string(who) + "_" + std::to_string(k);
        if (ds_save_checkpoint(eng.e, dir.c_str(), tag.c_str(), nullptr) != DS_OK) {
            std::fprintf(stderr, "process %d round %d: save failed: %s\n", who, k, ds_last_error());
            ++failures;
            continue;
        }
        if (ds_load_checkpoint(eng.e, dir.c_str(), tag.c_str(), 0, nullptr) != DS_OK) {
            std::fprintf(stderr, "process %d round %d: DS_OK save of '%s' does not load: %s\n", who, k, tag.c_str(),
                         ds_last_error());
            ++failures;
            continue;
        }
        const std::vector<float> w = eng.get("w", {3, 4});
        // Different tags: exactly our values. Same tag: the other process may
        // have replaced it since, so some (who, k) pattern, whole.
        const float b = same_tag ? std::floor(w[0]) : base;
        bool ok = w[0] == b || !same_tag;
        for (int i = 0; i < 12; ++i) ok = ok && w[static_cast<size_t>(i)] == b + 0.001f * static_cast<float>(i);
        if (!ok) {
            std::fprintf(stderr, "process %d round %d: tag '%s' loaded w[0] = %g, expected %g\n", who, k, tag.c_str(),
                         w[0], b);
            ++failures;
        }
    }
    return failures > 99 ? 99 : failures;
}

void run_two_savers(bool same_tag) {
    TempDir d;
    pid_t pids[2];
    for (int who = 0; who < 2; ++who) {
        pids[who] = fork();
        ASSERT_GE(pids[who], 0);
        if (pids[who] == 0) {
            alarm(120);  // a hang (a lock never released) fails instead of stalling the suite
            _exit(saver(d.path, who + 1, same_tag));
        }
    }
    for (int who = 0; who < 2; ++who) {
        int status = 0;
        ASSERT_EQ(waitpid(pids[who], &status, 0), pids[who]);
        ASSERT_TRUE(WIFEXITED(status)) << "process " << who + 1 << " died (signal " << WTERMSIG(status) << ")";
        EXPECT_EQ(WEXITSTATUS(status), 0) << "process " << who + 1 << ": failed saves/loads (see stderr)";
    }
    // Nothing of either save is left behind, and `latest` names a loadable tag.
    for (const std::string& name : ds::ckpt::list_dir(d.path))
        EXPECT_FALSE(ds::ckpt::is_leftover_name(name)) << "leftover '" << name << "' after both saves finished";
    SmallEngine check;
    EXPECT_EQ(ds_load_checkpoint(check.e, d.path.c_str(), nullptr, 0, nullptr), DS_OK) << ds_last_error();
}

TEST(CkptConcurrent, TwoProcessesDifferentTags) { run_two_savers(false); }

TEST(CkptConcurrent, TwoProcessesSameTag) { run_two_savers(true); }

// A crashed save's temporaries (no process holds their lock) are still
// removed by the next save; a live one's (lock held) are not.
TEST(CkptConcurrent, DeadLeftoversRemovedLiveOnesKept) {
    TempDir d;
    const std::string dead = d / "t.tmp-0123456789abcdef";
    const std::string live = d / "u.tmp-fedcba9876543210";
    ds::ckpt::make_dirs(dead);
    ds::ckpt::make_dirs(live);
    spit(dead + "/model.safetensors", "x");
    // Held as a live save holds its temporary directory: flock(2), exclusive.
    const int held = ::open(live.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(held, 0);
    ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
    // The lock must be held by another process for flock to conflict:
    // a child saves while this process holds `live`.
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(60);
        SmallEngine eng;
        _exit(ds_save_checkpoint(eng.e, d.path.c_str(), "t", nullptr) == DS_OK ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_EQ(ds::ckpt::path_kind(dead), ds::ckpt::PathKind::Missing) << "a dead save's leftover was kept";
    EXPECT_EQ(ds::ckpt::path_kind(live), ds::ckpt::PathKind::Directory) << "a live save's temporary was removed";
    ::close(held);
}

// A save process killed while it holds its temporary directory: while it
// lives, other saves leave the directory alone; once it is dead (SIGKILL
// drops its flock), the next save removes it.
TEST(CkptConcurrent, KilledSaversTemporaryIsRemovedOnlyAfterItsDeath) {
    TempDir d;
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(60);
        ds::ckpt::FileLock lock;
        const std::string tmp = ds::ckpt::make_locked_temp_dir(d.path, "k", lock);
        spit(tmp + "/model.safetensors", "partial");
        const char c = 'r';
        if (::write(ready[1], &c, 1) != 1) _exit(1);
        for (;;) ::pause();
    }
    char c = 0;
    ASSERT_EQ(::read(ready[0], &c, 1), 1);
    auto temporaries = [&] {
        std::vector<std::string> t;
        for (const std::string& n : ds::ckpt::list_dir(d.path))
            if (n.rfind("k.tmp-", 0) == 0) t.push_back(n);
        return t;
    };
    ASSERT_EQ(temporaries().size(), 1u);
    {
        SmallEngine eng;
        ASSERT_EQ(ds_save_checkpoint(eng.e, d.path.c_str(), "a", nullptr), DS_OK) << ds_last_error();
    }
    EXPECT_EQ(temporaries().size(), 1u) << "a live save's temporary directory was removed";
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    {
        SmallEngine eng;
        ASSERT_EQ(ds_save_checkpoint(eng.e, d.path.c_str(), "b", nullptr), DS_OK) << ds_last_error();
    }
    EXPECT_TRUE(temporaries().empty()) << "a killed save's temporary directory was kept";
    ::close(ready[0]);
    ::close(ready[1]);
}

}  // namespace
