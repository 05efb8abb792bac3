# The shape every handle-owning wrapper shares (Comm, Model, Engine, Topology,
# PipeSchedule): a mutable struct whose `handle` field holds the library's pointer,
# closed by the finalizer or by `close`, and getters that read one integer through an
# out-parameter.

"""Register `close` as `x`'s finalizer and return `x`. Safe for every wrapper: the
library's destroy functions are local and never wait."""
function _owned(x)
    finalizer(close, x)
    return x
end

"""The body of `close(x)`: null `x.handle` first (a later call then fails with
DS_ERR_INVALID_HANDLE instead of reaching a reused address), then `destroy` the old
pointer unless it was already closed. Idempotent."""
function _close_handle!(x, destroy)
    h = x.handle
    x.handle = C_NULL
    h == C_NULL || destroy(h)
    return nothing
end

"""`f(x.handle, args..., out)` with an `out_type` out-parameter, the status checked
(a DeepSpeedError otherwise): the value as `Int`."""
function _handle_int(f, x, args...; out_type::Type = Int32)
    out = Ref{out_type}(0)
    check(f(x.handle, args..., out))
    return Int(out[])
end
