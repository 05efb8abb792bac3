# Log callbacks: a Julia function (level::Int, message::String) -> anything,
# called through one @cfunction trampoline whose user_data is the LogSink.
# The header's rules: the callback must return normally (an exception must not
# unwind into C, so the trampoline catches it and keeps it in the sink) and
# must not call back into the engine that logs. It runs on the thread inside
# the ds_* call, or on a communicator's watchdog thread: Julia before 1.9
# cannot run a @cfunction on a thread it did not start, so use Julia >= 1.9
# with a callback on multi-rank runs.

"""Keeps a log function and the first exception it threw; its address is the C user_data."""
mutable struct LogSink
    fn::Any
    error::Any
end

const _LOG_TRAMPOLINE = Ref{Ptr{Cvoid}}(C_NULL)
const _GLOBAL_SINK = Ref{Any}(nothing)  # keeps the library-wide sink alive

function _log_trampoline(level::Int32, message::Ptr{Cchar}, user::Ptr{Cvoid})::Cvoid
    sink = unsafe_pointer_to_objref(user)::LogSink
    try
        sink.fn(Int(level), unsafe_string(message))
    catch err
        sink.error === nothing && (sink.error = err)
    end
    return nothing
end

# A C function pointer is only valid in the session that made it: made at load time.
_init_log_trampoline() =
    (_LOG_TRAMPOLINE[] = @cfunction(_log_trampoline, Cvoid, (Int32, Ptr{Cchar}, Ptr{Cvoid})))

"""Throw (once) what a log callback threw during the last calls."""
function rethrow_log_error(sink)
    sink === nothing && return nothing
    err = sink.error
    err === nothing && return nothing
    sink.error = nothing
    throw(err)
end

"""
    set_log_callback(fn)
    set_log_callback(nothing)

The library-wide log sink (`ds_set_log_callback`): every message no engine's own
`log` callback takes (communicators, checkpoint cleanup, engines created without
one) goes to `fn(level::Int, message::String)`; `nothing` restores stderr.
Levels: `LibDeepSpeedC.DS_LOG_ERROR` (1) to `DS_LOG_DEBUG` (4).
"""
function set_log_callback(fn)
    if fn === nothing
        L.ds_set_log_callback(C_NULL, C_NULL)
        _GLOBAL_SINK[] = nothing
        return nothing
    end
    sink = LogSink(fn, nothing)
    L.ds_set_log_callback(_LOG_TRAMPOLINE[], pointer_from_objref(sink))
    # After the call no new message reaches the old sink, so it may be dropped now.
    _GLOBAL_SINK[] = sink
    return nothing
end
