// An engine on cuda:N (options.device): which configs it takes, its stream,
// and keeping the device copies of the working weights current
// (engine/device_front.h).
#include <cstring>

#include "core/device_memory.h"
#include "core/dlpack_interop.h"
#include "core/error.h"
#include "engine/device_front.h"
#include "engine/engine.h"

namespace ds {

Device Engine::check_device(const EngineOptions& o, const config::Config& c) {
    if (o.device_type == kDLCPU) {
        DS_CHECK(o.device_index == 0, DS_ERR_INVALID_ARGUMENT, "options.device: CPU device id must be 0, got %d",
                 o.device_index);
        DS_CHECK(o.cuda_stream == nullptr, DS_ERR_INVALID_ARGUMENT,
                 "options.cuda_stream is set, but options.device is the CPU: a stream belongs to an engine on "
                 "{kDLCUDA, N}");
        return Device::cpu();
    }
    DS_CHECK(o.device_type == kDLCUDA, DS_ERR_INVALID_ARGUMENT,
             "options.device: device_type %d is not supported (use kDLCPU=1 or kDLCUDA=2)", o.device_type);
    DS_CHECK(o.device_index >= 0, DS_ERR_INVALID_ARGUMENT, "options.device: cuda device id %d is negative",
             o.device_index);
    DS_CHECK(device_memory::available(), DS_ERR_UNSUPPORTED,
             "options.device: cuda:%d requested, but this build has no CUDA (build with the CUDA toolkit and "
             "-DDS_WITH_CUDA=ON)",
             o.device_index);
    const config::ZeroConfig& z = c.zero_optimization;
    const bool offload = z.offload_optimizer && (z.offload_optimizer->device == "cpu" ||
                                                 z.offload_optimizer->device == "nvme");
    DS_CHECK(offload, DS_ERR_UNSUPPORTED,
             "options.device: on cuda:%d this version trains with ZeRO-Offload only (the optimizer and its fp32 "
             "state on the CPU, the working weights on the GPU): set zero_optimization.offload_optimizer.device "
             "to \"cpu\" (or \"nvme\"); an optimizer on the GPU is not built yet",
             o.device_index);
    DS_CHECK(z.stage == 1 || z.stage == 2, DS_ERR_UNSUPPORTED,
             "zero_optimization.stage = %d on cuda:%d: ZeRO-Offload on a GPU is built for stages 1 and 2 "
             "(stage 3 with offload_param is not built yet)",
             static_cast<int>(z.stage), o.device_index);
    const device_memory::DeviceScope scope(o.device_index);  // DS_ERR_DEVICE when there is no such device
    return Device::cuda(o.device_index);
}

bool Engine::honoured_on_device(const std::string& key) const {
    return device_.is_cuda() && key == "zero_optimization.offload_optimizer.device";
}

void Engine::set_stream(void* cuda_stream) {
    DS_CHECK(front_ != nullptr, DS_ERR_INVALID_STATE,
             "ds_engine_set_stream: this engine trains on the CPU (options.device); a stream belongs to an engine "
             "on {kDLCUDA, N}");
    front_->set_stream(cuda_stream);
}

void Engine::refresh_device_weights() {
    if (front_) front_->refresh(params_);
}

void Engine::require_cpu_engine(const char* call) const {
    DS_CHECK(!device_.is_cuda(), DS_ERR_UNSUPPORTED, "%s on an engine on %s is not built yet (CPU engines only)",
             call, device_.str().c_str());
}

Tensor Engine::device_init_to_host(const Tensor& t, const DLTensor* init, const char* what) {
    DS_CHECK(front_ && t.device() == device_, DS_ERR_INVALID_ARGUMENT, "%s is in %s memory, but the engine is on %s",
             what, t.device().str().c_str(), device_.str().c_str());
    DS_CHECK(dltensor_is_contiguous(init), DS_ERR_INVALID_ARGUMENT,
             "%s: an initial value in %s memory must be contiguous (row-major)", what, device_.str().c_str());
    Tensor host = Tensor::empty(t.shape(), t.dtype(), Device::cpu(), alloc_, MemCategory::Buffers);
    if (host.nbytes() > 0)
        std::memcpy(host.data_ptr(), front_->to_host(t.data_ptr(), host.nbytes(), what), host.nbytes());
    return host;
}

}  // namespace ds
