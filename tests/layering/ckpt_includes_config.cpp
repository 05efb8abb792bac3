// Probe (never built by default): ckpt including config, a module beside it
// (same layer, no dependency). tests/layering expects this NOT to compile.
#include "config/config.h"
