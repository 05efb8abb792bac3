// Shared by the config parser tests (test_config_parse.cpp,
// test_config_hostile.cpp): the error parse() gives a config text.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "core/error.h"

namespace config_test {

// The ds::Error ds::config::parse throws for `json`; a test failure (and an
// empty DS_OK error) when it accepts it, showing the text's first 200 characters.
inline ds::Error parse_error(const std::string& json, int64_t world = 1) {
    try {
        ds::config::parse(json, world);
    } catch (const ds::Error& e) {
        return e;
    }
    ADD_FAILURE() << "accepted: " << json.substr(0, 200);
    return ds::Error(DS_OK, "");
}

}  // namespace config_test
