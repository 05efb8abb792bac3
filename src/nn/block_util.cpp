#include "nn/block_util.h"

namespace ds::nn {

void name_linear(Linear& lin, const std::string& name) {
    lin.set_name(name);
    if (!lin.weight_is_shared()) lin.weight().name = name + ".weight";
    if (lin.has_bias()) lin.bias().name = name + ".bias";
}

}  // namespace ds::nn
