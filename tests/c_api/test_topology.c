/* C API test for ds_topology_*: the mapping of every topology in
 * tests/data/pipe/topology.txt (written by DeepSpeed's own topology.py,
 * tests/tools/gen_pipe_fixtures.py: coordinates of every rank, comm lists of
 * every axis, rank representations, filter_match), the worked examples of
 * DEEPSPEED_SEMANTICS.md §8.1 and of DeepSpeed's docstrings, the default
 * grid, and every documented error. Communicators along axes: a world of one
 * here; several ranks in tests/mpi/test_topology.cpp. */
#include <stdint.h>

#include "check.h"

#define MAXR 256

static ds_topology_t* g_topo = NULL;
static int32_t g_world = 0, g_naxes = 0;
static char g_axes[8][32];

/* "0 4 | 1 5" -> ranks (flattened), lists */
static int parse_lists(const char* s, int32_t* ranks, int32_t* nlists) {
    int n = 0, consumed = 0;
    *nlists = 0;
    while (*s) {
        int32_t v;
        while (*s == ' ') ++s;
        if (*s == '|') {
            ++s;
            continue;
        }
        if (*s == '\n' || *s == '\0') break;
        if (sscanf(s, "%d%n", &v, &consumed) != 1) break;
        if (n == 0 || *nlists == 0) *nlists = 1;
        ranks[n++] = v;
        s += consumed;
    }
    return n;
}

static void check_fixture_line(char* line) {
    if (line[0] == 'T') {
        int32_t dims[8];
        const char* names[8];
        char* p = line + 2;
        int consumed = 0, i;
        ds_topology_destroy(g_topo);
        g_topo = NULL;
        CHECK(sscanf(p, "%d%n", &g_naxes, &consumed) == 1 && g_naxes <= 8);
        p += consumed;
        for (i = 0; i < g_naxes; ++i) {
            CHECK(sscanf(p, "%31s%n", g_axes[i], &consumed) == 1);
            p += consumed;
            names[i] = g_axes[i];
        }
        for (i = 0; i < g_naxes; ++i) {
            CHECK(sscanf(p, "%d%n", &dims[i], &consumed) == 1);
            p += consumed;
        }
        CHECK(sscanf(p, "%d", &g_world) == 1);
        EXPECT_OK(ds_topology_create(names, dims, g_naxes, &g_topo));
        {
            int32_t w = 0, n = 0;
            EXPECT_OK(ds_topology_world_size(g_topo, &w));
            CHECK(w == g_world);
            EXPECT_OK(ds_topology_num_axes(g_topo, &n));
            CHECK(n == g_naxes);
        }
    } else if (line[0] == 'C') {
        int32_t rank, want[8], got[8], back = -1, i;
        int consumed = 0;
        char* p = line + 2;
        CHECK(sscanf(p, "%d%n", &rank, &consumed) == 1);
        p += consumed;
        for (i = 0; i < g_naxes; ++i) {
            CHECK(sscanf(p, "%d%n", &want[i], &consumed) == 1);
            p += consumed;
        }
        EXPECT_OK(ds_topology_coord_of(g_topo, rank, got, 8));
        for (i = 0; i < g_naxes; ++i) CHECK(got[i] == want[i]);
        EXPECT_OK(ds_topology_rank_of(g_topo, want, g_naxes, &back));
        CHECK(back == rank);
    } else if (line[0] == 'L') {
        char axis[32];
        int32_t want[MAXR], got[MAXR], nlists = 0, len = 0, wlists = 0;
        int consumed = 0, n, i, bars = 0;
        CHECK(sscanf(line + 2, "%31s%n", axis, &consumed) == 1);
        n = parse_lists(line + 2 + consumed, want, &wlists);
        for (i = 0; line[i]; ++i) bars += line[i] == '|';
        EXPECT_OK(ds_topology_axis_comm_lists(g_topo, axis, got, MAXR, &nlists, &len));
        CHECK(nlists == bars + 1 && nlists * len == n);
        for (i = 0; i < n; ++i) CHECK(got[i] == want[i]);
    } else if (line[0] == 'R') {
        int32_t rank;
        char want[128], got[128];
        size_t needed = 0;
        CHECK(sscanf(line + 2, "%d %127s", &rank, want) == 2);
        if (strcmp(want, "-") == 0) want[0] = '\0';
        EXPECT_OK(ds_topology_rank_repr(g_topo, rank, NULL, 0, got, sizeof got, &needed));
        CHECK(strcmp(got, want) == 0);
        CHECK(needed == strlen(want) + 1);
    } else if (line[0] == 'F') {
        /* F a=1 b=0 : ranks */
        char names[8][64];
        const char* pnames[8];
        int32_t vals[8], want[MAXR], got[MAXR], count = -1, nl = 0;
        int nc = 0, consumed = 0, n, i;
        char* p = line + 2;
        while (*p == ' ') ++p;
        while (*p != ':') {
            char tok[64];
            char* eq;
            CHECK(sscanf(p, "%63s%n", tok, &consumed) == 1);
            p += consumed;
            while (*p == ' ') ++p;
            eq = strchr(tok, '=');
            CHECK(eq != NULL);
            if (!eq) return;
            *eq = '\0';
            snprintf(names[nc], sizeof names[nc], "%s", tok);
            pnames[nc] = names[nc];
            vals[nc] = atoi(eq + 1);
            ++nc;
        }
        n = parse_lists(p + 1, want, &nl);
        EXPECT_OK(ds_topology_filter_match(g_topo, pnames, vals, nc, got, MAXR, &count));
        CHECK(count == n);
        for (i = 0; i < n && i < count; ++i) CHECK(got[i] == want[i]);
    }
}

static void test_fixture(void) {
    char path[1024], line[1024];
    const char* dir = getenv("DS_TEST_DATA_DIR");
    FILE* f;
    int topologies = 0;
    CHECK(dir != NULL);
    if (!dir) return;
    snprintf(path, sizeof path, "%s/pipe/topology.txt", dir);
    f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        check_fixture_line(line);
        topologies += line[0] == 'T';
    }
    fclose(f);
    ds_topology_destroy(g_topo);
    g_topo = NULL;
    CHECK(topologies == 9);
    printf("compared %d topologies with DeepSpeed's\n", topologies);
}

/* DEEPSPEED_SEMANTICS.md §8.1 and DeepSpeed's docstrings. */
static void test_worked_examples(void) {
    ds_topology_t* t = NULL;
    int32_t r = -1, c[3], lists[8], n = 0, len = 0, count = 0, i, p, d, m;
    const char* xy[] = {"x", "y"};
    const int32_t dims23[] = {2, 3};
    char buf[64];

    /* PipeDataParallelTopology: rank = pipe*dp + data */
    EXPECT_OK(ds_topology_create_pipe_data(3, 2, &t));
    for (p = 0; p < 3; ++p)
        for (d = 0; d < 2; ++d) {
            c[0] = p, c[1] = d;
            EXPECT_OK(ds_topology_rank_of(t, c, 2, &r));
            CHECK(r == p * 2 + d);
        }
    ds_topology_destroy(t);

    /* PipeModelDataParallelTopology(pp, mp, dp): axes pipe, data, model; rank = pipe*dp*mp + data*mp + model */
    EXPECT_OK(ds_topology_create_pipe_model_data(2, 3, 2, &t));
    {
        const char* name = NULL;
        int32_t dim = 0;
        EXPECT_OK(ds_topology_axis(t, 1, &name, &dim));
        CHECK(name && strcmp(name, "data") == 0 && dim == 2);
        EXPECT_OK(ds_topology_axis(t, 2, &name, &dim));
        CHECK(name && strcmp(name, "model") == 0 && dim == 3);
    }
    for (p = 0; p < 2; ++p)
        for (d = 0; d < 2; ++d)
            for (m = 0; m < 3; ++m) {
                c[0] = p, c[1] = d, c[2] = m;
                EXPECT_OK(ds_topology_rank_of(t, c, 3, &r));
                CHECK(r == p * 6 + d * 3 + m);
            }
    EXPECT_OK(ds_topology_rank_repr(t, 4, NULL, 0, buf, sizeof buf, NULL)); /* pipe 0, data 1, model 1 */
    CHECK(strcmp(buf, "model_01") == 0);
    ds_topology_destroy(t);

    /* axes pipe,data,model dims 2,2,2, axis pipe: [[0,4],[1,5],[2,6],[3,7]]; filter pipe=0,data=1: [2,3] */
    EXPECT_OK(ds_topology_create_pipe_model_data(2, 2, 2, &t));
    EXPECT_OK(ds_topology_axis_comm_lists(t, "pipe", lists, 8, &n, &len));
    CHECK(n == 4 && len == 2);
    for (i = 0; i < 4; ++i) CHECK(lists[2 * i] == i && lists[2 * i + 1] == i + 4);
    {
        const char* axes[] = {"pipe", "data"};
        const int32_t vals[] = {0, 1};
        EXPECT_OK(ds_topology_filter_match(t, axes, vals, 2, lists, 8, &count));
        CHECK(count == 2 && lists[0] == 2 && lists[1] == 3);
    }
    /* an axis it lacks: no lists, and get_dim 0 */
    EXPECT_OK(ds_topology_axis_comm_lists(t, "expert", NULL, 0, &n, &len));
    CHECK(n == 0 && len == 0);
    EXPECT_OK(ds_topology_dim(t, "expert", &r));
    CHECK(r == 0);
    EXPECT_OK(ds_topology_dim(t, "model", &r));
    CHECK(r == 2);
    ds_topology_destroy(t);

    /* X = ProcessTopology(axes=['x','y'], dims=[2,3]) */
    EXPECT_OK(ds_topology_create(xy, dims23, 2, &t));
    c[0] = 0, c[1] = 1;
    EXPECT_OK(ds_topology_rank_of(t, c, 2, &r));
    CHECK(r == 1);
    EXPECT_OK(ds_topology_dim(t, "y", &r));
    CHECK(r == 3);
    EXPECT_OK(ds_topology_coord_of(t, 1, c, 3));
    CHECK(c[0] == 0 && c[1] == 1);
    {
        const char* ax[] = {"x"};
        const char* ay[] = {"y"};
        const int32_t zero[] = {0};
        EXPECT_OK(ds_topology_filter_match(t, ax, zero, 1, lists, 8, &count)); /* get_axis_list('x', 0) */
        CHECK(count == 3 && lists[0] == 0 && lists[1] == 1 && lists[2] == 2);
        EXPECT_OK(ds_topology_filter_match(t, ay, zero, 1, lists, 8, &count)); /* get_axis_list('y', 0) */
        CHECK(count == 2 && lists[0] == 0 && lists[1] == 3);
    }
    ds_topology_destroy(t);

    /* Topo(axes=['a','b'], dims=[2,2]): repr(3) 'a_01-b_01'; omitting a: 'b_01' */
    {
        const char* ab[] = {"a", "b"};
        const char* omit_a[] = {"a"};
        const int32_t d22[] = {2, 2};
        EXPECT_OK(ds_topology_create(ab, d22, 2, &t));
        EXPECT_OK(ds_topology_rank_repr(t, 3, NULL, 0, buf, sizeof buf, NULL));
        CHECK(strcmp(buf, "a_01-b_01") == 0);
        EXPECT_OK(ds_topology_rank_repr(t, 3, omit_a, 1, buf, sizeof buf, NULL));
        CHECK(strcmp(buf, "b_01") == 0);
        ds_topology_destroy(t);
    }

    /* the default grid: prime factors dealt pipe, data, pipe, ... */
    {
        const int32_t world[] = {1, 2, 4, 6, 7, 8, 12, 30, 64};
        const int32_t pp[] = {1, 2, 2, 2, 7, 4, 6, 10, 8};
        const int32_t dp[] = {1, 1, 2, 3, 1, 2, 2, 3, 8};
        for (i = 0; i < 9; ++i) {
            const char* name = NULL;
            int32_t a = 0, b = 0;
            EXPECT_OK(ds_topology_create_default(world[i], &t));
            EXPECT_OK(ds_topology_axis(t, 0, &name, &a));
            CHECK(name && strcmp(name, "pipe") == 0);
            EXPECT_OK(ds_topology_axis(t, 1, &name, &b));
            CHECK(name && strcmp(name, "data") == 0);
            if (a != pp[i] || b != dp[i]) fprintf(stderr, "default grid %d: pipe %d data %d\n", world[i], a, b);
            CHECK(a == pp[i] && b == dp[i]);
            ds_topology_destroy(t);
        }
    }
}

static void test_errors(void) {
    ds_topology_t* t = (ds_topology_t*)(void*)&t;
    const char* dup[] = {"pipe", "pipe"};
    const char* empty[] = {"pipe", ""};
    const char* withnull[] = {"pipe", NULL};
    const int32_t d22[] = {2, 2}, d20[] = {2, 0}, big[] = {65536, 65536};
    int32_t c[4] = {0, 0, 0, 0}, r = 0, n = 0, len = 0, ranks[4];
    char buf[4];
    size_t needed = 0;
    ds_comm_t* comm = NULL;
    ds_comm_t* world = NULL;

    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_create(dup, d22, 2, &t), "'pipe' is named twice");
    CHECK(t == NULL);
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_create(empty, d22, 2, &t), "empty name");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_create(withnull, d22, 2, &t), "'axes'", "entry 1");
    {
        const char* pd[] = {"pipe", "data"};
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_create(pd, d20, 2, &t), "'data' has size 0");
    }
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_create(empty, big, 0, &t), "'num_axes' = 0");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_create(NULL, d22, 2, &t), "'axes'");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_create(dup, NULL, 2, &t), "'dims'");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_create_pipe_data(65536, 65536, &t), "exceeds");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_create_pipe_data(2, 2, NULL), "'out'");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_create_default(0, &t), "world size 0");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_create_pipe_model_data(2, -1, 2, &t), "'model' has size -1");

    EXPECT_OK(ds_topology_create_pipe_data(2, 3, &t));
    c[0] = 2;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_rank_of(t, c, 2, &r), "coordinate 2 on axis 'pipe'");
    c[0] = 0, c[1] = -1;
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_rank_of(t, c, 2, &r), "axis 'data'");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_rank_of(t, c, 1, &r), "1 coordinates given for 2 axes");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_coord_of(t, 6, c, 4), "rank 6 is outside [0, 6)");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_coord_of(t, 0, c, 1), "'coords' must hold 2");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_axis_comm_lists(t, "data", ranks, 4, &n, &len),
                  "must hold 6 ranks");
    CHECK(n == 2 && len == 3); /* sizes are reported anyway */
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_axis_comm_lists(t, NULL, ranks, 4, &n, &len), "'axis'");
    {
        const char* unknown[] = {"model"};
        const int32_t zero[] = {0};
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_filter_match(t, unknown, zero, 1, ranks, 4, &n),
                      "unknown axis 'model'");
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_filter_match(t, NULL, NULL, 0, ranks, 4, &n),
                      "must hold 6 ranks");
        CHECK(n == 6);
        n = -1; /* NULL and capacity 0: a query of the count */
        EXPECT_OK(ds_topology_filter_match(t, unknown, zero, 0, NULL, 0, &n));
        CHECK(n == 6);
        n = -1, len = -1;
        EXPECT_OK(ds_topology_axis_comm_lists(t, "pipe", NULL, 0, &n, &len));
        CHECK(n == 3 && len == 2);
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_axis_comm_lists(t, "pipe", NULL, 6, &n, &len),
                      "'ranks' must hold 6 ranks (capacity 6, NULL)");
    }
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_axis(t, 2, NULL, NULL), "'index' = 2");
    {
        const char* none[] = {NULL};
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_rank_repr(t, 0, none, 0, buf, 0, &needed), "16 bytes");
        CHECK(needed == 16); /* "pipe_00-data_00": nothing omitted */
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_rank_repr(t, 0, none, 0, NULL, 0, NULL), "'buf'");
    }

    /* communicators: the world must have the topology's size; the axis must exist */
    EXPECT_OK(ds_comm_create_world(NULL, &world));
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_comm(t, world, "data", &comm), "1 ranks",
                  "topology (axes pipe=2, data=3) has 6");
    CHECK(comm == NULL);
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_topology_comm(t, NULL, "data", &comm), "'world'");
    ds_topology_destroy(t);
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_topology_world_size(t, &r), "'topology'", "not a live");
    EXPECT_STATUS(DS_ERR_INVALID_HANDLE, ds_topology_comm(NULL, world, "data", &comm), "'topology'");
    ds_topology_destroy(t);    /* twice: harmless */
    ds_topology_destroy(NULL); /* harmless */

    /* a one-rank topology over a world of one */
    {
        const char* axes[] = {"pipe", "data", "model"};
        const char* two[] = {"pipe", "model"};
        const char* bad[] = {"pipe", "tensor"};
        const int32_t ones[] = {1, 1, 1};
        EXPECT_OK(ds_topology_create(axes, ones, 3, &t));
        EXPECT_OK(ds_topology_comm(t, world, "model", &comm));
        EXPECT_OK(ds_comm_size(comm, &r));
        CHECK(r == 1);
        ds_comm_destroy(comm);
        EXPECT_OK(ds_topology_group_comm(t, world, two, 2, &comm));
        ds_comm_destroy(comm);
        EXPECT_OK(ds_topology_group_comm(t, world, NULL, 0, &comm));
        ds_comm_destroy(comm);
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_comm(t, world, "expert", &comm), "no axis 'expert'");
        CHECK(comm == NULL);
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_group_comm(t, world, bad, 2, &comm), "no axis 'tensor'");
        EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_topology_group_comm(t, world, two, 2, NULL), "'out'");
        ds_topology_destroy(t);
    }
    EXPECT_OK(ds_comm_finalize(world));
    ds_comm_destroy(world);
}

int main(void) {
    test_fixture();
    test_worked_examples();
    test_errors();
    return ds_test_finish();
}
