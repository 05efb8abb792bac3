#include "nn/module.h"

namespace ds::nn {

namespace {
void collect(Module& m, std::vector<Param*>& out) {
    for (Param* p : m.own_params()) out.push_back(p);
    for (Module* c : m.children()) collect(*c, out);
}
}  // namespace

Tensor call_forward(Module& m, const Tensor& x, RunContext& ctx) {
    if (ctx.hooks == nullptr) return m.forward(x, ctx);
    ctx.hooks->before_forward(m);
    Tensor y = m.forward(x, ctx);
    ctx.hooks->after_forward(m);
    return y;
}

std::vector<Param*> all_params(Module& m) {
    std::vector<Param*> out;
    collect(m, out);
    return out;
}

}  // namespace ds::nn
