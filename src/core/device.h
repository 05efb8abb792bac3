// Device: where a tensor's memory lives. Only host memory (kDLCPU) and CUDA
// device memory (kDLCUDA) are understood; every other DLPack device type is
// rejected when parsed.
#pragma once

#include <cstdint>
#include <string>

#include <dlpack/dlpack.h>

namespace ds {

struct Device {
    enum class Kind : int32_t { CPU, CUDA };

    Kind kind = Kind::CPU;
    int32_t index = 0;  // CUDA ordinal; always 0 for CPU

    static Device cpu() { return Device{Kind::CPU, 0}; }
    static Device cuda(int32_t index) { return Device{Kind::CUDA, index}; }

    bool is_cpu() const { return kind == Kind::CPU; }
    bool is_cuda() const { return kind == Kind::CUDA; }

    // "cpu", "cuda:0".
    std::string str() const;

    DLDevice to_dl() const;
    // kDLCPU (device_id ignored, normalised to 0) or kDLCUDA with device_id >= 0;
    // anything else throws DS_ERR_INVALID_ARGUMENT naming `what`
    // ("grad.device {device_type=3, device_id=0}: kDLCUDAHost ... not supported").
    static Device from_dl(DLDevice d, const char* what);
};

inline bool operator==(const Device& a, const Device& b) {
    return a.kind == b.kind && a.index == b.index;
}
inline bool operator!=(const Device& a, const Device& b) { return !(a == b); }

}  // namespace ds
