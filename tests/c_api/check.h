/* Tiny assertion helpers for the C API tests (C99). Each failed check prints
 * the location, the status and ds_last_error(), and the test exits 1. The
 * last line printed is "N passed, 0 failed". */
#ifndef DS_TEST_CHECK_H
#define DS_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deepspeed_c.h"

static int ds_test_passed = 0;
static int ds_test_failed = 0;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (cond) { ++ds_test_passed; }                                               \
        else {                                                                        \
            ++ds_test_failed;                                                         \
            fprintf(stderr, "%s:%d: CHECK(%s) failed; last error: %s\n", __FILE__,    \
                    __LINE__, #cond, ds_last_error());                                \
        }                                                                             \
    } while (0)

/* Expect `call` to return `want`; on error statuses also expect every
 * substring given (NULL-terminated) in ds_last_error(). */
#define EXPECT_STATUS(want, call, ...)                                                \
    do {                                                                              \
        ds_status_t got_ = (call);                                                    \
        const char* subs_[] = {__VA_ARGS__};                                          \
        size_t i_;                                                                    \
        int ok_ = got_ == (want);                                                     \
        for (i_ = 0; ok_ && i_ < sizeof subs_ / sizeof subs_[0]; ++i_)                \
            if (subs_[i_] && !strstr(ds_last_error(), subs_[i_])) ok_ = 0;            \
        if (ok_) { ++ds_test_passed; }                                                \
        else {                                                                        \
            ++ds_test_failed;                                                         \
            fprintf(stderr, "%s:%d: %s returned %d (%s), wanted %d; last error: %s\n", \
                    __FILE__, __LINE__, #call, (int)got_, ds_status_string(got_),     \
                    (int)(want), ds_last_error());                                    \
        }                                                                             \
    } while (0)

#define EXPECT_OK(call) EXPECT_STATUS(DS_OK, call, NULL)

static int ds_test_finish(void) {
    printf("%d passed, %d failed\n", ds_test_passed, ds_test_failed);
    return ds_test_failed == 0 ? 0 : 1;
}

#endif
