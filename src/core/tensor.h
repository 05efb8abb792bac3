// Tensor: the library's own n-d array. It either owns shared storage (from an
// Allocator, freed with accounting when the last Tensor referring to it
// goes) or borrows memory it must not outlive (a caller's DLTensor).
// Strides are in elements, row-major when contiguous. Data pointers may be
// unaligned (DLPack inputs); code reading elements must not assume alignment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/dtype.h"

namespace ds {

using Shape = std::vector<int64_t>;

// "[2, 3]" ("[]" for a scalar).
std::string shape_to_string(const Shape& shape);
// Product of the dims; a negative dim or int64 overflow throws
// DS_ERR_INVALID_ARGUMENT naming `what` ("grad.shape[1] = -3 is negative").
int64_t checked_numel(const Shape& shape, const char* what);
// Row-major strides for `shape`.
Shape contiguous_strides(const Shape& shape);
// True when `strides` address `shape` row-major. Dims of size 1 may have any
// stride, and a tensor with no elements is always contiguous.
bool strides_are_contiguous(const Shape& shape, const Shape& strides);

class Tensor {
public:
    // An undefined tensor (defined() is false).
    Tensor() = default;

    // Uninitialised contiguous tensor from `alloc`, accounted under `category`.
    // A tensor with no elements allocates nothing (data() is nullptr).
    static Tensor empty(const Shape& shape, DType dtype, Device device, Allocator& alloc,
                        MemCategory category);
    // As empty() on the host, in page-locked memory (Allocator::allocate_pinned_block).
    static Tensor empty_pinned(const Shape& shape, DType dtype, Allocator& alloc, MemCategory category);
    // As empty(), filled with zero bytes (0 in every dtype).
    static Tensor zeros(const Shape& shape, DType dtype, Device device, Allocator& alloc,
                        MemCategory category);
    // A view of memory the caller owns and keeps alive. Empty `strides` means
    // contiguous; otherwise one non-negative stride (in elements) per dim.
    static Tensor borrow(void* data, const Shape& shape, const Shape& strides, DType dtype,
                         Device device);

    bool defined() const { return defined_; }
    DType dtype() const { return dtype_; }
    Device device() const { return device_; }
    const Shape& shape() const { return shape_; }
    const Shape& strides() const { return strides_; }  // always one per dim
    int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
    int64_t numel() const { return numel_; }
    // numel() * element size: the bytes of the elements, not of the storage.
    size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
    size_t element_size() const { return dtype_size(dtype_); }
    bool is_contiguous() const { return strides_are_contiguous(shape_, strides_); }
    // True when this tensor keeps its memory alive (not borrowed).
    bool owns_storage() const { return storage_ != nullptr; }

    // First element (byte offsets already applied); possibly unaligned.
    void* data_ptr() const { return data_; }
    // Typed pointer; T must match the dtype (uint16_t for fp16 and bf16),
    // else DS_ERR_INTERNAL.
    template <typename T>
    T* data() const;

    // A contiguous view of `shape` starting `offset` elements into this
    // (contiguous) tensor, sharing its storage. Out of range:
    // DS_ERR_INVALID_ARGUMENT.
    Tensor view(const Shape& shape, int64_t offset = 0) const;

    // Copies src into this tensor (same shape). dtypes must match, except
    // that fp32/fp16/bf16 convert among each other (round to nearest even).
    // On the CPU either side may be strided or unaligned. CUDA tensors: same
    // dtype, both contiguous (cudaMemcpy); anything else DS_ERR_UNSUPPORTED.
    // src and this must not overlap unless they are the same view.
    void copy_from(const Tensor& src);
    // Sets every element to zero.
    void zero();
    // A new contiguous tensor of `dtype` on the same device holding this
    // tensor's values (always a copy, even when the dtype is unchanged).
    Tensor to(DType dtype, Allocator& alloc, MemCategory category) const;

private:
    void require_defined(const char* op) const;
    static Tensor over_block(std::shared_ptr<void> storage, const Shape& shape, DType dtype, Device device);

    bool defined_ = false;
    DType dtype_ = DType::F32;
    Device device_;
    Shape shape_;
    Shape strides_;
    int64_t numel_ = 0;
    void* data_ = nullptr;
    std::shared_ptr<void> storage_;  // null when borrowed or empty
};

namespace detail {
// Which dtypes a C++ element type may view (data<T>()).
template <typename T> struct DTypeMatch;
template <> struct DTypeMatch<uint16_t> {
    static constexpr const char* name = "uint16_t";
    static bool ok(DType d) { return d == DType::F16 || d == DType::BF16; }
};
// Element types with exactly one DType.
#define DS_DTYPE_MATCH_ONE(T, D)                                     \
    template <> struct DTypeMatch<T> {                               \
        static constexpr const char* name = #T;                      \
        static bool ok(DType d) { return d == DType::D; }            \
    };
DS_DTYPE_MATCH_ONE(float, F32)
DS_DTYPE_MATCH_ONE(int8_t, I8)
DS_DTYPE_MATCH_ONE(uint8_t, U8)
DS_DTYPE_MATCH_ONE(int32_t, I32)
DS_DTYPE_MATCH_ONE(int64_t, I64)
#undef DS_DTYPE_MATCH_ONE
template <> struct DTypeMatch<void> {
    static constexpr const char* name = "void";
    static bool ok(DType) { return true; }
};
[[noreturn]] void dtype_mismatch(DType have, const char* want);
}  // namespace detail

template <typename T>
T* Tensor::data() const {
    using Base = typename std::remove_cv<T>::type;
    if (!detail::DTypeMatch<Base>::ok(dtype_)) detail::dtype_mismatch(dtype_, detail::DTypeMatch<Base>::name);
    return static_cast<T*>(data_);
}

}  // namespace ds
