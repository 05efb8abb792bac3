// An engine on cuda:N (options.device): which configs it takes, its stream,
// and keeping the device copies of the working weights current
// (engine/device_front.h).
#include <cstring>

#include "core/device_memory.h"
#include "core/dlpack_interop.h"
#include "comm/factory.h"
#include "core/error.h"
#include "engine/device_front.h"
#include "engine/engine.h"
#include "nn/model.h"

namespace ds {

Device Engine::check_device(const EngineOptions& o, const config::Config& c, int32_t world) {
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
    // Parameter offload: the ZeRO-Offload strategy keeps the 16-bit
    // partitions in host memory (or swaps them to NVMe) as the CPU engine
    // does; so does a device-resident ZeRO-3 (zero/stage3.cpp), whose
    // gathers copy this rank's chunk to the device.
    if (z.offloads_optimizer()) {  // ZeRO-Offload: device_front.h
        DS_CHECK(z.stage >= 1, DS_ERR_UNSUPPORTED,
                 "zero_optimization.offload_optimizer.device = \"%s\" on cuda:%d: ZeRO-Offload needs ZeRO stage 1 "
                 "or above, got 0",
                 z.offload_optimizer->device.c_str(), o.device_index);
    } else if (needs_data_comm(c, world)) {  // device-resident: zero/flat_device.cpp, over NCCL (make_data_comm)
        DS_CHECK(comm::nccl_built() || device_memory::host_backed_for_testing(), DS_ERR_UNSUPPORTED,
                 "options.device: cuda:%d with %d rank(s)%s: a device-resident engine reduces and gathers its "
                 "buffers in device memory over NCCL, and this build has no NCCL; set "
                 "zero_optimization.offload_optimizer.device to \"cpu\" (ZeRO-Offload), which works in host memory",
                 o.device_index, static_cast<int>(world),
                 world == 1 ? " and ZeRO-3 with offload_param" : "");
    }
    const device_memory::DeviceScope scope(o.device_index);  // DS_ERR_DEVICE when there is no such device
    return Device::cuda(o.device_index);
}

// A device-resident engine's flat buffers move over NCCL with several ranks,
// and at ZeRO-3 with parameters in host memory or on NVMe in a world of one
// too (its gathers run on device memory: zero::Strategy::create picks stage
// 3 there).
bool Engine::needs_data_comm(const config::Config& c, int32_t world) {
    const config::ZeroConfig& z = c.zero_optimization;
    if (z.offloads_optimizer()) return false;
    return world > 1 || (z.stage == 3 && z.offloads_params());
}

std::shared_ptr<comm::Communicator> Engine::make_data_comm() const { return device_comm_over(comm_, device_.index); }

std::shared_ptr<comm::Communicator> Engine::device_comm_over(const std::shared_ptr<comm::Communicator>& host,
                                                             int32_t device_index) {
    // The host-backed test device's memory is host memory: the host
    // communicator moves it, which is how the engine's multi-rank device
    // paths are tested without a GPU (tests/mpi/test_engine_on_device_ranks.cpp).
    if (device_memory::host_backed_for_testing()) return host;
    comm::Options o = host->options();
    o.backend = comm::Backend::Nccl;
    o.device = device_index;
    return comm::make_nccl(host, o);
}

// With offload_param "cpu" at ZeRO-3 the working weights are the offloaded
// parameters, which DeepSpeed page-locks with offload_param.pin_memory; here
// their host side of the link is the flat working buffer (a world of one:
// stage 0's layout) or the weight pipe's staging (the partitions are gathered
// on the host first). The gradients' side stays offload_optimizer's.
bool Engine::pins_weight_copies(const config::ZeroConfig& z) {
    if (!z.offloads_optimizer()) return false;
    return z.stage == 3 && z.offloads_params_to("cpu") ? z.offload_param->pin_memory : z.offload_optimizer->pin_memory;
}

bool Engine::honoured_on_device(const std::string& key) const {
    if (!device_.is_cuda()) return false;
    const config::ZeroConfig& z = config_.zero_optimization;
    const bool offload = z.offloads_optimizer();
    return key == "zero_optimization.offload_optimizer.device" ||
           (offload && (key == "zero_optimization.offload_optimizer.pin_memory" ||
                        key == "zero_optimization.offload_param.device")) ||
           (offload && z.stage == 3 && z.offloads_params_to("cpu") &&
            key == "zero_optimization.offload_param.pin_memory") ||
           (!offload && config_.zero_optimization.stage == 3 &&
            (key == "zero_optimization.offload_param.device" ||
             // page-locks the host chunks with "cpu"; pages swapped to NVMe ("nvme") are never locked
             (key == "zero_optimization.offload_param.pin_memory" &&
              config_.zero_optimization.offloads_params_to("cpu"))));
}

void Engine::set_stream(void* cuda_stream) {
    DS_CHECK(device_.is_cuda(), DS_ERR_INVALID_STATE,
             "ds_engine_set_stream: this engine trains on the CPU (options.device); a stream belongs to an engine "
             "on {kDLCUDA, N}");
    stream_ = cuda_stream;  // call_ends orders it after everything this engine queued so far
}

void Engine::call_begins() {
    if (!device_.is_cuda() || stream_ == nullptr) return;
    const device_memory::DeviceScope on(device_.index);
    device_memory::order_after(nullptr, stream_, "ordering the engine's work after the caller's stream");
}

void Engine::call_ends() {
    if (!device_.is_cuda() || stream_ == nullptr) return;
    const device_memory::DeviceScope on(device_.index);
    device_memory::order_after(stream_, nullptr, "ordering the caller's stream after the engine's work");
}

Engine::HostParking::HostParking(Engine& e, bool write_back) : e_(e), write_back_(write_back) {
    if (e_.resident() && e_.strategy_) e_.strategy_->park_on_host();
}

Engine::HostParking::~HostParking() {
    if (!e_.resident() || !e_.strategy_ || !e_.strategy_->parked()) return;
    try {
        e_.strategy_->unpark(write_back_);
    } catch (const Error& err) {
        DS_LOG(e_.logger_, DS_LOG_WARN,
               "the engine's buffers stay in host memory for now (the copy back to %s failed: %s); the next "
               "training call retries it",
               e_.device_.str().c_str(), err.what());
    }
}

std::optional<device_memory::DeviceScope> Engine::device_scope() const {
    if (!resident()) return std::nullopt;
    return std::optional<device_memory::DeviceScope>(std::in_place, device_.index);
}

std::optional<device_memory::DeviceScope> Engine::model_device_scope() const {
    if (!device_.is_cuda()) return std::nullopt;
    return std::optional<device_memory::DeviceScope>(std::in_place, device_.index);
}

const Tensor& Engine::model_weights(const Param& p) const { return front_ ? front_->weights(p) : p.working; }

void Engine::drop_released_device_weights() {
    if (front_) front_->drop_released();
}


void Engine::require_on_device() {
    if (resident() && strategy_ && strategy_->parked()) strategy_->unpark(/*write_back=*/true);
}

void Engine::refresh_device_weights(bool trained_only) {
    if (!front_) return;
    if (trained_only) front_->refresh_trained(strategy_->flat_working());
    else front_->refresh_all(strategy_->flat_working());
}

void Engine::refresh_device_weight(const Param& p) {
    if (front_) front_->refresh(p);
}

void Engine::require_cpu_engine(const char* call) const {
    DS_CHECK(!device_.is_cuda(), DS_ERR_UNSUPPORTED, "%s on an engine on %s is not built yet (CPU engines only)",
             call, device_.str().c_str());
}

Tensor Engine::device_init_to_host(const Tensor& t, const DLTensor* init, const char* what) {
    DS_CHECK(t.device() == device_, DS_ERR_INVALID_ARGUMENT, "%s is in %s memory, but the engine is on %s", what,
             t.device().str().c_str(), device_.str().c_str());
    DS_CHECK(dltensor_is_contiguous(init), DS_ERR_INVALID_ARGUMENT,
             "%s: an initial value in %s memory must be contiguous (row-major)", what, device_.str().c_str());
    Tensor host = Tensor::empty(t.shape(), t.dtype(), Device::cpu(), alloc_, MemCategory::Buffers);
    if (host.nbytes() == 0) return host;
    if (front_)  // the caller's stream was waited for (call_begins)
        std::memcpy(host.data_ptr(), front_->to_host(t.data_ptr(), host.nbytes(), what), host.nbytes());
    else  // device-resident: the legacy default stream, the engine's
        host.copy_from(t);
    return host;
}

}  // namespace ds
