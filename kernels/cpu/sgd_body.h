// SGD on the CPU: the body (../elem/sgd.h) over the chunks.
#pragma once

#include "../elem/sgd.h"
#include "step_loop.h"

namespace {

template <class V>
void sgd_run(const ds::kernels::SgdArgs& a, const ds::kernels::SgdConsts& c) {
    run_step<V, SgdBody>(a, c);
}

}  // namespace
