/* Corruption and mismatch detection. For each file kind (manifest.json,
 * model.safetensors, optim_rank0.safetensors, latest) a byte is flipped, the
 * file truncated, or deleted; each load must fail with the documented status
 * and a message naming the file, and leave the engine exactly as it was
 * (every parameter's working weights, fp32 master, moments, lr, loss scale
 * and counters compared bytewise). Then checkpoints of other models (shape,
 * dtype, names), leftovers of interrupted saves, and odd directories. */
#include <sys/stat.h>
#include <unistd.h>

#include "train_common.h"

static int failures = 0, passes = 0;

#define EXPECT(cond, ...)                                       \
    do {                                                        \
        if (cond) {                                             \
            ++passes;                                           \
        } else {                                                \
            ++failures;                                         \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);     \
            fprintf(stderr, __VA_ARGS__);                       \
            fprintf(stderr, " (last error: %s)\n", ds_last_error()); \
        }                                                       \
    } while (0)

static void spit(const char* path, const unsigned char* p, size_t n) {
    FILE* f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
}

static int same(const bytes_t* a, const bytes_t* b) { return a->n == b->n && memcmp(a->p, b->p, a->n) == 0; }

/* Every parameter the engine has (of the test model's names, plus
 * "extra.w"), whatever its shape: working bytes, fp32 master and moments,
 * then lr, loss scale and counters. */
static bytes_t snapshot(ds_engine_t* e) {
    static const char* const names[] = {"embed.weight", "dense.weight", "dense.bias", "ln.frozen", "extra.w"};
    bytes_t b = {NULL, 0, 0};
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; ++i) {
        DLTensor view, t;
        int64_t shape[2], n;
        float* buf;
        if (ds_engine_param_view(e, names[i], &view) != DS_OK) continue;
        memcpy(shape, view.shape, (size_t)view.ndim * sizeof(int64_t));
        n = shape_numel(shape, view.ndim);
        bytes_append(&b, (const unsigned char*)view.data + view.byte_offset, (size_t)n * (view.dtype.bits / 8));
        buf = (float*)malloc((size_t)n * sizeof(float) + 1);
        t = f32_view(buf, shape, view.ndim);
        TRAIN_CHECK(ds_engine_get_full_fp32_param(e, names[i], &t));
        bytes_append(&b, buf, (size_t)n * 4);
        if (ds_engine_get_full_optimizer_state(e, names[i], "exp_avg", &t) == DS_OK) bytes_append(&b, buf, (size_t)n * 4);
        if (ds_engine_get_full_optimizer_state(e, names[i], "exp_avg_sq", &t) == DS_OK)
            bytes_append(&b, buf, (size_t)n * 4);
        if (ds_engine_get_full_optimizer_state(e, names[i], "momentum_buffer", &t) == DS_OK)
            bytes_append(&b, buf, (size_t)n * 4);
        free(buf);
    }
    dump_engine_scalars(e, &b);
    return b;
}

/* Load expecting `want`, a message containing `name`, and an unchanged engine. */
static void expect_failed_load(ds_engine_t* e, const char* dir, const char* tag, uint32_t flags, ds_status_t want,
                               const char* name, const char* what) {
    bytes_t before = snapshot(e), after;
    ds_status_t s = ds_load_checkpoint(e, dir, tag, flags, NULL);
    EXPECT(s == want, "%s: status %d (%s), wanted %d", what, (int)s, ds_status_string(s), (int)want);
    if (getenv("DS_TEST_VERBOSE")) printf("%-32s -> %s\n", what, ds_last_error());
    EXPECT(s == DS_OK || strstr(ds_last_error(), name) != NULL, "%s: message does not name '%s'", what, name);
    after = snapshot(e);
    EXPECT(same(&before, &after), "%s: the failed load changed the engine", what);
    bytes_free(&before);
    bytes_free(&after);
}

static void remove_dir(const char* dir) {
    char cmd[4200];
    sprintf(cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

/* An engine like train_engine's but with one parameter changed. */
static ds_engine_t* other_model(const char* config, const char* skip, int64_t bias_len, const char* extra) {
    ds_engine_t* e = NULL;
    int i;
    float init[512];
    memset(init, 0, sizeof init);
    TRAIN_CHECK(ds_engine_create(config, NULL, &e));
    for (i = 0; i < TRAIN_NPARAMS; ++i) {
        int64_t shape[2];
        int32_t ndim;
        DLTensor t;
        if (skip && strcmp(kParamNames[i], skip) == 0) continue;
        param_shape(i, 1, shape, &ndim);
        if (i == 2) shape[0] = bias_len;
        t = f32_view(init, shape, ndim);
        TRAIN_CHECK(ds_engine_add_param(e, kParamNames[i], &t, kParamTrainable[i] ? DS_PARAM_TRAINABLE : 0));
    }
    if (extra) {
        int64_t shape[1] = {3};
        DLTensor t = f32_view(init, shape, 1);
        TRAIN_CHECK(ds_engine_add_param(e, extra, &t, DS_PARAM_TRAINABLE));
    }
    TRAIN_CHECK(ds_engine_init(e));
    return e;
}

int main(void) {
    char root[] = "/tmp/ds_corrupt_XXXXXX", dir[4200], tagdir[4300];
    static const char* const files[4] = {"manifest.json", "model.safetensors", "optim_rank0.safetensors", "latest"};
    bytes_t pristine[4], saved_state, now;
    ds_engine_t* e;
    int f, k, w;
    if (!mkdtemp(root)) return 2;
    sprintf(dir, "%s/ckpt", root);
    sprintf(tagdir, "%s/global_step6", dir);

    e = train_engine(MODE_FP16, 1);
    for (w = 0; w < 6; ++w) train_window(e, MODE_FP16, 1);
    TRAIN_CHECK(ds_save_checkpoint(e, dir, NULL, "{\"note\": \"pristine\"}"));
    saved_state = train_dump(e, 1);
    for (f = 0; f < 4; ++f) {
        char path[4400];
        sprintf(path, "%s/%s", f == 3 ? dir : tagdir, files[f]);
        pristine[f] = slurp(path);
        EXPECT(pristine[f].n > 0, "%s was not written", path);
    }
    for (w = 0; w < 3; ++w) train_window(e, MODE_FP16, 1);  /* the engine now differs from the checkpoint */
    now = train_dump(e, 1);
    EXPECT(!same(&now, &saved_state), "training after the save changed nothing");
    bytes_free(&now);

    /* Each file kind x {flip a byte, truncate, delete}. */
    for (f = 0; f < 4; ++f) {
        char path[4400];
        sprintf(path, "%s/%s", f == 3 ? dir : tagdir, files[f]);
        for (k = 0; k < 3; ++k) {
            char what[200];
            ds_status_t want;
            sprintf(what, "%s %s", files[f], k == 0 ? "byte flipped" : k == 1 ? "truncated" : "deleted");
            if (k == 0) {
                bytes_t c = {NULL, 0, 0};
                bytes_append(&c, pristine[f].p, pristine[f].n);
                /* latest: the first byte (a different, missing tag); others: the middle. */
                c.p[f == 3 ? 0 : c.n / 2] ^= 0x20;
                spit(path, c.p, c.n);
                bytes_free(&c);
            } else if (k == 1) {
                spit(path, pristine[f].p, pristine[f].n / 2);
            } else {
                EXPECT(unlink(path) == 0, "cannot delete %s", path);
            }
            /* Missing files (and a `latest` naming a missing tag) are NOT_FOUND; damage is FORMAT. */
            want = (k == 2 || f == 3) ? DS_ERR_NOT_FOUND : DS_ERR_FORMAT;
            expect_failed_load(e, dir, NULL, 0, want, files[f], what);
            if (f == 3 && k == 0) expect_failed_load(e, dir, NULL, 0, want, "Global_step6", "latest flipped (tag)");
            spit(path, pristine[f].p, pristine[f].n);
        }
    }
    /* A manifest flip that leaves valid JSON with another value is caught by its own checksum. */
    {
        char path[4400];
        bytes_t c = {NULL, 0, 0};
        char* lr;
        sprintf(path, "%s/manifest.json", tagdir);
        bytes_append(&c, pristine[0].p, pristine[0].n);
        bytes_append(&c, "", 1);
        lr = strstr((char*)c.p, "\"global_steps\": 6");
        EXPECT(lr != NULL, "manifest has no global_steps 6");
        if (lr) lr[16] = '7';
        spit(path, c.p, c.n - 1);
        expect_failed_load(e, dir, NULL, 0, DS_ERR_FORMAT, "manifest.json is corrupt", "manifest value edited");
        spit(path, pristine[0].p, pristine[0].n);
        bytes_free(&c);
    }
    /* An empty `latest` is not a tag. */
    {
        char path[4400];
        sprintf(path, "%s/latest", dir);
        spit(path, pristine[3].p, 0);
        expect_failed_load(e, dir, NULL, 0, DS_ERR_FORMAT, "latest", "latest empty");
        spit(path, pristine[3].p, pristine[3].n);
    }
    /* Odd directories. */
    {
        char path[4400];
        sprintf(path, "%s/not_a_dir", root);
        spit(path, (const unsigned char*)"x", 1);
        expect_failed_load(e, path, NULL, 0, DS_ERR_IO, "not_a_dir", "load_dir is a file");
        sprintf(path, "%s/missing", root);
        expect_failed_load(e, path, NULL, 0, DS_ERR_NOT_FOUND, "missing", "load_dir missing");
        expect_failed_load(e, dir, "global_step99", 0, DS_ERR_NOT_FOUND, "global_step99", "tag missing");
        if (geteuid() != 0) {  /* root reads any directory */
            EXPECT(chmod(tagdir, 0) == 0, "chmod");
            expect_failed_load(e, dir, NULL, 0, DS_ERR_IO, "global_step6", "unreadable tag directory");
            EXPECT(chmod(tagdir, 0755) == 0, "chmod");
        }
    }
    /* Leftovers of an interrupted save are ignored by the loader... */
    {
        char path[4400];
        const char* client = NULL;
        sprintf(path, "%s/global_step9.tmp-0123456789abcdef", dir);
        mkdir(path, 0755);
        sprintf(path, "%s/global_step9.tmp-0123456789abcdef/manifest.json", dir);
        spit(path, (const unsigned char*)"junk", 4);
        EXPECT(ds_load_checkpoint(e, dir, NULL, 0, &client) == DS_OK, "pristine load failed");
        now = train_dump(e, 1);
        EXPECT(same(&now, &saved_state), "the restored state differs from the saved one");
        EXPECT(client && strcmp(client, "{\"note\":\"pristine\"}") == 0, "client state %s", client ? client : "(null)");
        bytes_free(&now);
        /* ...and removed by the next save. */
        TRAIN_CHECK(ds_save_checkpoint(e, dir, "again", NULL));
        sprintf(path, "%s/global_step9.tmp-0123456789abcdef", dir);
        EXPECT(access(path, F_OK) != 0, "leftover %s not removed by the next save", path);
    }
    /* Checkpoints of other models. */
    {
        ds_engine_t* o = other_model(train_config(MODE_FP16), NULL, 15, NULL);
        expect_failed_load(o, dir, "global_step6", 0, DS_ERR_FORMAT, "dense.bias", "shape mismatch");
        ds_engine_destroy(o);
        o = other_model(train_config(MODE_BF16), NULL, 16, NULL);
        expect_failed_load(o, dir, "global_step6", 0, DS_ERR_FORMAT, "BF16", "working dtype mismatch");
        ds_engine_destroy(o);
        o = other_model(train_config(MODE_FP16), NULL, 16, "extra.w");
        expect_failed_load(o, dir, "global_step6", 0, DS_ERR_FORMAT, "missing parameter(s) 'extra.w'",
                           "strict: parameter missing from the checkpoint");
        /* Non-strict: loads the rest, the extra parameter keeps its value. */
        EXPECT(ds_load_checkpoint(o, dir, "global_step6", DS_LOAD_NON_STRICT, NULL) == DS_OK, "non-strict load");
        ds_engine_destroy(o);
        o = other_model(train_config(MODE_FP16), "dense.weight", 16, NULL);
        expect_failed_load(o, dir, "global_step6", 0, DS_ERR_FORMAT, "unexpected parameter(s) 'dense.weight'",
                           "strict: unexpected parameter");
        EXPECT(ds_load_checkpoint(o, dir, "global_step6", DS_LOAD_NON_STRICT, NULL) == DS_OK, "non-strict load");
        ds_engine_destroy(o);
        /* SGD keeps other state than Adam. */
        o = other_model("{\"train_micro_batch_size_per_gpu\": 2, \"fp16\": {\"enabled\": true},"
                        " \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.1, \"momentum\": 0.9}}}",
                        NULL, 16, NULL);
        expect_failed_load(o, dir, "global_step6", 0, DS_ERR_FORMAT, "momentum_buffer", "optimizer state mismatch");
        EXPECT(ds_load_checkpoint(o, dir, "global_step6", DS_LOAD_NO_OPTIMIZER_STATES, NULL) == DS_OK,
               "weights-only load into another optimizer");
        ds_engine_destroy(o);
    }
    printf("%d passed, %d failed\n", passes, failures);
    for (f = 0; f < 4; ++f) bytes_free(&pristine[f]);
    bytes_free(&saved_state);
    ds_engine_destroy(e);
    remove_dir(root);
    return failures == 0 ? 0 : 1;
}
