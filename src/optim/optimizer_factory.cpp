#include "core/error.h"
#include "optim/optimizers.h"

namespace ds::optim {

std::unique_ptr<Optimizer> Optimizer::create(const config::OptimizerConfig& c,
                                             DType model_dtype) {
    if (c.type == "adam" || c.type == "adamw")
        return std::make_unique<AdamOptimizer>(c, model_dtype);
    if (c.type == "lamb") return std::make_unique<LambOptimizer>(c);
    if (c.type == "lion") return std::make_unique<LionOptimizer>(c);
    if (c.type == "SGD") return std::make_unique<SgdOptimizer>(c);
    fail(DS_ERR_UNSUPPORTED, "optimizer.type: '%s' is not supported (supported: Adam, AdamW, Lamb, Lion, SGD)",
         c.type.c_str());
}

}  // namespace ds::optim
