/* C API test for ds_pipe_partition: every case of tests/data/pipe/partitions.txt
 * (DeepSpeed's own partition_uniform / partition_balanced / _find_layer_type
 * output, tests/tools/gen_pipe_partition_fixtures.py: uniform for 0-40
 * layers over 1-8 stages, "parameters" for GPT layer lists and random
 * counts with zeros and ties, "type:<regex>" over mixed layer kinds) must
 * give the same boundaries; every documented error is named. */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

#define MAX_LAYERS 64

static int read_ints64(const char* s, int64_t* out, int max) {
    int n = 0;
    char* end;
    while (n < max) {
        long long v = strtoll(s, &end, 10);
        if (end == s) break;
        out[n++] = (int64_t)v;
        s = end;
    }
    return n;
}

static void test_fixture(void) {
    static char line[4096], names_buf[4096];
    char path[1024], method[256];
    const char* names[MAX_LAYERS];
    int64_t weights[MAX_LAYERS], want[MAX_LAYERS + 1];
    int32_t parts[MAX_LAYERS + 1];
    int stages = 0, layers = 0, cases = 0, have_w = 0, have_n = 0, i;
    const char* dir = getenv("DS_TEST_DATA_DIR");
    FILE* f;
    CHECK(dir != NULL);
    if (!dir) return;
    snprintf(path, sizeof path, "%s/pipe/partitions.txt", dir);
    f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == 'P') {
            CHECK(sscanf(line, "P %255s %d %d", method, &stages, &layers) == 3);
            CHECK(layers <= MAX_LAYERS && stages <= MAX_LAYERS);
            have_w = have_n = 0;
        } else if (line[0] == 'W') {
            CHECK(read_ints64(line + 1, weights, MAX_LAYERS) == layers);
            have_w = 1;
        } else if (line[0] == 'N') {
            char* tok;
            int n = 0;
            snprintf(names_buf, sizeof names_buf, "%s", line + 2);
            for (tok = strtok(names_buf, " \n"); tok && n < MAX_LAYERS; tok = strtok(NULL, " \n")) names[n++] = tok;
            CHECK(n == layers);
            have_n = 1;
        } else if (line[0] == 'R') {
            CHECK(read_ints64(line + 1, want, MAX_LAYERS + 1) == stages + 1);
        } else if (line[0] == 'E') {
            int same = 1;
            EXPECT_OK(ds_pipe_partition(method, layers, have_w ? weights : NULL, have_n ? names : NULL, stages,
                                        parts));
            for (i = 0; i <= stages; ++i) same = same && parts[i] == want[i];
            if (!same) {
                fprintf(stderr, "case %d (%s, %d stages, %d layers): got", cases, method, stages, layers);
                for (i = 0; i <= stages; ++i) fprintf(stderr, " %d", parts[i]);
                fprintf(stderr, ", DeepSpeed:");
                for (i = 0; i <= stages; ++i) fprintf(stderr, " %lld", (long long)want[i]);
                fprintf(stderr, "\n");
            }
            CHECK(same);
            ++cases;
        }
    }
    fclose(f);
    CHECK(cases >= 100);
    printf("compared %d partitions with DeepSpeed's\n", cases);
}

static void test_errors(void) {
    int32_t parts[8];
    const int64_t counts[3] = {10, 20, 30}, negative[3] = {10, -1, 30};
    const char* names[3] = {"Embedding", "TransformerLayer", "Linear"};
    const char* with_null[3] = {"Embedding", NULL, "Linear"};
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_partition(NULL, 3, NULL, NULL, 2, parts), "method");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_partition("uniform", 3, NULL, NULL, 2, NULL), "parts");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_partition("uniform", -1, NULL, NULL, 2, parts), "num_layers");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_partition("uniform", 3, NULL, NULL, 0, parts), "num_stages");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_partition("balanced", 3, counts, names, 2, parts), "balanced",
                  "uniform");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_partition("parameters", 3, NULL, names, 2, parts),
                  "param_counts");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_partition("parameters", 3, negative, NULL, 2, parts),
                  "param_counts[1]");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_partition("type:linear", 3, counts, NULL, 2, parts),
                  "type_names");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_partition("type:linear", 3, NULL, with_null, 2, parts),
                  "type_names[1]");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_partition("type:moe", 3, NULL, names, 2, parts), "moe",
                  "matches no layer");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_pipe_partition("type:(unclosed", 3, NULL, names, 2, parts),
                  "regular expression");
    EXPECT_STATUS(DS_ERR_UNSUPPORTED, ds_pipe_partition("profile", 3, counts, names, 2, parts), "profile");
    /* The list a method does not read may be NULL; case does not matter. */
    EXPECT_OK(ds_pipe_partition("Uniform", 3, NULL, NULL, 2, parts));
    CHECK(parts[0] == 0 && parts[1] == 2 && parts[2] == 3);
    EXPECT_OK(ds_pipe_partition("PARAMETERS", 3, counts, NULL, 2, parts));
    CHECK(parts[0] == 0 && parts[1] == 2 && parts[2] == 3); /* {10, 20} | {30}: difference 0 */
    EXPECT_OK(ds_pipe_partition("type:TRANSFORMER", 3, NULL, names, 3, parts));
    CHECK(parts[0] == 0 && parts[3] == 3);
    /* The engine stays usable after errors: a valid call still succeeds. */
    EXPECT_OK(ds_pipe_partition("uniform", 0, NULL, NULL, 3, parts));
    CHECK(parts[0] == 0 && parts[1] == 0 && parts[2] == 0 && parts[3] == 0);
}

int main(void) {
    test_fixture();
    test_errors();
    return ds_test_finish();
}
