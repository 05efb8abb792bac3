# Errors: every ds_* status other than DS_OK becomes a DeepSpeedError carrying
# the status and the library's message (ds_last_error, thread-local: it is read
# right after the call, before the task can yield and move to another thread).

"""
    DeepSpeedError(status, message)

A failed library call: `status` is the `DS_ERR_*` code (`LibDeepSpeedC.DS_ERR_INVALID_CONFIG`, ...)
and `message` names what was wrong (the key path, argument, parameter, file or rank).
"""
struct DeepSpeedError <: Exception
    status::Int32
    message::String
end

"""The library's text for a status code ("DS_ERR_INVALID_CONFIG: invalid configuration")."""
status_string(status::Integer) = unsafe_string(L.ds_status_string(Int32(status)))

function Base.showerror(io::IO, e::DeepSpeedError)
    print(io, "DeepSpeedError: ", status_string(e.status), ": ", e.message)
end

"""Throw a DeepSpeedError unless `status` is DS_OK."""
@inline function check(status::Int32)
    status == L.DS_OK && return nothing
    throw(DeepSpeedError(status, unsafe_string(L.ds_last_error())))
end

"""Julia strings cross as NUL-terminated C strings: an embedded NUL would cut them short."""
function cstr(s::AbstractString, what::AbstractString)
    str = String(s)
    occursin('\0', str) && throw(ArgumentError("$what contains a NUL character: $(repr(str))"))
    return str
end

cstr_or_null(::Nothing, what) = C_NULL
cstr_or_null(s::AbstractString, what) = cstr(s, what)
