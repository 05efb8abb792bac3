# Communicators (ds_comm_*): the group of ranks an engine trains with.

const _BACKENDS = Dict(:auto => L.DS_COMM_BACKEND_AUTO, :local => L.DS_COMM_BACKEND_LOCAL,
                       :mpi => L.DS_COMM_BACKEND_MPI, :nccl => L.DS_COMM_BACKEND_NCCL)

"""
    Comm(; backend=:auto, timeout_ms=nothing, debug=nothing)

The world this process was started in (`ds_comm_create_world`): MPI_COMM_WORLD under
mpirun/srun, else a world of one. `backend` is `:auto`, `:local`, `:mpi` or `:nccl`.
Pass it to `Engine(config; comm=c)`; the engine keeps its own reference, so `close(c)`
may come first. `finalize!(c)` is the collective teardown.
"""
mutable struct Comm
    handle::Ptr{L.ds_comm_t}
    function Comm(; backend::Symbol = :auto, timeout_ms = nothing, debug = nothing)
        haskey(_BACKENDS, backend) ||
            throw(ArgumentError("backend = :$backend; expected one of $(sort!(collect(keys(_BACKENDS))))"))
        o = Ref{L.ds_comm_options_t}()
        L.ds_comm_options_init(o, sizeof(L.ds_comm_options_t))
        d = o[]
        o[] = L.ds_comm_options_t(d.struct_size,
                                  timeout_ms === nothing ? d.timeout_ms : Int32(timeout_ms),
                                  debug === nothing ? d.debug : Int32(debug ? 1 : 0),
                                  _BACKENDS[backend], d.device)
        out = Ref{Ptr{L.ds_comm_t}}(C_NULL)
        check(L.ds_comm_create_world(o, out))
        return _owned(new(out[]))
    end
    # A handle the library made (split, Topology's comm/group_comm); owned from here on.
    Comm(handle::Ptr{L.ds_comm_t}) = _owned(new(handle))
end

"""Release the handle (`ds_comm_destroy`); idempotent. The pointer is nulled, so a later
call fails with DS_ERR_INVALID_HANDLE instead of reaching a reused address."""
Base.close(c::Comm) = _close_handle!(c, L.ds_comm_destroy)

rank(c::Comm) = _handle_int(L.ds_comm_rank, c)
world_size(c::Comm) = _handle_int(L.ds_comm_size, c)
backend(c::Comm) = (b = _handle_int(L.ds_comm_backend, c); only(k for (k, v) in _BACKENDS if v == b))

"""Collective teardown (`ds_comm_finalize`); the handle must still be closed."""
finalize!(c::Comm) = (check(L.ds_comm_finalize(c.handle)); nothing)

"""Break the communicator (`ds_comm_abort`): collectives in flight and later fail. Any thread."""
abort!(c::Comm, reason::AbstractString = "aborted from Julia") =
    (check(L.ds_comm_abort(c.handle, cstr(reason, "reason"))); nothing)

"""
    split(c, color, key=0)

`MPI_Comm_split` (`ds_comm_split`), collective over `c`: ranks with the same `color >= 0`
form a new communicator ranked by `key`; a negative color joins none and gives `nothing`.
"""
function Base.split(c::Comm, color::Integer, key::Integer = 0)
    out = Ref{Ptr{L.ds_comm_t}}(C_NULL)
    check(L.ds_comm_split(c.handle, Int32(color), Int32(key), out))
    return out[] == C_NULL ? nothing : Comm(out[])
end
