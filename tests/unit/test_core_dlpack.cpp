// DLPack interop: every validation failure names the field; contiguity
// edge cases; unaligned data and odd byte_offset; export round trips.
#include <gtest/gtest.h>

#include "catch_error.h"

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/dlpack_interop.h"
#include "core/error.h"

namespace {

using ds::Allocator;
using ds::Device;
using ds::DType;
using ds::MemCategory;
using ds::Tensor;

// A valid 3x4 fp32 CPU tensor the cases below break one field at a time.
struct Fixture {
    float data[12] = {};
    int64_t shape[4] = {3, 4, 0, 0};
    int64_t strides[4] = {4, 1, 0, 0};
    DLTensor t{};
    Fixture() {
        t.data = data;
        t.device = DLDevice{kDLCPU, 0};
        t.ndim = 2;
        t.dtype = DLDataType{kDLFloat, 32, 1};
        t.shape = shape;
        t.strides = nullptr;
        t.byte_offset = 0;
    }
};

struct BadCase {
    const char* name;
    std::function<void(Fixture&)> breaks;
    const char* message_part;  // must appear in the message
};

const std::vector<BadCase>& bad_cases() {
    static const std::vector<BadCase> cases = {
        {"data NULL", [](Fixture& f) { f.t.data = nullptr; }, "grad.data is NULL"},
        {"ndim negative", [](Fixture& f) { f.t.ndim = -1; }, "grad.ndim = -1"},
        {"ndim too large", [](Fixture& f) { f.t.ndim = 33; }, "grad.ndim = 33"},
        {"shape NULL", [](Fixture& f) { f.t.shape = nullptr; }, "grad.shape is NULL"},
        {"negative dim", [](Fixture& f) { f.shape[1] = -3; }, "grad.shape[1] = -3 is negative"},
        {"lanes", [](Fixture& f) { f.t.dtype.lanes = 2; },
         "grad.dtype {code=2, bits=32, lanes=2}: lanes must be 1"},
        {"float64", [](Fixture& f) { f.t.dtype.bits = 64; }, "grad.dtype {code=2, bits=64"},
        {"complex", [](Fixture& f) { f.t.dtype = DLDataType{kDLComplex, 64, 1}; },
         "grad.dtype {code=5"},
        {"bfloat32", [](Fixture& f) { f.t.dtype = DLDataType{kDLBfloat, 32, 1}; },
         "grad.dtype {code=4, bits=32"},
        {"opaque handle", [](Fixture& f) { f.t.dtype = DLDataType{kDLOpaqueHandle, 64, 1}; },
         "grad.dtype {code=3"},
        {"uint16", [](Fixture& f) { f.t.dtype = DLDataType{kDLUInt, 16, 1}; },
         "grad.dtype {code=1, bits=16"},
        {"pinned host device", [](Fixture& f) { f.t.device = DLDevice{kDLCUDAHost, 0}; },
         "grad.device {device_type=3"},
        {"opencl device", [](Fixture& f) { f.t.device = DLDevice{kDLOpenCL, 0}; },
         "grad.device {device_type=4"},
        {"negative cuda ordinal", [](Fixture& f) { f.t.device = DLDevice{kDLCUDA, -2}; },
         "grad.device {device_type=2, device_id=-2}"},
        {"negative stride",
         [](Fixture& f) {
             f.strides[1] = -1;
             f.t.strides = f.strides;
         },
         "grad.strides[1] = -1 is negative"},
        {"numel overflow",
         [](Fixture& f) {
             f.shape[0] = 1LL << 32;
             f.shape[1] = 1LL << 32;
         },
         "grad.shape = [4294967296, 4294967296]: element count overflows"},
        {"byte size overflow",
         [](Fixture& f) {
             f.t.ndim = 1;
             f.shape[0] = 1LL << 62;
         },
         "grad.shape = [4611686018427387904]: byte size overflows"},
        {"byte_offset overflow", [](Fixture& f) { f.t.byte_offset = UINT64_MAX - 8; },
         "grad.byte_offset = "},
        {"stride extent overflow",
         [](Fixture& f) {
             f.strides[0] = INT64_MAX / 2;
             f.t.strides = f.strides;
         },
         "grad.strides = [4611686018427387903, 1]: the addressed range overflows"},
    };
    return cases;
}

TEST(CoreDLPack, ValidTensorPasses) {
    Fixture f;
    EXPECT_NO_THROW(ds::validate_dltensor(&f.t, "grad"));
    f.t.strides = f.strides;
    EXPECT_NO_THROW(ds::validate_dltensor(&f.t, "grad"));
}

TEST(CoreDLPack, EachBadFieldIsNamed) {
    ds::Error null_t = catch_error([] { ds::validate_dltensor(nullptr, "grad"); });
    EXPECT_EQ(null_t.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(null_t.what(), "grad is NULL");
    ASSERT_GE(bad_cases().size(), 15u);
    for (const BadCase& c : bad_cases()) {
        SCOPED_TRACE(c.name);
        Fixture f;
        c.breaks(f);
        ds::Error e = catch_error([&] { ds::validate_dltensor(&f.t, "grad"); });
        EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::strstr(e.what(), c.message_part), nullptr) << e.what();
        // from_dltensor validates the same way.
        EXPECT_EQ(catch_error([&] { ds::from_dltensor(&f.t, "grad", false); }).status(),
                  DS_ERR_INVALID_ARGUMENT);
    }
}

TEST(CoreDLPack, EdgeCasesThatAreValid) {
    // 0-d scalar: shape may be NULL.
    float one = 1.5f;
    DLTensor s{};
    s.data = &one;
    s.device = DLDevice{kDLCPU, 0};
    s.ndim = 0;
    s.dtype = DLDataType{kDLFloat, 32, 1};
    Tensor ts = ds::from_dltensor(&s, "loss", true);
    EXPECT_EQ(ts.numel(), 1);
    EXPECT_EQ(ts.data<float>()[0], 1.5f);
    // Empty tensor: data may be NULL, any strides are contiguous.
    Fixture e;
    e.shape[0] = 0;
    e.t.data = nullptr;
    e.strides[0] = 1;
    e.strides[1] = 99;
    e.t.strides = e.strides;
    Tensor te = ds::from_dltensor(&e.t, "grad", true);
    EXPECT_EQ(te.numel(), 0);
    // Size-1 dims may carry any stride and still be contiguous.
    Fixture o;
    o.shape[0] = 1;
    o.shape[1] = 12;
    o.strides[0] = 12345;
    o.strides[1] = 1;
    o.t.strides = o.strides;
    EXPECT_TRUE(ds::dltensor_is_contiguous(&o.t));
    EXPECT_NO_THROW(ds::from_dltensor(&o.t, "grad", true));
    // CUDA tensors describe valid memory even in a CPU-only build.
    Fixture g;
    g.t.device = DLDevice{kDLCUDA, 1};
    Tensor tg = ds::from_dltensor(&g.t, "grad", true);
    EXPECT_EQ(tg.device(), Device::cuda(1));
    // Zero strides (broadcast) are valid input, but not contiguous.
    Fixture b;
    b.strides[0] = 0;
    b.t.strides = b.strides;
    EXPECT_NO_THROW(ds::validate_dltensor(&b.t, "grad"));
    EXPECT_FALSE(ds::dltensor_is_contiguous(&b.t));
}

TEST(CoreDLPack, RequireContiguousMessage) {
    float buf[16] = {};
    int64_t shape[2] = {4, 4};
    int64_t strides[2] = {1, 4};
    DLTensor t{};
    t.data = buf;
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 2;
    t.dtype = DLDataType{kDLFloat, 32, 1};
    t.shape = shape;
    t.strides = strides;
    ds::Error e = catch_error([&] { ds::from_dltensor(&t, "grad", true); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(e.what(), "grad.strides = [1, 4]: expected contiguous (row-major) strides [4, 1]");
    Tensor v = ds::from_dltensor(&t, "grad", false);  // allowed when not required
    EXPECT_FALSE(v.is_contiguous());
    EXPECT_EQ(v.strides(), (std::vector<int64_t>{1, 4}));
}

TEST(CoreDLPack, UnalignedDataAndOddByteOffset) {
    // Six fp32 values 0.5*i stored one byte past an aligned address.
    alignas(64) unsigned char buf[64] = {};
    for (int i = 0; i < 6; ++i) {
        float v = 0.5f * float(i);
        std::memcpy(buf + 1 + 4 * i, &v, 4);
    }
    int64_t shape[2] = {2, 3};
    DLTensor by_offset{};
    by_offset.data = buf;
    by_offset.byte_offset = 1;
    by_offset.device = DLDevice{kDLCPU, 0};
    by_offset.ndim = 2;
    by_offset.dtype = DLDataType{kDLFloat, 32, 1};
    by_offset.shape = shape;
    DLTensor by_pointer = by_offset;
    by_pointer.data = buf + 1;
    by_pointer.byte_offset = 0;
    Allocator a;
    for (const DLTensor* t : {&by_offset, &by_pointer}) {
        Tensor src = ds::from_dltensor(t, "param", true);
        EXPECT_EQ(src.data_ptr(), buf + 1);
        Tensor f = src.to(DType::F32, a, MemCategory::Params);
        Tensor b = src.to(DType::BF16, a, MemCategory::Params);
        for (int i = 0; i < 6; ++i) {
            EXPECT_EQ(f.data<float>()[i], 0.5f * float(i));
            uint32_t bits = uint32_t(b.data<uint16_t>()[i]) << 16;
            float back;
            std::memcpy(&back, &bits, 4);
            EXPECT_EQ(back, 0.5f * float(i));  // exact in bf16
        }
    }
}

TEST(CoreDLPack, ExpectHelpersNameBothValues) {
    Fixture f;
    EXPECT_NO_THROW(ds::expect_shape(&f.t, {3, 4}, "grad"));
    ds::Error s = catch_error([&] { ds::expect_shape(&f.t, {4, 3}, "grad"); });
    EXPECT_EQ(s.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(s.what(), "grad.shape = [3, 4]: expected [4, 3]");
    ds::Error s2 = catch_error([&] { ds::expect_shape(&f.t, {12}, "grad"); });
    EXPECT_STREQ(s2.what(), "grad.shape = [3, 4]: expected [12]");

    EXPECT_NO_THROW(ds::expect_dtype(&f.t, DType::F32, "grad"));
    ds::Error d = catch_error([&] { ds::expect_dtype(&f.t, DType::BF16, "grad"); });
    EXPECT_EQ(d.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(d.what(), "grad.dtype = fp32: expected bf16");

    EXPECT_NO_THROW(ds::expect_device(&f.t, Device::cpu(), "grad"));
    ds::Error v = catch_error([&] { ds::expect_device(&f.t, Device::cuda(0), "grad"); });
    EXPECT_EQ(v.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(v.what(), "grad.device = cpu: expected cuda:0");
}

TEST(CoreDLPack, ToDLPackRoundTripAndDeleter) {
    Allocator a;
    DLManagedTensor* m = nullptr;
    {
        Tensor t = Tensor::empty({2, 3}, DType::BF16, Device::cpu(), a, MemCategory::Params);
        for (int i = 0; i < 6; ++i) t.data<uint16_t>()[i] = uint16_t(0x3F80 + i);
        m = ds::to_dlpack(t);
    }
    // The export keeps the storage alive after the Tensor is gone.
    EXPECT_EQ(a.bytes(MemCategory::Params), 12);
    ASSERT_NE(m, nullptr);
    ASSERT_NE(m->deleter, nullptr);
    const DLTensor& d = m->dl_tensor;
    EXPECT_EQ(d.ndim, 2);
    EXPECT_EQ(d.shape[0], 2);
    EXPECT_EQ(d.shape[1], 3);
    ASSERT_NE(d.strides, nullptr);
    EXPECT_EQ(d.strides[0], 3);
    EXPECT_EQ(d.strides[1], 1);
    EXPECT_EQ(d.dtype.code, kDLBfloat);
    EXPECT_EQ(d.dtype.bits, 16);
    EXPECT_EQ(d.dtype.lanes, 1);
    EXPECT_EQ(d.device.device_type, kDLCPU);
    EXPECT_EQ(d.byte_offset, 0u);
    Tensor back = ds::from_dltensor(&m->dl_tensor, "exported", true);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(back.data<uint16_t>()[i], 0x3F80 + i);
    m->deleter(m);
    EXPECT_EQ(a.total(), 0);
    EXPECT_EQ(a.live_allocations(), 0);

    // Scalars and views export too; borrowed memory does not.
    Tensor s = Tensor::zeros({}, DType::I64, Device::cpu(), a, MemCategory::Buffers);
    DLManagedTensor* ms = ds::to_dlpack(s);
    EXPECT_EQ(ms->dl_tensor.ndim, 0);
    ms->deleter(ms);
    Tensor flat = Tensor::zeros({8}, DType::F32, Device::cpu(), a, MemCategory::Buffers);
    DLManagedTensor* mv = ds::to_dlpack(flat.view({2, 2}, 4));
    EXPECT_EQ(mv->dl_tensor.data, flat.data<float>() + 4);
    mv->deleter(mv);
    float x[2] = {};
    Tensor borrowed = Tensor::borrow(x, {2}, {}, DType::F32, Device::cpu());
    EXPECT_EQ(catch_error([&] { ds::to_dlpack(borrowed); }).status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(catch_error([&] { ds::to_dlpack(Tensor()); }).status(), DS_ERR_INVALID_ARGUMENT);
}

TEST(CoreDLPack, FillViewPointsIntoTheTensor) {
    Allocator a;
    Tensor t = Tensor::zeros({5, 2}, DType::F16, Device::cpu(), a, MemCategory::Params);
    DLTensor v;
    ds::fill_view(t, &v);
    EXPECT_EQ(v.data, t.data_ptr());
    EXPECT_EQ(v.shape, t.shape().data());
    EXPECT_EQ(v.strides, t.strides().data());
    EXPECT_EQ(v.ndim, 2);
    EXPECT_EQ(v.dtype.code, kDLFloat);
    EXPECT_EQ(v.dtype.bits, 16);
    EXPECT_EQ(v.byte_offset, 0u);
    EXPECT_NO_THROW(ds::validate_dltensor(&v, "view"));
    EXPECT_EQ(catch_error([&] { ds::fill_view(t, nullptr); }).status(), DS_ERR_INVALID_ARGUMENT);
}

}  // namespace

// Found by fuzz.dltensor_mutate under UBSan: an empty tensor whose other dims
// multiply past int64, and an empty tensor with a byte_offset that would
// carry data + byte_offset out of the address space (it is never read, so
// it is accepted, and the offset is not applied).
TEST(CoreDLPack, EmptyTensorWithHugeDimsAndOffsetHasNoOverflow) {
    float x = 0.0f;
    int64_t shape[3] = {int64_t(1) << 46, int64_t(1) << 61, 0};
    DLTensor t{};
    t.data = &x;
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 3;
    t.dtype = DLDataType{kDLFloat, 32, 1};
    t.shape = shape;
    t.byte_offset = UINT64_C(0x8000000000000000);
    EXPECT_EQ(ds::dltensor_numel(&t), 0);
    Tensor v = ds::from_dltensor(&t, "empty", false);
    EXPECT_EQ(v.numel(), 0);
    EXPECT_EQ(ds::dltensor_data(&t), static_cast<void*>(&x));
}
