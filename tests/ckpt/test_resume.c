/* Bitwise resume across processes: for fp32, bf16 and fp16 (with forced
 * overflow steps, one in the window just before the save), 40 windows
 * straight must equal 20 windows + save in one process, then load into a
 * NEW engine in a NEW process + 20 windows: working weights, fp32 masters,
 * both Adam moments, lr, loss scale and counters identical to the last bit.
 *   test_resume RESUME_DRIVER */
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "train_common.h"

extern char** environ;

static int run(const char* driver, const char* a1, const char* a2, const char* a3, const char* a4,
               const char* a5) {
    char* argv[7];
    pid_t pid;
    int status;
    argv[0] = (char*)driver;
    argv[1] = (char*)a1;
    argv[2] = (char*)a2;
    argv[3] = (char*)a3;
    argv[4] = (char*)a4;
    argv[5] = (char*)a5;
    argv[6] = NULL;
    if (posix_spawn(&pid, driver, NULL, NULL, argv, environ) != 0) {
        perror("posix_spawn");
        return 0;
    }
    if (waitpid(pid, &status, 0) != pid) return 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "driver %s %s failed (status %d)\n", a1, a2, status);
        return 0;
    }
    return 1;
}

static void remove_dir(const char* dir) {
    char cmd[4200];
    sprintf(cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

int main(int argc, char** argv) {
    int mode, failures = 0;
    if (argc != 2) {
        fprintf(stderr, "usage: test_resume RESUME_DRIVER\n");
        return 2;
    }
    for (mode = 0; mode < 3; ++mode) {
        const char* m = kModeNames[mode];
        char root[] = "/tmp/ds_resume_XXXXXX";
        char straight[4096], resumed[4096], half[4096], ckpt[4096];
        bytes_t a, b, h;
        int64_t ca[4];
        if (!mkdtemp(root)) return 2;
        sprintf(straight, "%s/straight.bin", root);
        sprintf(resumed, "%s/resumed.bin", root);
        sprintf(half, "%s/half.bin", root);
        sprintf(ckpt, "%s/ckpt", root);
        if (!run(argv[1], m, "straight", "40", straight, NULL) || !run(argv[1], m, "straight", "20", half, NULL) ||
            !run(argv[1], m, "save", "20", ckpt, NULL) || !run(argv[1], m, "resume", ckpt, "20", resumed)) {
            ++failures;
            continue;
        }
        a = slurp(straight);
        b = slurp(resumed);
        h = slurp(half);
        dump_counters(&a, ca);
        if (a.n == 0 || a.n != b.n || memcmp(a.p, b.p, a.n) != 0) {
            size_t i = 0;
            while (i < a.n && i < b.n && a.p[i] == b.p[i]) ++i;
            fprintf(stderr, "%s: resumed state differs from the straight run (%zu vs %zu bytes, first at %zu)\n", m,
                    a.n, b.n, i);
            ++failures;
        } else if (h.n == a.n && memcmp(h.p, a.p, a.n) == 0) {
            fprintf(stderr, "%s: the second 20 windows changed nothing (the test would prove nothing)\n", m);
            ++failures;
        } else if (ca[0] != 40 || ca[2] != 80 || (mode == MODE_FP16 && ca[3] != 5) || (mode != MODE_FP16 && ca[3] != 0)) {
            fprintf(stderr, "%s: counters global_steps=%lld micro_steps=%lld skipped_steps=%lld unexpected\n", m,
                    (long long)ca[0], (long long)ca[2], (long long)ca[3]);
            ++failures;
        } else {
            printf("%s: 40 straight == 20 + save + new process load + 20 (%zu state bytes identical; "
                   "skipped_steps=%lld)\n", m, a.n, (long long)ca[3]);
        }
        bytes_free(&a);
        bytes_free(&b);
        bytes_free(&h);
        remove_dir(root);
    }
    printf("%d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
