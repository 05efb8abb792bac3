# Julia arrays <-> DLTensor.
#
# In: a strided Julia array of size (d1, ..., dk) is passed as the tensor of
# logical shape (d1, ..., dk) with the array's own strides in elements (for an
# Array: (1, d1, d1*d2, ...), column-major), pointing at the array's memory: no
# copy. The header accepts strides for parameters' initial values
# (ds_engine_add_param), gradients (ds_engine_accumulate_grad) and the model's
# inputs and outputs (ds_forward, ds_backward). The functions whose header text
# asks for contiguous (row-major) tensors (ds_engine_get/set_full_*, ds_convert)
# get a row-major buffer: the array with its dimensions reversed (a copy).
#
# Out: engine-owned views are row-major: the memory of a row-major (d1, ..., dk)
# tensor is the column-major array of size (dk, ..., d1), so the view is that
# array with its dimensions permuted back (PermutedDimsArray, no copy).

"""bfloat16 as stored by the library (the upper 16 bits of a Float32). `Float32(x)` converts."""
primitive type BFloat16 16 end
Base.Float32(x::BFloat16) = reinterpret(Float32, UInt32(reinterpret(UInt16, x)) << 16)
Base.convert(::Type{Float32}, x::BFloat16) = Float32(x)
Base.show(io::IO, x::BFloat16) = print(io, "BFloat16(", Float32(x), ")")

dltype(::Type{Float32}) = L.DLDataType(L.kDLFloat, 32, 1)
dltype(::Type{Float16}) = L.DLDataType(L.kDLFloat, 16, 1)
dltype(::Type{BFloat16}) = L.DLDataType(L.kDLBfloat, 16, 1)
dltype(::Type{Int32}) = L.DLDataType(L.kDLInt, 32, 1)
dltype(::Type{Int64}) = L.DLDataType(L.kDLInt, 64, 1)
dltype(::Type{T}) where {T} =
    throw(ArgumentError("element type $T has no deepspeed_c dtype (Float32, Float16, BFloat16, Int32, Int64)"))

function jltype(d::L.DLDataType)
    d.lanes == 1 || throw(ArgumentError("DLDataType with $(d.lanes) lanes is not supported"))
    d.code == L.kDLFloat && d.bits == 32 && return Float32
    d.code == L.kDLFloat && d.bits == 16 && return Float16
    d.code == L.kDLBfloat && d.bits == 16 && return BFloat16
    d.code == L.kDLInt && d.bits == 32 && return Int32
    d.code == L.kDLInt && d.bits == 64 && return Int64
    throw(ArgumentError("DLDataType(code=$(d.code), bits=$(d.bits)) has no Julia element type here"))
end

const CPU = L.DLDevice(L.kDLCPU, 0)

"""
    with_dltensor(f, A)

Call `f(ref)` with `ref::Ref{DLTensor}` describing the strided array `A` (logical
shape = size(A), strides = strides(A)) while `A`, its shape and strides are
preserved from the GC. `ref` must not escape `f`.
"""
function with_dltensor(f, A::AbstractArray{T}) where {T}
    A isa StridedArray ||
        throw(ArgumentError("a $(typeof(A)) has no strided memory to hand over; pass an Array or a strided view"))
    shape = Int64[size(A)...]
    strides = Int64[Base.strides(A)...]
    any(<(0), strides) && throw(ArgumentError("negative strides $(Tuple(strides)) are not supported"))
    dt = dltype(T)
    GC.@preserve A shape strides begin
        ref = Ref(L.DLTensor(Ptr{Cvoid}(pointer(A)), CPU, Cint(ndims(A)), dt,
                             pointer(shape), pointer(strides), UInt64(0)))
        f(ref)
    end
end

"""Two arrays' DLTensors at once (ds_forward's inputs, ds_convert)."""
function with_dltensors(f, A::AbstractArray, B::AbstractArray)
    with_dltensor(A) do ra
        with_dltensor(B) do rb
            f(ra, rb)
        end
    end
end

"""
    with_rowmajor(f, A)

As with_dltensor, for functions that need contiguous row-major input: the array
with reversed dimensions is the row-major layout of `A` (one copy for ndims >= 2).
"""
function with_rowmajor(f, A::AbstractArray{T}) where {T}
    buf = ndims(A) <= 1 ? collect(A) : permutedims(A, Tuple(ndims(A):-1:1))
    shape = Int64[size(A)...]
    GC.@preserve buf shape begin
        ref = Ref(L.DLTensor(Ptr{Cvoid}(pointer(buf)), CPU, Cint(ndims(A)), dltype(T),
                             pointer(shape), Ptr{Int64}(C_NULL), UInt64(0)))
        f(ref)
    end
end

"""An uninitialised row-major buffer for a tensor of logical `shape`, and the function
turning it into a Julia array of that shape (a copy for ndims >= 2)."""
function rowmajor_out(::Type{T}, shape::Vector{Int64}) where {T}
    buf = Array{T}(undef, reverse(shape)...)
    finish() = length(shape) <= 1 ? reshape(buf, Tuple(shape)) : permutedims(buf, Tuple(length(shape):-1:1))
    return buf, finish
end

"""The logical shape of a DLTensor the library filled in."""
function dl_shape(t::L.DLTensor)
    t.ndim == 0 && return Int64[]
    return Int64[unsafe_load(t.shape, i) for i in 1:t.ndim]
end

"""The engine-owned row-major memory of `t` as a Julia array of its logical shape (no copy)."""
function wrap_rowmajor(t::L.DLTensor)
    shape = dl_shape(t)
    if t.strides != C_NULL  # the library's views are contiguous; refuse anything else
        expect = ones(Int64, length(shape))
        for i in length(shape)-1:-1:1
            expect[i] = expect[i+1] * shape[i+1]
        end
        got = Int64[unsafe_load(t.strides, i) for i in 1:t.ndim]
        all(i -> shape[i] <= 1 || got[i] == expect[i], eachindex(shape)) ||
            throw(DeepSpeedError(L.DS_ERR_INTERNAL, "view with strides $(Tuple(got)) for shape $(Tuple(shape)): expected row-major"))
    end
    T = jltype(t.dtype)
    ptr = Ptr{T}(t.data + t.byte_offset)
    raw = unsafe_wrap(Array, ptr, Tuple(reverse(shape)); own = false)
    return length(shape) <= 1 ? reshape(raw, Tuple(shape)) : PermutedDimsArray(raw, Tuple(length(shape):-1:1))
end

"""
    convert_elements!(dst, src)

Convert `src`'s elements into `dst` (Float32, Float16, BFloat16 in any combination,
same size) with the library's SIMD casts (round to nearest even). Both arrays
must be dense (`Array`s); no engine is needed.
"""
function convert_elements!(dst::Array, src::Array)
    size(dst) == size(src) || throw(DimensionMismatch("dst has size $(size(dst)), src $(size(src))"))
    # Elementwise, so any common layout will do: both are contiguous in memory order.
    shape = Int64[length(src)]
    GC.@preserve dst src shape begin
        s = Ref(L.DLTensor(Ptr{Cvoid}(pointer(src)), CPU, Cint(1), dltype(eltype(src)), pointer(shape), Ptr{Int64}(C_NULL), UInt64(0)))
        d = Ref(L.DLTensor(Ptr{Cvoid}(pointer(dst)), CPU, Cint(1), dltype(eltype(dst)), pointer(shape), Ptr{Int64}(C_NULL), UInt64(0)))
        check(L.ds_convert(s, d))
    end
    dst
end
