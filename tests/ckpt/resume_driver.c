/* The child process of the checkpoint tests (C99, public API only).
 *   resume_driver MODE straight WINDOWS OUT      train, dump the state to OUT
 *   resume_driver MODE save WINDOWS DIR          train, ds_save_checkpoint(DIR, NULL)
 *   resume_driver MODE resume DIR WINDOWS OUT    NEW engine: load DIR/latest, train, dump
 *   resume_driver MODE crashloop DIR TAG SCALE   train and save after every window until
 *                                                killed, writing "<global_steps>\n" to
 *                                                stdout after each committed save
 *                                                (TAG "-": global_step<N> tags)
 * MODE is fp32, bf16 or fp16. Exit status 0 on success. */
#include <errno.h>
#include <unistd.h>

#include "train_common.h"

static int write_file(const char* path, const bytes_t* b) {
    FILE* f = fopen(path, "wb");
    if (!f || fwrite(b->p, 1, b->n, f) != b->n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    return 0;
}

static int usage(void) {
    fprintf(stderr, "usage: resume_driver MODE straight|save|resume|crashloop ...\n");
    return 2;
}

int main(int argc, char** argv) {
    int mode;
    ds_engine_t* e;
    if (argc < 3 || (mode = mode_from_name(argv[1])) < 0) return usage();
    if (strcmp(argv[2], "straight") == 0 && argc == 5) {
        long w, windows = atol(argv[3]);
        bytes_t b;
        int rc;
        e = train_engine((train_mode_t)mode, 1);
        for (w = 0; w < windows; ++w) train_window(e, (train_mode_t)mode, 1);
        b = train_dump(e, 1);
        rc = write_file(argv[4], &b);
        bytes_free(&b);
        ds_engine_destroy(e);
        return rc;
    }
    if (strcmp(argv[2], "save") == 0 && argc == 5) {
        long w, windows = atol(argv[3]);
        char client[64];
        e = train_engine((train_mode_t)mode, 1);
        for (w = 0; w < windows; ++w) train_window(e, (train_mode_t)mode, 1);
        sprintf(client, "{\"windows\": %ld, \"mode\": \"%s\"}", windows, kModeNames[mode]);
        TRAIN_CHECK(ds_save_checkpoint(e, argv[4], NULL, client));
        ds_engine_destroy(e);
        return 0;
    }
    if (strcmp(argv[2], "resume") == 0 && argc == 6) {
        long w, windows = atol(argv[4]);
        const char* client = NULL;
        bytes_t b;
        int rc;
        e = train_engine((train_mode_t)mode, 1);
        TRAIN_CHECK(ds_load_checkpoint(e, argv[3], NULL, 0, &client));
        if (!client || !strstr(client, "\"windows\":") || !strstr(client, kModeNames[mode])) {
            fprintf(stderr, "unexpected client state: %s\n", client ? client : "(null)");
            return 4;
        }
        for (w = 0; w < windows; ++w) train_window(e, (train_mode_t)mode, 1);
        b = train_dump(e, 1);
        rc = write_file(argv[5], &b);
        bytes_free(&b);
        ds_engine_destroy(e);
        return rc;
    }
    if (strcmp(argv[2], "crashloop") == 0 && argc == 6) {
        const char* tag = strcmp(argv[4], "-") == 0 ? NULL : argv[4];
        int64_t scale = atol(argv[5]), steps;
        long w;
        e = train_engine((train_mode_t)mode, scale);
        for (w = 0; w < 100000; ++w) {
            char line[32];
            int len;
            train_window(e, (train_mode_t)mode, scale);
            TRAIN_CHECK(ds_save_checkpoint(e, argv[3], tag, NULL));
            TRAIN_CHECK(ds_engine_global_steps(e, &steps));
            len = sprintf(line, "%lld\n", (long long)steps);
            if (write(1, line, (size_t)len) != len) return errno == EPIPE ? 0 : 5;
        }
        ds_engine_destroy(e);
        return 0;
    }
    return usage();
}
