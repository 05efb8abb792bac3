/* Crash consistency: a child that trains and saves after every window is
 * killed with SIGKILL at a random moment; then `latest` must load and equal,
 * bit for bit, the state after the last save the child reported committed
 * (or the one it was committing: `latest` may already name it). The expected
 * state for step N is recomputed here by the same deterministic run.
 * Even trials use global_step<N> tags, odd ones a fixed tag replaced each time.
 *   test_crash RESUME_DRIVER [TRIALS]   (default 100, or $DS_CRASH_TRIALS)
 * Prints "crash-consistency: C of N corrupt". */
#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "train_common.h"

extern char** environ;

#define SCALE 64
#define MODE MODE_FP16

static bytes_t* refs = NULL;  /* refs[n]: the state after n windows */
static size_t nrefs = 0;
static ds_engine_t* ref_engine = NULL;

static const bytes_t* reference(size_t n) {
    while (nrefs <= n) {
        if (!ref_engine) {
            ref_engine = train_engine(MODE, SCALE);
        } else {
            train_window(ref_engine, MODE, SCALE);
        }
        refs = (bytes_t*)realloc(refs, (nrefs + 1) * sizeof(bytes_t));
        refs[nrefs++] = train_dump(ref_engine, SCALE);
    }
    return &refs[n];
}

static void remove_dir(const char* dir) {
    char cmd[4200];
    sprintf(cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

static int count_leftovers(const char* dir) {
    int n = 0;
    struct dirent* d;
    DIR* h = opendir(dir);
    if (!h) return 0;
    while ((d = readdir(h)) != NULL)
        if (strstr(d->d_name, ".tmp-")) ++n;
    closedir(h);
    return n;
}

static void sleep_us(long us) {
    struct timespec ts;
    ts.tv_sec = us / 1000000;
    ts.tv_nsec = (us % 1000000) * 1000;
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* One trial; returns 1 if the checkpoint on disk is corrupt or wrong. */
static int trial(const char* driver, int index, unsigned* seed, int* interrupted, int* saves_seen) {
    char root[] = "/tmp/ds_crash_XXXXXX", dir[4200], scale[16];
    char* argv[7];
    int fds[2], status, corrupt = 0;
    pid_t pid;
    posix_spawn_file_actions_t fa;
    long reported = 0, delay_us;
    char buf[4096];
    ssize_t got;
    size_t have = 0;
    char text[65536];

    if (!mkdtemp(root) || pipe(fds) != 0) {
        perror("setup");
        exit(2);
    }
    sprintf(dir, "%s/ckpt", root);
    sprintf(scale, "%d", SCALE);
    argv[0] = (char*)driver;
    argv[1] = (char*)kModeNames[MODE];
    argv[2] = (char*)"crashloop";
    argv[3] = dir;
    argv[4] = (char*)(index % 2 == 0 ? "-" : "ckpt");
    argv[5] = scale;
    argv[6] = NULL;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    if (posix_spawn(&pid, driver, &fa, NULL, argv, environ) != 0) {
        perror("posix_spawn");
        exit(2);
    }
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    /* A random moment within the child's first ~60 ms: start-up, training, any save phase. */
    delay_us = (long)(rand_r(seed) % 60000);
    sleep_us(delay_us);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
        fprintf(stderr, "trial %d: the child ended before the kill (status %d)\n", index, status);
        corrupt = 1;
    }
    while ((got = read(fds[0], buf, sizeof buf)) > 0) {
        if (have + (size_t)got < sizeof text) {
            memcpy(text + have, buf, (size_t)got);
            have += (size_t)got;
        }
    }
    close(fds[0]);
    text[have] = '\0';
    {
        char* p = text;
        char* end;
        long v;
        while ((v = strtol(p, &end, 10)), end != p) {
            if (*end != '\n') break; /* a partial last line is not a report */
            reported = v;
            p = end + 1;
        }
    }
    *interrupted += count_leftovers(dir) > 0;
    *saves_seen += (int)reported;

    {
        char latest[4300];
        FILE* f;
        sprintf(latest, "%s/latest", dir);
        f = fopen(latest, "rb");
        if (!f) {
            if (reported > 0) {
                fprintf(stderr, "trial %d: %ld saves reported but no 'latest'\n", index, reported);
                corrupt = 1;
            }
        } else {
            ds_engine_t* e = train_engine(MODE, SCALE);
            ds_status_t s;
            fclose(f);
            s = ds_load_checkpoint(e, dir, NULL, 0, NULL);
            if (s != DS_OK) {
                fprintf(stderr, "trial %d: loading latest failed: %s\n", index, ds_last_error());
                corrupt = 1;
            } else {
                int64_t steps;
                bytes_t got_state;
                TRAIN_CHECK(ds_engine_global_steps(e, &steps));
                got_state = train_dump(e, SCALE);
                if (steps != reported && steps != reported + 1) {
                    fprintf(stderr, "trial %d: latest is step %lld but the child last reported %ld\n", index,
                            (long long)steps, reported);
                    corrupt = 1;
                } else {
                    const bytes_t* want = reference((size_t)steps);
                    if (want->n != got_state.n || memcmp(want->p, got_state.p, want->n) != 0) {
                        fprintf(stderr, "trial %d: step %lld loaded but differs from the expected state\n", index,
                                (long long)steps);
                        corrupt = 1;
                    }
                }
                bytes_free(&got_state);
            }
            ds_engine_destroy(e);
        }
    }
    remove_dir(root);
    return corrupt;
}

int main(int argc, char** argv) {
    int trials = 100, i, corrupt = 0, interrupted = 0, saves = 0;
    const char* env = getenv("DS_CRASH_TRIALS");
    unsigned seed;
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: test_crash RESUME_DRIVER [TRIALS]\n");
        return 2;
    }
    if (env && atoi(env) > 0) trials = atoi(env);
    if (argc == 3) trials = atoi(argv[2]);
    seed = getenv("DS_CRASH_SEED") ? (unsigned)strtoul(getenv("DS_CRASH_SEED"), NULL, 10)
                                   : (unsigned)time(NULL) ^ (unsigned)getpid();
    printf("seed %u (DS_CRASH_SEED reproduces the kill times)\n", seed);
    signal(SIGPIPE, SIG_IGN);
    for (i = 0; i < trials; ++i) corrupt += trial(argv[1], i, &seed, &interrupted, &saves);
    printf("%d trials, %d saves committed before the kills, %d kills left an unfinished save behind\n", trials,
           saves, interrupted);
    printf("crash-consistency: %d of %d corrupt\n", corrupt, trials);
    for (i = 0; i < (int)nrefs; ++i) bytes_free(&refs[i]);
    free(refs);
    ds_engine_destroy(ref_engine);
    return corrupt == 0 ? 0 : 1;
}
