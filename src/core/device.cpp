#include "core/device.h"

#include <cstring>

#include "core/error.h"

namespace ds {

namespace {

// Names for the DLPack 0.6 device types, used only in error messages.
const char* dl_device_type_name(int32_t t) {
    switch (t) {
        case kDLCPU: return "kDLCPU";
        case kDLCUDA: return "kDLCUDA";
        case kDLCUDAHost: return "kDLCUDAHost (pinned host memory)";
        case kDLOpenCL: return "kDLOpenCL";
        case kDLVulkan: return "kDLVulkan";
        case kDLMetal: return "kDLMetal";
        case kDLVPI: return "kDLVPI";
        case kDLROCM: return "kDLROCM";
        case kDLROCMHost: return "kDLROCMHost";
        case kDLExtDev: return "kDLExtDev";
        case kDLCUDAManaged: return "kDLCUDAManaged";
        default: return "an unknown device type";
    }
}

}  // namespace

std::string Device::str() const {
    if (kind == Kind::CPU) return "cpu";
    return "cuda:" + std::to_string(index);
}

DLDevice Device::to_dl() const {
    DLDevice d;
    d.device_type = kind == Kind::CPU ? kDLCPU : kDLCUDA;
    d.device_id = kind == Kind::CPU ? 0 : index;
    return d;
}

Device Device::from_dl(DLDevice d, const char* what) {
    if (!what) what = "tensor";
    // Read the enum's bytes as an integer: a caller may pass any value, and
    // loading an out-of-range value as DLDeviceType is undefined behaviour.
    static_assert(sizeof(d.device_type) == sizeof(int32_t), "DLDeviceType is 32-bit");
    int32_t type;
    std::memcpy(&type, &d.device_type, sizeof type);
    if (type == kDLCPU) return cpu();
    if (type == kDLCUDA) {
        DS_CHECK(d.device_id >= 0, DS_ERR_INVALID_ARGUMENT,
                 "%s.device {device_type=%d, device_id=%d}: device_id must not be negative", what,
                 type, d.device_id);
        return cuda(d.device_id);
    }
    fail(DS_ERR_INVALID_ARGUMENT,
         "%s.device {device_type=%d, device_id=%d}: %s is not supported (only kDLCPU and kDLCUDA)",
         what, type, d.device_id, dl_device_type_name(type));
}

}  // namespace ds
