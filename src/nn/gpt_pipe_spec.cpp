// The GPT spec's "pipeline" object (model_spec.h GptPipeSpec): strict like
// the rest of the spec, every bad key or value named by its path
// "pipeline.<key>".
#include <cjson/cJSON.h>

#include "config/json_reader.h"
#include "core/error.h"
#include "nn/model_spec.h"

namespace ds::nn {

GptPipeSpec parse_gpt_pipeline(const cJSON* obj) {
    DS_CHECK(cJSON_IsObject(obj), DS_ERR_INVALID_CONFIG, "pipeline: expected an object, got %s",
             json::describe(obj).c_str());
    check_spec_keys(obj, "pipeline", {"stages", "partition_method", "activation_checkpoint_interval"},
                    "the gpt spec's pipeline object");
    config::detail::ObjectReader r(obj, "pipeline", config::detail::AutoRule::Reject);
    GptPipeSpec s;
    r.read("stages", s.stages, 1, 65536);
    if (r.read("partition_method", s.partition_method))
        DS_CHECK(!s.partition_method.empty(), DS_ERR_INVALID_CONFIG,
                 "pipeline.partition_method: the empty string is not a partition method (e.g. \"parameters\", "
                 "\"uniform\", \"type:TransformerLayer\")");
    r.read("activation_checkpoint_interval", s.activation_checkpoint_interval, 0, int64_t{1} << 20);
    return s;
}

}  // namespace ds::nn
