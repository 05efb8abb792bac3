// Compile-only check (tests/cpp/CMakeLists.txt): the public C++ header and the
// library's internal headers in one translation unit. With
// DEEPSPEED_C_HPP_NO_DS_ALIAS the two `Engine`/`Error` classes are distinct
// (deepspeed_c:: against the internal ds::); without it, the alias `ds` and
// the internal namespace `ds` are a compile error (the *_alias_clash test
// expects that failure), never a silent mix-up.
#include "core/error.h"
#include "engine/engine.h"
#include "deepspeed_c.hpp"

#include <type_traits>

static_assert(!std::is_same_v<ds::Error, deepspeed_c::Error>, "the wrapper's Error is its own type");
static_assert(!std::is_same_v<ds::Engine, deepspeed_c::Engine>, "the wrapper's Engine is its own type");

int main() { return 0; }
