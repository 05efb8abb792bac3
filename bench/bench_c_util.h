/* Small pieces the C benchmarks of this folder share: a library call that
 * must succeed, command-line values, and the median of timings.
 * Header-only (static). */
#ifndef DS_BENCH_C_UTIL_H
#define DS_BENCH_C_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deepspeed_c.h"

/* The call must return DS_OK; otherwise print it with the library's message and exit 1. */
#define CHECK(call)                                                                              \
    do {                                                                                         \
        ds_status_t s_ = (call);                                                                 \
        if (s_ != DS_OK) {                                                                       \
            fprintf(stderr, "%s failed: %s\n  %s\n", #call, ds_status_string(s_), ds_last_error()); \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

static inline int cmp_double(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorts v). */
static inline double median_of(double* v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The value after `name` on the command line, or def. */
static inline long arg_long(int argc, char** argv, const char* name, long def) {
    int i;
    for (i = 1; i + 1 < argc; ++i)
        if (!strcmp(argv[i], name)) return strtol(argv[i + 1], NULL, 10);
    return def;
}

static inline const char* arg_str(int argc, char** argv, const char* name, const char* def) {
    int i;
    for (i = 1; i + 1 < argc; ++i)
        if (!strcmp(argv[i], name)) return argv[i + 1];
    return def;
}

#endif
