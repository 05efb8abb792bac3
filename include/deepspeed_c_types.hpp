/*
 * deepspeed_c_types.hpp — the value types of the C++ wrapper (deepspeed_c.hpp
 * includes it; include that one): ds::Status and ds::Error, ds::Span and
 * ds::Dims, the element types, ds::TensorRef (a host tensor going in) and
 * ds::View<T> (engine memory coming out), ds::convert. Rules: deepspeed_c.hpp.
 */
#ifndef DEEPSPEED_C_TYPES_HPP
#define DEEPSPEED_C_TYPES_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "deepspeed_c.h"

namespace deepspeed_c {

// ---------------------------------------------------------------------------
// Status and Error
// ---------------------------------------------------------------------------

/** The C status codes. An unknown future code is kept as its number. */
enum class Status : int32_t {
    ok = DS_OK,
    invalid_argument = DS_ERR_INVALID_ARGUMENT,
    invalid_handle = DS_ERR_INVALID_HANDLE,
    invalid_state = DS_ERR_INVALID_STATE,
    invalid_config = DS_ERR_INVALID_CONFIG,
    unsupported = DS_ERR_UNSUPPORTED,
    not_found = DS_ERR_NOT_FOUND,
    out_of_memory = DS_ERR_OUT_OF_MEMORY,
    device_out_of_memory = DS_ERR_DEVICE_OUT_OF_MEMORY,
    device = DS_ERR_DEVICE,
    comm = DS_ERR_COMM,
    timeout = DS_ERR_TIMEOUT,
    io = DS_ERR_IO,
    format = DS_ERR_FORMAT,
    abi_mismatch = DS_ERR_ABI_MISMATCH,
    internal = DS_ERR_INTERNAL,
};

/** ds_status_string: "DS_ERR_INVALID_CONFIG: invalid configuration". */
inline std::string_view status_string(Status s) noexcept {
    return ds_status_string(static_cast<ds_status_t>(s));
}

/** What every failing call throws: the status and the library's message. */
class Error : public std::runtime_error {
public:
    Error(Status status, const std::string& message) : std::runtime_error(message), status_(status) {}
    Status status() const noexcept { return status_; }
    /** The raw C code (also for codes newer than this header). */
    ds_status_t code() const noexcept { return static_cast<ds_status_t>(status_); }

private:
    Status status_;
};

namespace detail {

/** Message text built by appending only (GCC 12 at -O2 in C++20 mode warns
 *  falsely, -Wrestrict, on `"literal" + std::string`, which prepends). */
inline void put(std::string& s, std::string_view v) { s.append(v.data(), v.size()); }
inline void put(std::string& s, const char* v) { s.append(v); }
template <class I, class = std::enable_if_t<std::is_integral_v<I>>>
inline void put(std::string& s, I v) { s.append(std::to_string(v)); }
template <class... A>
std::string cat(const A&... a) {
    std::string s;
    (put(s, a), ...);
    return s;
}

/** Throw the thread's last error when a C call failed. */
inline void check(ds_status_t s) {
    if (s != DS_OK) throw Error(static_cast<Status>(s), ds_last_error());
}

[[noreturn]] inline void fail(Status s, const std::string& message) { throw Error(s, message); }

/** A NUL-terminated copy of a name; a NUL inside would silently cut it short in C. */
inline std::string c_str(std::string_view s, const char* what) {
    if (s.find('\0') != std::string_view::npos)
        fail(Status::invalid_argument, cat(what, ": contains a NUL byte"));
    return std::string(s);
}

}  // namespace detail

// ---------------------------------------------------------------------------
// Span, element types, tensors
// ---------------------------------------------------------------------------

/** A minimal std::span stand-in (C++17 has none): pointer + count. */
template <class T>
class Span {
public:
    using element_type = T;
    using value_type = std::remove_cv_t<T>;
    constexpr Span() noexcept = default;
    constexpr Span(T* data, size_t size) noexcept : data_(data), size_(size) {}
    /** From any contiguous container with data() and size() (std::vector, std::array, std::string). */
    template <class C, class P = decltype(std::declval<C&>().data()),
              class = std::enable_if_t<std::is_convertible_v<P, T*>>>
    constexpr Span(C& c) noexcept : data_(c.data()), size_(c.size()) {}  // NOLINT: implicit by design
    template <class C, class P = decltype(std::declval<const C&>().data()),
              class = std::enable_if_t<std::is_convertible_v<P, T*>>, class = void>
    constexpr Span(const C& c) noexcept : data_(c.data()), size_(c.size()) {}  // NOLINT
    template <size_t N>
    constexpr Span(T (&a)[N]) noexcept : data_(a), size_(N) {}  // NOLINT

    constexpr T* data() const noexcept { return data_; }
    constexpr size_t size() const noexcept { return size_; }
    constexpr bool empty() const noexcept { return size_ == 0; }
    constexpr T& operator[](size_t i) const noexcept { return data_[i]; }
    constexpr T* begin() const noexcept { return data_; }
    constexpr T* end() const noexcept { return data_ + size_; }

private:
    T* data_ = nullptr;
    size_t size_ = 0;
};

/** A shape or strides argument, owned: from a braced list ({2, 3}), a
 *  std::vector<int64_t> or a Span (e.g. a View's shape()). */
class Dims {
public:
    Dims() = default;
    Dims(std::initializer_list<int64_t> l) : v_(l) {}
    Dims(std::vector<int64_t> v) : v_(std::move(v)) {}          // NOLINT: implicit by design
    Dims(Span<const int64_t> s) : v_(s.begin(), s.end()) {}     // NOLINT
    const std::vector<int64_t>& vec() const noexcept { return v_; }
    Span<const int64_t> span() const noexcept { return {v_.data(), v_.size()}; }
    size_t size() const noexcept { return v_.size(); }
    bool empty() const noexcept { return v_.empty(); }

private:
    std::vector<int64_t> v_;
};

/** IEEE half and bfloat16 as raw 16-bit storage (convert with ds::convert or View::to_floats). */
struct half { uint16_t bits; };
struct bfloat16 { uint16_t bits; };

/** The DLPack dtype of an element type: float, half, bfloat16, int32_t, int64_t. */
template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DLDataType value{kDLFloat, 32, 1}; };
template <> struct dtype_of<half> { static constexpr DLDataType value{kDLFloat, 16, 1}; };
template <> struct dtype_of<bfloat16> { static constexpr DLDataType value{kDLBfloat, 16, 1}; };
template <> struct dtype_of<int32_t> { static constexpr DLDataType value{kDLInt, 32, 1}; };
template <> struct dtype_of<int64_t> { static constexpr DLDataType value{kDLInt, 64, 1}; };

inline bool same_dtype(DLDataType a, DLDataType b) noexcept {
    return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

/** "fp32", "fp16", "bf16", "int32", ... for messages. */
inline std::string dtype_name(DLDataType t) {
    std::string s = t.code == kDLFloat ? "fp" : t.code == kDLBfloat ? "bf" : t.code == kDLInt ? "int"
                    : t.code == kDLUInt ? "uint" : detail::cat("code", int(t.code), "_");
    detail::put(s, int(t.bits));
    if (t.lanes != 1) s.append(detail::cat("x", int(t.lanes)));
    return s;
}

namespace detail {
template <class T> struct is_span : std::false_type {};
template <class T> struct is_span<Span<T>> : std::true_type {};
inline std::string shape_text(Span<const int64_t> shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) put(s, i ? ", " : ""), put(s, shape[i]);
    s.append("]");
    return s;
}
/** Elements a row-major or strided layout reaches: 1 + sum((n_i - 1) * stride_i); 0 if any n_i is 0. */
inline int64_t extent(Span<const int64_t> shape, Span<const int64_t> strides) {
    int64_t n = 1;
    for (int64_t d : shape) if (d == 0) return 0;
    if (strides.empty()) { for (int64_t d : shape) n *= d; return n; }
    for (size_t i = 0; i < shape.size(); ++i) n += (shape[i] - 1) * strides[i];
    return n;
}
}  // namespace detail

/**
 * A host (CPU) tensor handed to the library: borrowed data plus its own copy
 * of shape and strides (so a braced shape may be a temporary). Built from a
 * typed span; checks that the span holds the elements the shape (and
 * strides) reach. A TensorRef from a const span is read-only: passing it
 * where the library writes (forward's output, get_full_*) throws.
 */
class TensorRef {
public:
    template <class T>
    TensorRef(Span<T> data, const Dims& shape_arg, const Dims& strides_arg = {})
        : shape_(shape_arg.vec()), strides_(strides_arg.vec()), writable_(!std::is_const_v<T>) {
        const Span<const int64_t> shape = shape_arg.span(), strides = strides_arg.span();
        using E = std::remove_cv_t<T>;
        if (!strides.empty() && strides.size() != shape.size())
            detail::fail(Status::invalid_argument, detail::cat("TensorRef: strides has ", strides.size(),
                                                                   " entries, shape ", shape.size()));
        for (size_t i = 0; i < shape.size(); ++i)
            if (shape[i] < 0 || (!strides.empty() && strides[i] < 0))
                detail::fail(Status::invalid_argument, detail::cat("TensorRef: negative shape or stride in dimension ", i));
        const int64_t need = detail::extent(shape, strides);
        if (static_cast<uint64_t>(need) != data.size())
            detail::fail(Status::invalid_argument,
                         detail::cat("TensorRef: shape ", detail::shape_text(shape), " needs ", need,
                                     " elements, the data has ", data.size()));
        std::memset(&t_, 0, sizeof t_);
        t_.data = const_cast<E*>(data.data());  // the C side reads only, unless writable_
        t_.device.device_type = kDLCPU;
        t_.ndim = static_cast<int32_t>(shape_.size());
        t_.dtype = dtype_of<E>::value;
        t_.shape = shape_.empty() ? nullptr : shape_.data();
        t_.strides = strides_.empty() ? nullptr : strides_.data();
    }
    template <class C, class T = std::remove_pointer_t<decltype(std::declval<C&>().data())>,
              class = std::enable_if_t<!detail::is_span<std::remove_cv_t<C>>::value>>
    TensorRef(C& c, const Dims& shape, const Dims& strides = {})
        : TensorRef(Span<T>(c.data(), c.size()), shape, strides) {}
    TensorRef(const TensorRef& o) : shape_(o.shape_), strides_(o.strides_), writable_(o.writable_), t_(o.t_) { fix(); }
    TensorRef& operator=(const TensorRef& o) {
        shape_ = o.shape_; strides_ = o.strides_; writable_ = o.writable_; t_ = o.t_; fix();
        return *this;
    }

    const DLTensor* get() const noexcept { return &t_; }
    /** For the library to write into; throws when built from a const span. */
    DLTensor* get_mutable(const char* what) {
        if (!writable_) detail::fail(Status::invalid_argument, detail::cat(what, ": a read-only (const) tensor"));
        return &t_;
    }
    bool writable() const noexcept { return writable_; }

private:
    void fix() {
        t_.shape = shape_.empty() ? nullptr : shape_.data();
        t_.strides = strides_.empty() ? nullptr : strides_.data();
    }
    std::vector<int64_t> shape_, strides_;
    bool writable_;
    DLTensor t_;
};

/** ds_convert: elements of src into dst (fp32/fp16/bf16, same shape, contiguous). */
inline void convert(const TensorRef& src, TensorRef& dst) { detail::check(ds_convert(src.get(), dst.get_mutable("convert: dst"))); }

/**
 * A typed view of engine-owned memory (T = const E for weights, E for
 * gradients). Engine views are contiguous row-major. Lifetime: see the top
 * of this file (the C header's ds_engine_param_view rules).
 */
template <class T>
class View {
public:
    using value_type = std::remove_cv_t<T>;
    View() noexcept { std::memset(&t_, 0, sizeof t_); }
    /** Wrap a DLTensor the library filled; throws if its dtype is not T's. */
    View(const DLTensor& t, const std::string& what) : t_(t) {
        if (!same_dtype(t.dtype, dtype_of<value_type>::value))
            detail::fail(Status::invalid_argument, detail::cat(what, ": the tensor is ", dtype_name(t.dtype), ", not ",
                                                                   dtype_name(dtype_of<value_type>::value), " as asked"));
        size_ = 1;
        for (int32_t i = 0; i < t.ndim; ++i) size_ *= static_cast<size_t>(t.shape[i]);
    }
    T* data() const noexcept { return static_cast<T*>(t_.data); }
    size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    int32_t ndim() const noexcept { return t_.ndim; }
    Span<const int64_t> shape() const noexcept { return {t_.shape, static_cast<size_t>(t_.ndim)}; }
    /** Element strides (row-major when the library gave none). */
    std::vector<int64_t> strides() const {
        std::vector<int64_t> s(static_cast<size_t>(t_.ndim));
        int64_t acc = 1;
        for (int32_t i = t_.ndim - 1; i >= 0; --i) {
            s[static_cast<size_t>(i)] = t_.strides ? t_.strides[i] : acc;
            acc *= t_.shape[i];
        }
        return s;
    }
    T& operator[](size_t i) const noexcept { return data()[i]; }
    T* begin() const noexcept { return data(); }
    T* end() const noexcept { return data() + size_; }
    DLDevice device() const noexcept { return t_.device; }
    const DLTensor& dltensor() const noexcept { return t_; }
    /** The values widened to fp32 (ds_convert: the library's SIMD casts). */
    std::vector<float> to_floats() const {
        std::vector<float> out(size_);
        DLTensor src = t_, dst = t_;
        dst.data = out.data();
        dst.dtype = dtype_of<float>::value;
        dst.strides = nullptr;
        dst.byte_offset = 0;
        detail::check(ds_convert(&src, &dst));
        return out;
    }

private:
    DLTensor t_;
    size_t size_ = 0;
};

}  // namespace deepspeed_c

#endif /* DEEPSPEED_C_TYPES_HPP */
