#pragma once
namespace ds::api {
// Static JSON describing the build and the CPU features chosen at run time.
const char* build_info_json();
}
