#include "core/dlpack_interop.h"

#include <cstring>
#include <new>

#include "core/error.h"

namespace ds {

namespace {

const char* name_or_default(const char* what) { return what ? what : "tensor"; }

std::string array_to_string(const int64_t* v, int n) {
    return shape_to_string(std::vector<int64_t>(v, v + n));
}

// What the strides of a validated tensor say, as a vector (contiguous when NULL).
Shape strides_of(const DLTensor* t) {
    if (t->ndim == 0) return {};
    if (t->strides == nullptr) return contiguous_strides(Shape(t->shape, t->shape + t->ndim));
    return Shape(t->strides, t->strides + t->ndim);
}

}  // namespace

void validate_dltensor(const DLTensor* t, const char* what) {
    what = name_or_default(what);
    DS_CHECK(t != nullptr, DS_ERR_INVALID_ARGUMENT, "%s is NULL", what);
    DS_CHECK(t->ndim >= 0 && t->ndim <= kMaxTensorDims, DS_ERR_INVALID_ARGUMENT,
             "%s.ndim = %d is out of range [0, %d]", what, t->ndim, kMaxTensorDims);
    DS_CHECK(t->ndim == 0 || t->shape != nullptr, DS_ERR_INVALID_ARGUMENT,
             "%s.shape is NULL but ndim = %d", what, t->ndim);

    const int n = t->ndim;
    const Shape shape = n ? Shape(t->shape, t->shape + n) : Shape();
    const int64_t numel = checked_numel(shape, what);
    const DType dtype = dtype_from_dl(t->dtype, what);
    Device::from_dl(t->device, what);
    const int64_t esize = static_cast<int64_t>(dtype_size(dtype));
    int64_t nbytes = 0;
    DS_CHECK(!__builtin_mul_overflow(numel, esize, &nbytes), DS_ERR_INVALID_ARGUMENT,
             "%s.shape = %s: byte size overflows int64", what, shape_to_string(shape).c_str());

    // Largest element offset the strides reach (contiguous: numel - 1).
    int64_t extent = numel > 0 ? numel - 1 : 0;
    if (n > 0 && t->strides != nullptr) {
        extent = 0;
        for (int i = 0; i < n; ++i) {
            DS_CHECK(t->strides[i] >= 0, DS_ERR_INVALID_ARGUMENT,
                     "%s.strides[%d] = %lld is negative (strides = %s)", what, i,
                     static_cast<long long>(t->strides[i]), array_to_string(t->strides, n).c_str());
        }
        if (numel > 0) {
            for (int i = 0; i < n; ++i) {
                int64_t step = 0;
                DS_CHECK(!__builtin_mul_overflow(t->shape[i] - 1, t->strides[i], &step) &&
                             !__builtin_add_overflow(extent, step, &extent),
                         DS_ERR_INVALID_ARGUMENT, "%s.strides = %s: the addressed range overflows",
                         what, array_to_string(t->strides, n).c_str());
            }
        }
    }

    if (numel == 0) return;
    DS_CHECK(t->data != nullptr, DS_ERR_INVALID_ARGUMENT,
             "%s.data is NULL but shape %s has %lld elements", what, shape_to_string(shape).c_str(),
             static_cast<long long>(numel));
    // data + byte_offset + (extent + 1) * esize must stay inside the address space.
    uint64_t end = 0, span = 0;
    const bool overflow =
        __builtin_mul_overflow(static_cast<uint64_t>(extent) + 1, static_cast<uint64_t>(esize), &span) ||
        __builtin_add_overflow(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t->data)),
                               t->byte_offset, &end) ||
        __builtin_add_overflow(end, span, &end) || t->byte_offset > static_cast<uint64_t>(INT64_MAX);
    DS_CHECK(!overflow, DS_ERR_INVALID_ARGUMENT,
             "%s.byte_offset = %llu: data + byte_offset + %lld bytes overflows the address space",
             what, static_cast<unsigned long long>(t->byte_offset), static_cast<long long>(nbytes));
}

int64_t dltensor_numel(const DLTensor* t) {
    // An empty tensor may have other dims whose product overflows
    // (validate_dltensor accepts [0, 2^62, 4]): look for a zero first.
    for (int i = 0; i < t->ndim; ++i)
        if (t->shape[i] == 0) return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; ++i)
        DS_CHECK(!__builtin_mul_overflow(n, t->shape[i], &n), DS_ERR_INVALID_ARGUMENT,
                 "tensor shape %s: the element count overflows int64",
                 array_to_string(t->shape, t->ndim).c_str());
    return n;
}

void* dltensor_data(const DLTensor* t) {
    // validate_dltensor checks data + byte_offset against the address space
    // only for non-empty tensors (nothing of an empty one is read).
    if (t->data == nullptr || dltensor_numel(t) == 0) return t->data;
    return static_cast<unsigned char*>(t->data) + t->byte_offset;
}

bool dltensor_is_contiguous(const DLTensor* t) {
    if (t->ndim == 0 || t->strides == nullptr) return true;
    return strides_are_contiguous(Shape(t->shape, t->shape + t->ndim),
                                  Shape(t->strides, t->strides + t->ndim));
}

Tensor from_dltensor(const DLTensor* t, const char* what, bool require_contiguous) {
    what = name_or_default(what);
    validate_dltensor(t, what);
    const Shape shape = t->ndim ? Shape(t->shape, t->shape + t->ndim) : Shape();
    if (require_contiguous && !dltensor_is_contiguous(t))
        fail(DS_ERR_INVALID_ARGUMENT, "%s.strides = %s: expected contiguous (row-major) strides %s",
             what, array_to_string(t->strides, t->ndim).c_str(),
             shape_to_string(contiguous_strides(shape)).c_str());
    return Tensor::borrow(dltensor_data(t), shape, strides_of(t), dtype_from_dl(t->dtype, what),
                          Device::from_dl(t->device, what));
}

void expect_shape(const DLTensor* t, const std::vector<int64_t>& shape, const char* what) {
    what = name_or_default(what);
    DS_CHECK(t != nullptr, DS_ERR_INVALID_ARGUMENT, "%s is NULL", what);
    const bool same = t->ndim == static_cast<int>(shape.size()) &&
                      (shape.empty() || std::memcmp(t->shape, shape.data(),
                                                    shape.size() * sizeof(int64_t)) == 0);
    DS_CHECK(same, DS_ERR_INVALID_ARGUMENT, "%s.shape = %s: expected %s", what,
             array_to_string(t->shape, t->ndim).c_str(), shape_to_string(shape).c_str());
}

void expect_dtype(const DLTensor* t, DType dtype, const char* what) {
    what = name_or_default(what);
    DS_CHECK(t != nullptr, DS_ERR_INVALID_ARGUMENT, "%s is NULL", what);
    DType have;
    const bool known = dtype_from_dl(t->dtype, &have);
    if (known && have == dtype) return;
    if (known)
        fail(DS_ERR_INVALID_ARGUMENT, "%s.dtype = %s: expected %s", what, dtype_name(have),
             dtype_name(dtype));
    fail(DS_ERR_INVALID_ARGUMENT, "%s.dtype {code=%u, bits=%u, lanes=%u}: expected %s", what,
         unsigned(t->dtype.code), unsigned(t->dtype.bits), unsigned(t->dtype.lanes),
         dtype_name(dtype));
}

void expect_device(const DLTensor* t, Device device, const char* what) {
    what = name_or_default(what);
    DS_CHECK(t != nullptr, DS_ERR_INVALID_ARGUMENT, "%s is NULL", what);
    const Device have = Device::from_dl(t->device, what);
    DS_CHECK(have == device, DS_ERR_INVALID_ARGUMENT, "%s.device = %s: expected %s", what,
             have.str().c_str(), device.str().c_str());
}

namespace {

// Owns everything a DLManagedTensor from to_dlpack points at.
struct ExportContext {
    DLManagedTensor managed;
    Tensor tensor;  // keeps the storage alive
    Shape shape;
    Shape strides;
};

void delete_export(DLManagedTensor* self) {
    if (self) delete static_cast<ExportContext*>(self->manager_ctx);
}

}  // namespace

DLManagedTensor* to_dlpack(const Tensor& t) {
    DS_CHECK(t.defined(), DS_ERR_INVALID_ARGUMENT, "to_dlpack: the tensor is undefined");
    DS_CHECK(t.owns_storage() || t.numel() == 0, DS_ERR_INVALID_ARGUMENT,
             "to_dlpack: the tensor borrows its memory; export a copy instead");
    auto* ctx = new ExportContext();
    ctx->tensor = t;
    ctx->shape = t.shape();
    ctx->strides = t.strides();
    DLManagedTensor& m = ctx->managed;
    std::memset(&m, 0, sizeof m);
    m.dl_tensor.data = t.data_ptr();
    m.dl_tensor.device = t.device().to_dl();
    m.dl_tensor.ndim = static_cast<int>(t.dim());
    m.dl_tensor.dtype = dtype_to_dl(t.dtype());
    m.dl_tensor.shape = ctx->shape.empty() ? nullptr : ctx->shape.data();
    m.dl_tensor.strides = ctx->strides.empty() ? nullptr : ctx->strides.data();
    m.dl_tensor.byte_offset = 0;
    m.manager_ctx = ctx;
    m.deleter = delete_export;
    return &m;
}

void fill_view(const Tensor& t, DLTensor* out) {
    DS_CHECK(out != nullptr, DS_ERR_INVALID_ARGUMENT, "fill_view: out is NULL");
    DS_CHECK(t.defined(), DS_ERR_INTERNAL, "fill_view: the tensor is undefined");
    out->data = t.data_ptr();
    out->device = t.device().to_dl();
    out->ndim = static_cast<int>(t.dim());
    out->dtype = dtype_to_dl(t.dtype());
    out->shape = t.dim() ? const_cast<int64_t*>(t.shape().data()) : nullptr;
    out->strides = t.dim() ? const_cast<int64_t*>(t.strides().data()) : nullptr;
    out->byte_offset = 0;
}

}  // namespace ds
