// Probe (never built by default): the engine module including headers of
// modules below it. tests/layering expects this to compile, so the failing
// probes fail for their upward include and not for a broken setup.
#include "ckpt/manifest.h"
#include "comm/communicator.h"
#include "config/config.h"
#include "core/tensor.h"
#include "engine/engine.h"
#include "kernels.h"
#include "zero/partition.h"
