// catch_error(f): runs f and returns the ds::Error it throws; a test failure
// (and an empty DS_OK error) when it throws none. Shared by the unit tests
// that check a refusal's status and message.
#pragma once

#include <gtest/gtest.h>

#include "core/error.h"

template <typename F>
ds::Error catch_error(F&& f) {
    try {
        f();
    } catch (const ds::Error& e) {
        return e;
    }
    ADD_FAILURE() << "expected ds::Error";
    return ds::Error(DS_OK, "");
}
