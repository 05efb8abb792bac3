// Adam/AdamW on the CPU: the body (../elem/adam.h) over the chunks.
#pragma once

#include "../elem/adam.h"
#include "step_loop.h"

namespace {

// The state dtype is a third compile-time parameter: bind it, then run as
// the other optimizers.
template <int SD>
struct AdamWithState {
    template <int GD, int WD>
    using Body = AdamBody<GD, SD, WD>;
};

template <class V>
void adam_run(const ds::kernels::AdamArgs& a, const ds::kernels::AdamConsts& c) {
    with_dtype(a.state_dtype,
               [&](auto sd) { run_step<V, AdamWithState<decltype(sd)::value>::template Body>(a, c); });
}

}  // namespace
