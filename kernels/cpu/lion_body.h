// Lion on the CPU: the body (../elem/lion.h) over the chunks.
#pragma once

#include "../elem/lion.h"
#include "step_loop.h"

namespace {

template <class V>
void lion_run(const ds::kernels::LionArgs& a, const ds::kernels::LionConsts& c) {
    run_step<V, LionBody>(a, c);
}

}  // namespace
