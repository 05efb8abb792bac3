/*
 * example_check.h — the CHECK of the example programs' unit tests
 * (test_gpt_task.c, test_png_plot.c): a failed condition prints its
 * location and counts in `failures`; main reports the count at the end.
 */
#ifndef EXAMPLE_CHECK_H
#define EXAMPLE_CHECK_H

#include <stdio.h>

static int failures = 0;
#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            ++failures;                                                              \
        }                                                                            \
    } while (0)

#endif /* EXAMPLE_CHECK_H */
