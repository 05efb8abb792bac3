#include "nn/gpt.h"
#include "nn/model.h"
#include "nn/sequential.h"

namespace ds::nn {

std::unique_ptr<Model> build_model(const std::string& spec_json) {
    const ModelSpec spec = parse_model_spec(spec_json);
    return spec.type == ModelSpec::Type::Gpt ? build_gpt(spec) : build_sequential(spec);
}

}  // namespace ds::nn
