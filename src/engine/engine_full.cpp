// The debugging copies (DeepSpeed's safe_get_full_* / safe_set_full_*):
// the argument checks and the agreement across ranks; the copies themselves
// are the ZeRO strategy's (zero/flat_full_copy.cpp).
#include <string>
#include <vector>

#include "core/dlpack_interop.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/rank_agreement.h"

namespace ds {

namespace {

const char* full_name(FullTensor which) {
    switch (which) {
        case FullTensor::Param: return "fp32 weights";
        case FullTensor::Grad: return "gradient";
        default: return "optimizer state";
    }
}

// Index of optimizer state `key`, or DS_ERR_NOT_FOUND listing the valid keys.
size_t state_index(const Param& p, const char* key, const optim::Optimizer* opt) {
    DS_CHECK(key != nullptr, DS_ERR_INVALID_ARGUMENT, "argument 'key' is NULL");
    std::vector<std::string> names = opt ? opt->state_names() : std::vector<std::string>{};
    std::string valid;
    for (size_t i = 0; i < names.size(); ++i) {
        if (names[i] == key) return i;
        valid += (i ? ", " : "") + names[i];
    }
    fail(DS_ERR_NOT_FOUND, "parameter '%s': no optimizer state '%s' (%s has: %s)", p.name.c_str(), key,
         opt ? opt->name() : "no optimizer", valid.empty() ? "none" : valid.c_str());
}

}  // namespace

// A device-resident engine's buffers stay where they are: the strategy
// copies the one parameter's slice across (zero/flat_full_copy.cpp).
void Engine::get_full(FullTensor which, const char* name, const char* key, const DLTensor* out) {
    Param* pp = nullptr;
    size_t si = 0;
    Tensor dst;
    auto checks = [&] {
        require_initialized("ds_engine_get_full_*");
        pp = which == FullTensor::Param ? &params_.get(name) : &trainable_param(name, full_name(which));
        si = which == FullTensor::OptimizerState ? state_index(*pp, key, optimizer_.get()) : 0;
        dst = from_dltensor(out, "out", /*require_contiguous=*/true);
        expect_device(out, Device::cpu(), "out");
        expect_dtype(out, DType::F32, "out");
        expect_shape(out, pp->shape, "out");
        agree::CallArgs a;
        a.args = agree::hash_str(key, agree::hash_str(name, agree::hash_bytes(&which, sizeof which)));
        a.what = "parameter name, tensor and key";
        return a;
    };
    // Collective when partitioned: every rank's checks, then agreement (rank_agreement.h).
    if (strategy_->collective(zero::Collective::GetFull)) agree::enter(*comm_, agree::Call::GetFull, checks);
    else checks();
    strategy_->read_full(*pp, which, si, dst);
}

void Engine::set_full(FullTensor which, const char* name, const char* key, const DLTensor* value) {
    require_initialized("ds_engine_set_full_*");
    Param& p = which == FullTensor::Param ? params_.get(name) : trainable_param(name, full_name(which));
    const size_t si = which == FullTensor::OptimizerState ? state_index(p, key, optimizer_.get()) : 0;
    Tensor src = from_dltensor(value, "value", /*require_contiguous=*/false);
    expect_device(value, Device::cpu(), "value");
    expect_dtype(value, DType::F32, "value");
    expect_shape(value, p.shape, "value");
    strategy_->write_full(p, which, si, src);
    if (which == FullTensor::Param) refresh_device_weight(p);  // ZeRO-Offload on cuda:N
}

}  // namespace ds
