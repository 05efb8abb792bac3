// DType and Device: encodings checked against literal tables from the DLPack
// 0.6 header and the kernel header, not against the code's own output.
#include <gtest/gtest.h>

#include "catch_error.h"

#include <cstring>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kernels.h"

namespace {

using ds::Device;
using ds::DType;

struct Row {
    DType dtype;
    const char* name;
    uint8_t code;
    uint8_t bits;
    size_t size;
};

// DLPack 0.6: kDLInt=0, kDLUInt=1, kDLFloat=2, kDLBfloat=4.
const Row kRows[] = {
    {DType::F32, "fp32", 2, 32, 4}, {DType::F16, "fp16", 2, 16, 2},  {DType::BF16, "bf16", 4, 16, 2},
    {DType::I8, "int8", 0, 8, 1},   {DType::U8, "uint8", 1, 8, 1},   {DType::I32, "int32", 0, 32, 4},
    {DType::I64, "int64", 0, 64, 8},
};

TEST(CoreDType, TableMatchesDLPack) {
    for (const Row& r : kRows) {
        SCOPED_TRACE(r.name);
        EXPECT_EQ(ds::dtype_size(r.dtype), r.size);
        EXPECT_STREQ(ds::dtype_name(r.dtype), r.name);
        EXPECT_EQ(ds::dtype_from_name(r.name), r.dtype);
        DLDataType t = ds::dtype_to_dl(r.dtype);
        EXPECT_EQ(t.code, r.code);
        EXPECT_EQ(t.bits, r.bits);
        EXPECT_EQ(t.lanes, 1);
        DLDataType lit{r.code, r.bits, 1};
        EXPECT_EQ(ds::dtype_from_dl(lit, "x"), r.dtype);
        DType out;
        EXPECT_TRUE(ds::dtype_from_dl(lit, &out));
        EXPECT_EQ(out, r.dtype);
    }
}

TEST(CoreDType, RejectsLanesAndUnknownCodes) {
    ds::Error e = catch_error([] { ds::dtype_from_dl(DLDataType{2, 32, 2}, "grad"); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(e.what(), "grad.dtype {code=2, bits=32, lanes=2}: lanes must be 1");

    const DLDataType bad[] = {{2, 64, 1}, {2, 8, 1}, {4, 32, 1}, {5, 64, 1}, {3, 64, 1},
                              {0, 16, 1}, {1, 32, 1}, {1, 1, 1}, {9, 32, 1}};
    for (const DLDataType& t : bad) {
        DType out;
        EXPECT_FALSE(ds::dtype_from_dl(t, &out));
        ds::Error e2 = catch_error([&] { ds::dtype_from_dl(t, "w"); });
        EXPECT_EQ(e2.status(), DS_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::strstr(e2.what(), "w.dtype {code="), nullptr) << e2.what();
    }
}

TEST(CoreDType, KernelCodes) {
    EXPECT_EQ(ds::dtype_to_kernel(DType::F32), DSK_F32);
    EXPECT_EQ(ds::dtype_to_kernel(DType::F16), DSK_F16);
    EXPECT_EQ(ds::dtype_to_kernel(DType::BF16), DSK_BF16);
    EXPECT_EQ(ds::dtype_from_kernel(DSK_BF16), DType::BF16);
    for (DType d : {DType::I8, DType::U8, DType::I32, DType::I64}) {
        ds::Error e = catch_error([&] { ds::dtype_to_kernel(d); });
        EXPECT_EQ(e.status(), DS_ERR_UNSUPPORTED);
        EXPECT_NE(std::strstr(e.what(), ds::dtype_name(d)), nullptr) << e.what();
    }
    EXPECT_EQ(catch_error([] { ds::dtype_from_kernel(77); }).status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(ds::dtype_is_float(DType::BF16));
    EXPECT_FALSE(ds::dtype_is_float(DType::I32));
    EXPECT_EQ(catch_error([] { ds::dtype_from_name("float32"); }).status(), DS_ERR_INVALID_ARGUMENT);
}

TEST(CoreDevice, ParseAndPrint) {
    Device c = Device::from_dl(DLDevice{kDLCPU, 0}, "x");
    EXPECT_TRUE(c.is_cpu());
    EXPECT_EQ(c.str(), "cpu");
    EXPECT_EQ(Device::from_dl(DLDevice{kDLCPU, 3}, "x"), Device::cpu());  // CPU id ignored
    Device g = Device::from_dl(DLDevice{kDLCUDA, 2}, "x");
    EXPECT_TRUE(g.is_cuda());
    EXPECT_EQ(g.index, 2);
    EXPECT_EQ(g.str(), "cuda:2");
    EXPECT_EQ(Device::cuda(0).str(), "cuda:0");
    EXPECT_NE(Device::cuda(0), Device::cuda(1));
    EXPECT_NE(Device::cuda(0), Device::cpu());
    DLDevice d = Device::cuda(5).to_dl();
    EXPECT_EQ(d.device_type, kDLCUDA);
    EXPECT_EQ(d.device_id, 5);
    EXPECT_EQ(Device::cpu().to_dl().device_type, kDLCPU);
}

TEST(CoreDevice, RejectsOtherDeviceTypes) {
    const DLDeviceType bad[] = {kDLCUDAHost, kDLOpenCL, kDLVulkan, kDLMetal,
                                kDLROCM,     kDLROCMHost, kDLCUDAManaged, kDLExtDev};
    for (DLDeviceType t : bad) {
        ds::Error e = catch_error([&] { Device::from_dl(DLDevice{t, 0}, "grad"); });
        EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::strstr(e.what(), "grad.device {device_type="), nullptr) << e.what();
        EXPECT_NE(std::strstr(e.what(), "not supported"), nullptr) << e.what();
    }
    ds::Error e = catch_error([] { Device::from_dl(DLDevice{kDLCUDAHost, 0}, "p"); });
    EXPECT_NE(std::strstr(e.what(), "kDLCUDAHost"), nullptr) << e.what();
    ds::Error neg = catch_error([] { Device::from_dl(DLDevice{kDLCUDA, -1}, "p"); });
    EXPECT_EQ(neg.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(neg.what(), "device_id"), nullptr) << neg.what();
}

}  // namespace
