// Probe (never built by default): code in the core module including a header
// of a module above it. tests/layering expects this NOT to compile.
#include "engine/engine.h"
