// Probe (never built by default): a kernel including a core header. Kernels
// sit below core; tests/layering expects this NOT to compile.
#include "core/tensor.h"
