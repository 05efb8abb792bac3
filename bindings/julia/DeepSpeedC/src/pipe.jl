# Pipeline parallelism: process topologies (ds_topology_*, DeepSpeed's ProcessTopology)
# and pipeline schedules (ds_pipe_schedule_*, DeepSpeed's TrainSchedule and friends).
# Ranks, coordinates, steps, buffers and micro-batches are 0-based, as in DeepSpeed.

"""
    Topology(axes, dims)

DeepSpeed's `ProcessTopology(axes, dims)`: named axes over the ranks of a world, the
last axis varying fastest. Also `pipe_data_topology(pp, dp)`, `pipe_model_data_topology(pp,
mp, dp)` and `default_topology(world_size)`. Queries: `world_size`, `topology_axes`,
`get_dim`, `rank_of`, `coord_of`, `axis_comm_lists`, `filter_match`, `rank_repr`;
`comm(t, axis, world)` and `group_comm(t, axes, world)` build this rank's communicator.
"""
mutable struct Topology
    handle::Ptr{L.ds_topology_t}
    Topology(handle::Ptr{L.ds_topology_t}) = _owned(new(handle))
end

_cstrs(names, what) = [cstr(n, what) for n in names]
_cptrs(strs) = Ptr{Cchar}[Ptr{Cchar}(pointer(s)) for s in strs]

function Topology(axes::AbstractVector{<:AbstractString}, dims::AbstractVector{<:Integer})
    length(axes) == length(dims) || throw(ArgumentError("Topology: $(length(axes)) axes but $(length(dims)) dims"))
    strs = _cstrs(axes, "axes")
    ptrs = _cptrs(strs)
    d = Int32[Int32(x) for x in dims]
    out = Ref{Ptr{L.ds_topology_t}}(C_NULL)
    GC.@preserve strs ptrs d check(L.ds_topology_create(ptrs, d, Int32(length(ptrs)), out))
    return Topology(out[])
end

function _topology(f, args...)
    out = Ref{Ptr{L.ds_topology_t}}(C_NULL)
    check(f(args..., out))
    return Topology(out[])
end
pipe_data_topology(num_pp::Integer, num_dp::Integer) =
    _topology(L.ds_topology_create_pipe_data, Int32(num_pp), Int32(num_dp))
pipe_model_data_topology(num_pp::Integer, num_mp::Integer, num_dp::Integer) =
    _topology(L.ds_topology_create_pipe_model_data, Int32(num_pp), Int32(num_mp), Int32(num_dp))
default_topology(world::Integer) = _topology(L.ds_topology_create_default, Int32(world))

"""Release the handle (`ds_topology_destroy`); idempotent."""
Base.close(t::Topology) = _close_handle!(t, L.ds_topology_destroy)

world_size(t::Topology) = _handle_int(L.ds_topology_world_size, t)

"""The axes in order as `name => size` pairs."""
function topology_axes(t::Topology)
    n = Ref{Int32}(0)
    check(L.ds_topology_num_axes(t.handle, n))
    result = Pair{String,Int}[]
    for i in 0:(n[] - 1)
        name = Ref{Ptr{Cchar}}(C_NULL)
        dim = Ref{Int32}(0)
        check(L.ds_topology_axis(t.handle, Int32(i), name, dim))
        push!(result, unsafe_string(name[]) => Int(dim[]))
    end
    return result
end

"""`get_dim`: the size of `axis`, 0 when the topology has no such axis."""
get_dim(t::Topology, axis::AbstractString) = _handle_int(L.ds_topology_dim, t, cstr(axis, "axis"))

"""`get_rank`: the rank at `coords` (axis order, 0-based)."""
function rank_of(t::Topology, coords::AbstractVector{<:Integer})
    c = Int32[Int32(x) for x in coords]
    out = Ref{Int32}(0)
    GC.@preserve c check(L.ds_topology_rank_of(t.handle, c, Int32(length(c)), out))
    return Int(out[])
end

"""`get_coord`: the coordinates of `rank` in axis order."""
function coord_of(t::Topology, rank::Integer)
    c = zeros(Int32, length(topology_axes(t)))
    GC.@preserve c check(L.ds_topology_coord_of(t.handle, Int32(rank), c, Int32(length(c))))
    return Int.(c)
end

"""`get_axis_comm_lists(axis)`: one rank list per combination of the other axes."""
function axis_comm_lists(t::Topology, axis::AbstractString)
    flat = zeros(Int32, world_size(t))  # the lists hold every rank once
    lists = Ref{Int32}(0)
    len = Ref{Int32}(0)
    GC.@preserve flat check(L.ds_topology_axis_comm_lists(t.handle, cstr(axis, "axis"), flat, Int64(length(flat)),
                                                          lists, len))
    return [Int.(flat[(i * len[] + 1):((i + 1) * len[])]) for i in 0:(lists[] - 1)]
end

"""`filter_match(; axis=coord, ...)`: the matching ranks, increasing (no criteria: every rank)."""
function filter_match(t::Topology; criteria...)
    strs = _cstrs([String(k) for k in keys(criteria)], "axes")
    ptrs = _cptrs(strs)
    c = Int32[Int32(v) for v in values(criteria)]
    out = zeros(Int32, world_size(t))
    count = Ref{Int32}(0)
    GC.@preserve strs ptrs c out check(L.ds_topology_filter_match(t.handle, ptrs, c, Int32(length(c)), out,
                                                                  Int64(length(out)), count))
    return Int.(out[1:count[]])
end

"""`get_rank_repr(rank, omit_axes)`; `omit_axes === nothing`: DeepSpeed's default, data and pipe."""
function rank_repr(t::Topology, rank::Integer; omit_axes = nothing)
    strs = _cstrs(omit_axes === nothing ? String[] : omit_axes, "omit_axes")
    ptrs = _cptrs(strs)
    omit = omit_axes === nothing ? Ptr{Ptr{Cchar}}(C_NULL) : pointer(ptrs)
    needed = Ref{Csize_t}(0)
    buf = zeros(UInt8, 256)
    status = GC.@preserve strs ptrs buf L.ds_topology_rank_repr(t.handle, Int32(rank), omit, Int32(length(ptrs)),
                                                               pointer(buf), Csize_t(length(buf)), needed)
    if status != L.DS_OK && needed[] > length(buf)
        buf = zeros(UInt8, needed[])
        status = GC.@preserve strs ptrs buf L.ds_topology_rank_repr(t.handle, Int32(rank), omit,
                                                                   Int32(length(ptrs)), pointer(buf),
                                                                   Csize_t(length(buf)), needed)
    end
    check(status)
    return GC.@preserve buf unsafe_string(pointer(buf))
end

"""This rank's communicator along `axis` (collective over `world`; its rank = the coordinate)."""
function comm(t::Topology, axis::AbstractString, world::Comm)
    out = Ref{Ptr{L.ds_comm_t}}(C_NULL)
    check(L.ds_topology_comm(t.handle, world.handle, cstr(axis, "axis"), out))
    return Comm(out[])
end

"""The ranks sharing this rank's coordinates on every axis not in `axes` (collective over `world`)."""
function group_comm(t::Topology, axes::AbstractVector{<:AbstractString}, world::Comm)
    strs = _cstrs(axes, "axes")
    ptrs = _cptrs(strs)
    out = Ref{Ptr{L.ds_comm_t}}(C_NULL)
    GC.@preserve strs ptrs check(L.ds_topology_group_comm(t.handle, world.handle, ptrs, Int32(length(ptrs)), out))
    return Comm(out[])
end

# ---- schedules -------------------------------------------------------------

const _SCHEDULE_KINDS = Dict(:train => L.DS_PIPE_SCHEDULE_TRAIN, :inference => L.DS_PIPE_SCHEDULE_INFERENCE,
                             :data_parallel => L.DS_PIPE_SCHEDULE_DATA_PARALLEL)

"""One pipeline instruction: `op` is DeepSpeed's class name as a Symbol (`:ForwardPass`),
`type` the `DS_PIPE_INSTR_*` code; `buffer_id` and `micro_batch` are -1 for the
reductions and the optimizer step."""
struct PipeInstr
    op::Symbol
    type::Int32
    buffer_id::Int
    step::Int
    micro_batch::Int
end

"""
    PipeSchedule(kind, micro_batches, stages, stage_id)

DeepSpeed's schedule (`kind` `:train` (1F1B), `:inference` or `:data_parallel`) for one
batch on `stage_id`: iterate it for its `PipeInstr`s (each `for` loop starts over);
`step_instrs(s, step)`, `num_buffers(s)`, `num_steps(s)`.
"""
mutable struct PipeSchedule
    handle::Ptr{L.ds_pipe_schedule_t}
    function PipeSchedule(kind::Symbol, micro_batches::Integer, stages::Integer, stage_id::Integer)
        haskey(_SCHEDULE_KINDS, kind) ||
            throw(ArgumentError("kind = :$kind; expected one of $(sort!(collect(keys(_SCHEDULE_KINDS))))"))
        out = Ref{Ptr{L.ds_pipe_schedule_t}}(C_NULL)
        check(L.ds_pipe_schedule_create(_SCHEDULE_KINDS[kind], Int32(micro_batches), Int32(stages),
                                        Int32(stage_id), out))
        return _owned(new(out[]))
    end
end

"""Release the handle (`ds_pipe_schedule_destroy`); idempotent."""
Base.close(s::PipeSchedule) = _close_handle!(s, L.ds_pipe_schedule_destroy)

_blank_instr() = Ref(L.ds_pipe_instr_t(sizeof(L.ds_pipe_instr_t), 0, 0, 0, 0))
_instr(x) = PipeInstr(Symbol(unsafe_string(L.ds_pipe_instr_name(x.type_))), x.type_, Int(x.buffer_id), Int(x.step),
                      Int(x.micro_batch))

function Base.iterate(s::PipeSchedule)
    check(L.ds_pipe_schedule_reset(s.handle))
    return iterate(s, nothing)
end

function Base.iterate(s::PipeSchedule, ::Nothing)
    out = _blank_instr()
    done = Ref{Int32}(0)
    check(L.ds_pipe_schedule_next(s.handle, out, done))
    done[] != 0 && return nothing
    return (_instr(out[]), nothing)
end

Base.IteratorSize(::Type{PipeSchedule}) = Base.SizeUnknown()
Base.eltype(::Type{PipeSchedule}) = PipeInstr

num_buffers(s::PipeSchedule) = _handle_int(L.ds_pipe_schedule_num_buffers, s)
num_steps(s::PipeSchedule) = _handle_int(L.ds_pipe_schedule_num_steps, s)

"""The instructions of `step` (DeepSpeed's yielded list; empty for a bubble)."""
function step_instrs(s::PipeSchedule, step::Integer)
    n = Ref{Int32}(0)
    check(L.ds_pipe_schedule_step_size(s.handle, Int32(step), n))
    result = PipeInstr[]
    for i in 0:(n[] - 1)
        out = _blank_instr()
        check(L.ds_pipe_schedule_instr(s.handle, Int32(step), Int32(i), out))
        push!(result, _instr(out[]))
    end
    return result
end

# ---- point-to-point between stages ----------------------------------------

"""
    pipe_send(c, A, peer; tag=0)

`ds_pipe_send`: the array `A` (its dtype and logical shape `size(A)`, as every binding
sees the tensor) to rank `peer` of `c`, `tag` in [0, 32767]. The library takes row-major
data: one copy for `ndims(A) >= 2`.
"""
function pipe_send(c::Comm, A::AbstractArray, peer::Integer; tag::Integer = 0)
    with_rowmajor(A) do ref
        check(L.ds_pipe_send(c.handle, ref, Int32(peer), Int32(tag)))
    end
    return nothing
end

"""
    pipe_recv!(c, A, peer; tag=0)

`ds_pipe_recv` into `A`, which must have the sent dtype and logical shape (a mismatch
throws a DeepSpeedError naming both; `A` is then unchanged). Returns `A`.
"""
function pipe_recv!(c::Comm, A::Array{T}, peer::Integer; tag::Integer = 0) where {T}
    shape = Int64[size(A)...]
    buf, finish = rowmajor_out(T, shape)
    GC.@preserve buf shape begin
        ref = Ref(L.DLTensor(Ptr{Cvoid}(pointer(buf)), CPU, Cint(ndims(A)), dltype(T), pointer(shape),
                             Ptr{Int64}(C_NULL), UInt64(0)))
        check(L.ds_pipe_recv(c.handle, ref, Int32(peer), Int32(tag)))
    end
    copyto!(A, finish())
    return A
end

"""
    partition_layers(method, num_stages; num_layers, param_counts, type_names)

`ds_pipe_partition`: the `num_stages + 1` boundaries DeepSpeed's `PipelineModule` computes
for `partition_method` (0-based: stage `s` holds layers `parts[s+1]:parts[s+2]-1` in Julia
indexing). `method`: "uniform", "parameters" (balanced by `param_counts`) or
"type:<regex>" (balanced by the layers whose `type_names` entry matches). `num_layers`
defaults to the length of the list given.
"""
function partition_layers(method::AbstractString, num_stages::Integer;
                          num_layers::Union{Integer,Nothing} = nothing,
                          param_counts::Union{AbstractVector{<:Integer},Nothing} = nothing,
                          type_names::Union{AbstractVector{<:AbstractString},Nothing} = nothing)
    n = num_layers !== nothing ? num_layers :
        param_counts !== nothing ? length(param_counts) :
        type_names !== nothing ? length(type_names) :
        throw(ArgumentError("partition_layers: give num_layers, param_counts or type_names"))
    num_stages >= 1 || throw(ArgumentError("partition_layers: num_stages = $num_stages must be >= 1"))
    counts = param_counts === nothing ? C_NULL : Int64[Int64(x) for x in param_counts]
    strs = type_names === nothing ? String[] : _cstrs(type_names, "type_names")
    ptrs = type_names === nothing ? C_NULL : _cptrs(strs)
    parts = zeros(Int32, num_stages + 1)
    GC.@preserve counts strs ptrs parts check(L.ds_pipe_partition(cstr(method, "method"), Int32(n), counts, ptrs,
                                                                  Int32(num_stages), parts))
    return Int.(parts)
end
