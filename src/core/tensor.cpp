#include "core/tensor.h"

#include <algorithm>
#include <cstring>

#include "core/device_memory.h"
#include "core/error.h"
#include "core/kernel_backend.h"


namespace ds {

// ---- shape helpers --------------------------------------------------------

std::string shape_to_string(const Shape& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

int64_t checked_numel(const Shape& shape, const char* what) {
    if (!what) what = "tensor";
    int64_t n = 1;
    for (size_t i = 0; i < shape.size(); ++i)
        DS_CHECK(shape[i] >= 0, DS_ERR_INVALID_ARGUMENT, "%s.shape[%zu] = %lld is negative", what, i,
                 static_cast<long long>(shape[i]));
    for (size_t i = 0; i < shape.size(); ++i) {
        if (__builtin_mul_overflow(n, shape[i], &n)) {
            // A zero dim anywhere makes the product 0, not an overflow.
            if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
            fail(DS_ERR_INVALID_ARGUMENT, "%s.shape = %s: element count overflows int64", what,
                 shape_to_string(shape).c_str());
        }
    }
    return n;
}

Shape contiguous_strides(const Shape& shape) {
    Shape strides(shape.size());
    int64_t s = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        strides[i] = s;
        // Only a tensor with a zero dim (no elements) can overflow here, e.g.
        // [0, 2^62, 4]: its strides address nothing, so saturate instead of
        // overflowing (signed overflow is undefined behaviour).
        if (__builtin_mul_overflow(s, std::max<int64_t>(shape[i], 1), &s)) s = INT64_MAX;
    }
    return strides;
}

bool strides_are_contiguous(const Shape& shape, const Shape& strides) {
    if (strides.empty()) return true;
    if (strides.size() != shape.size()) return false;
    for (int64_t d : shape)
        if (d == 0) return true;
    int64_t expected = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        if (shape[i] == 1) continue;
        if (strides[i] != expected) return false;
        expected *= shape[i];
    }
    return true;
}

namespace detail {
void dtype_mismatch(DType have, const char* want) {
    fail(DS_ERR_INTERNAL, "tensor of dtype %s read as %s", dtype_name(have), want);
}
}  // namespace detail

// ---- element copies on the host ------------------------------------------

namespace {

constexpr size_t kChunk = 1024;  // elements staged at a time (8 KiB at int64)

bool is_aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

// Converts n contiguous elements src (sd) -> dst (dd). Unaligned pointers go
// through aligned stack buffers, so the kernels only see aligned data.
void convert_contiguous(const void* src, DType sd, void* dst, DType dd, size_t n) {
    const size_t ss = dtype_size(sd), dsz = dtype_size(dd);
    if (sd == dd) {
        std::memmove(dst, src, n * ss);
        return;
    }
    const int sk = dtype_to_kernel(sd), dk = dtype_to_kernel(dd);
    if (is_aligned(src, ss) && is_aligned(dst, dsz)) {
        cpu_kernels().convert(src, sk, dst, dk, n);
        return;
    }
    alignas(64) unsigned char a[kChunk * 4];
    alignas(64) unsigned char b[kChunk * 4];
    const auto* s = static_cast<const unsigned char*>(src);
    auto* d = static_cast<unsigned char*>(dst);
    for (size_t i = 0; i < n; i += kChunk) {
        const size_t m = std::min(kChunk, n - i);
        std::memcpy(a, s + i * ss, m * ss);
        cpu_kernels().convert(a, sk, b, dk, m);
        std::memcpy(d + i * dsz, b, m * dsz);
    }
}

// Walks a shape in row-major order, tracking the element offset of the
// current index under two sets of strides.
class IndexWalker {
public:
    IndexWalker(const Shape& shape, const Shape& a, const Shape& b)
        : shape_(shape), a_(a), b_(b), idx_(shape.size(), 0) {}
    int64_t a() const { return off_a_; }
    int64_t b() const { return off_b_; }
    void next() {
        for (size_t d = shape_.size(); d-- > 0;) {
            off_a_ += a_[d];
            off_b_ += b_[d];
            if (++idx_[d] < shape_[d]) return;
            off_a_ -= a_[d] * shape_[d];
            off_b_ -= b_[d] * shape_[d];
            idx_[d] = 0;
        }
    }

private:
    const Shape& shape_;
    const Shape& a_;
    const Shape& b_;
    std::vector<int64_t> idx_;
    int64_t off_a_ = 0, off_b_ = 0;
};

// Element-by-element copy with conversion between any strides (host only).
void copy_strided_host(const Tensor& dst, const Tensor& src) {
    const DType sd = src.dtype(), dd = dst.dtype();
    const size_t ss = dtype_size(sd), dsz = dtype_size(dd);
    const auto* s = static_cast<const unsigned char*>(src.data_ptr());
    auto* d = static_cast<unsigned char*>(dst.data_ptr());
    alignas(64) unsigned char a[kChunk * 8];
    alignas(64) unsigned char b[kChunk * 8];
    int64_t dst_offsets[kChunk];
    IndexWalker walk(dst.shape(), src.strides(), dst.strides());
    const size_t n = static_cast<size_t>(dst.numel());
    for (size_t i = 0; i < n; i += kChunk) {
        const size_t m = std::min(kChunk, n - i);
        for (size_t j = 0; j < m; ++j, walk.next()) {
            std::memcpy(a + j * ss, s + walk.a() * static_cast<int64_t>(ss), ss);
            dst_offsets[j] = walk.b();
        }
        const unsigned char* out = a;
        if (sd != dd) {
            cpu_kernels().convert(a, dtype_to_kernel(sd), b, dtype_to_kernel(dd), m);
            out = b;
        }
        for (size_t j = 0; j < m; ++j)
            std::memcpy(d + dst_offsets[j] * static_cast<int64_t>(dsz), out + j * dsz, dsz);
    }
}

}  // namespace

// ---- Tensor ---------------------------------------------------------------

namespace {

// The byte size of `shape` in `dtype`, checked for overflow.
size_t checked_bytes(const Shape& shape, DType dtype) {
    const int64_t numel = checked_numel(shape, "tensor");
    size_t bytes = 0;
    DS_CHECK(!__builtin_mul_overflow(static_cast<size_t>(numel), dtype_size(dtype), &bytes),
             DS_ERR_INVALID_ARGUMENT, "shape %s of %s: byte size overflows",
             shape_to_string(shape).c_str(), dtype_name(dtype));
    return bytes;
}

}  // namespace

// A contiguous tensor over `storage` (bytes for `shape` in `dtype`).
Tensor Tensor::over_block(std::shared_ptr<void> storage, const Shape& shape, DType dtype, Device device) {
    Tensor t;
    t.numel_ = checked_numel(shape, "tensor");
    t.storage_ = std::move(storage);
    t.data_ = t.storage_.get();
    t.defined_ = true;
    t.dtype_ = dtype;
    t.device_ = device;
    t.shape_ = shape;
    t.strides_ = contiguous_strides(shape);
    return t;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, Allocator& alloc,
                     MemCategory category) {
    return over_block(alloc.allocate_block(checked_bytes(shape, dtype), device, category), shape, dtype, device);
}

Tensor Tensor::empty_pinned(const Shape& shape, DType dtype, Allocator& alloc, MemCategory category) {
    return over_block(alloc.allocate_pinned_block(checked_bytes(shape, dtype), category), shape, dtype,
                      Device::cpu());
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device, Allocator& alloc,
                     MemCategory category) {
    Tensor t = empty(shape, dtype, device, alloc, category);
    t.zero();
    return t;
}

Tensor Tensor::borrow(void* data, const Shape& shape, const Shape& strides, DType dtype,
                      Device device) {
    Tensor t;
    t.numel_ = checked_numel(shape, "tensor");
    DS_CHECK(data != nullptr || t.numel_ == 0, DS_ERR_INVALID_ARGUMENT,
             "tensor.data is NULL but shape %s has %lld elements", shape_to_string(shape).c_str(),
             static_cast<long long>(t.numel_));
    if (!strides.empty()) {
        DS_CHECK(strides.size() == shape.size(), DS_ERR_INVALID_ARGUMENT,
                 "tensor.strides has %zu entries for %zu dims", strides.size(), shape.size());
        for (size_t i = 0; i < strides.size(); ++i)
            DS_CHECK(strides[i] >= 0, DS_ERR_INVALID_ARGUMENT,
                     "tensor.strides[%zu] = %lld is negative", i, static_cast<long long>(strides[i]));
    }
    t.data_ = data;
    t.defined_ = true;
    t.dtype_ = dtype;
    t.device_ = device;
    t.shape_ = shape;
    t.strides_ = strides.empty() ? contiguous_strides(shape) : strides;
    return t;
}

void Tensor::require_defined(const char* op) const {
    DS_CHECK(defined_, DS_ERR_INTERNAL, "Tensor::%s on an undefined tensor", op);
}

Tensor Tensor::view(const Shape& shape, int64_t offset) const {
    require_defined("view");
    DS_CHECK(is_contiguous(), DS_ERR_INVALID_ARGUMENT,
             "view of a non-contiguous tensor (shape %s, strides %s)", shape_to_string(shape_).c_str(),
             shape_to_string(strides_).c_str());
    const int64_t n = checked_numel(shape, "view");
    DS_CHECK(offset >= 0 && offset <= numel_ && n <= numel_ - offset, DS_ERR_INVALID_ARGUMENT,
             "view %s at element offset %lld exceeds a tensor of %lld elements",
             shape_to_string(shape).c_str(), static_cast<long long>(offset),
             static_cast<long long>(numel_));
    Tensor t = *this;
    t.shape_ = shape;
    t.strides_ = contiguous_strides(shape);
    t.numel_ = n;
    if (data_) t.data_ = static_cast<unsigned char*>(data_) + offset * static_cast<int64_t>(element_size());
    return t;
}

void Tensor::copy_from(const Tensor& src) {
    require_defined("copy_from");
    src.require_defined("copy_from");
    DS_CHECK(src.shape_ == shape_, DS_ERR_INVALID_ARGUMENT,
             "copy_from: source shape %s does not match destination shape %s",
             shape_to_string(src.shape_).c_str(), shape_to_string(shape_).c_str());
    const bool convert = src.dtype_ != dtype_;
    DS_CHECK(!convert || (dtype_is_float(src.dtype_) && dtype_is_float(dtype_)), DS_ERR_UNSUPPORTED,
             "copy_from: converting %s to %s is not supported (only among fp32, fp16, bf16)",
             dtype_name(src.dtype_), dtype_name(dtype_));
    if (numel_ == 0) return;
    if (!convert && src.data_ == data_ && src.strides_ == strides_ && src.device_ == device_) return;

    if (device_.is_cpu() && src.device_.is_cpu()) {
        if (is_contiguous() && src.is_contiguous())
            convert_contiguous(src.data_, src.dtype_, data_, dtype_, static_cast<size_t>(numel_));
        else
            copy_strided_host(*this, src);
        return;
    }
    DS_CHECK(device_memory::available(), DS_ERR_UNSUPPORTED, "copy_from between %s and %s: this build has no CUDA",
             src.device_.str().c_str(), device_.str().c_str());
    DS_CHECK(!convert, DS_ERR_UNSUPPORTED,
             "copy_from: converting %s to %s between %s and %s is not supported (convert on the host)",
             dtype_name(src.dtype_), dtype_name(dtype_), src.device_.str().c_str(),
             device_.str().c_str());
    DS_CHECK(is_contiguous() && src.is_contiguous(), DS_ERR_UNSUPPORTED,
             "copy_from: strided copies involving %s are not supported",
             (device_.is_cuda() ? device_ : src.device_).str().c_str());
    // The copy goes to the current device's legacy stream: make it the tensor's device, so it is
    // ordered with the kernels that device's stream runs (the caller's device is restored).
    const device_memory::DeviceScope scope((device_.is_cuda() ? device_ : src.device_).index);
    device_memory::copy(data_, src.data_, nbytes(), "cudaMemcpy (copy_from)");
}

void Tensor::zero() {
    require_defined("zero");
    if (numel_ == 0) return;
    const bool contiguous = is_contiguous();
    if (device_.is_cpu()) {
        if (contiguous) {
            std::memset(data_, 0, nbytes());
            return;
        }
        const size_t es = element_size();
        auto* d = static_cast<unsigned char*>(data_);
        IndexWalker walk(shape_, strides_, strides_);
        for (int64_t i = 0; i < numel_; ++i, walk.next())
            std::memset(d + walk.a() * static_cast<int64_t>(es), 0, es);
        return;
    }
    DS_CHECK(device_memory::available(), DS_ERR_UNSUPPORTED, "zero() on %s: this build has no CUDA",
             device_.str().c_str());
    DS_CHECK(contiguous, DS_ERR_UNSUPPORTED, "zero() of a strided tensor on %s is not supported",
             device_.str().c_str());
    const device_memory::DeviceScope scope(device_.index);  // cudaMemset runs on the current device's stream
    device_memory::zero(data_, nbytes(), "cudaMemset (zero)");
}

Tensor Tensor::to(DType dtype, Allocator& alloc, MemCategory category) const {
    require_defined("to");
    // Refuse unsupported conversions before allocating anything.
    DS_CHECK(dtype == dtype_ || (dtype_is_float(dtype) && dtype_is_float(dtype_)), DS_ERR_UNSUPPORTED,
             "to(): converting %s to %s is not supported (only among fp32, fp16, bf16)",
             dtype_name(dtype_), dtype_name(dtype));
    Tensor out = empty(shape_, dtype, device_, alloc, category);
    out.copy_from(*this);
    return out;
}

}  // namespace ds
