# Engine: life cycle, options, parameters, views and getters.

"""
    Engine(config_json; comm=nothing, device=:cpu, device_id=0, stream=C_NULL, log=nothing, log_level=nothing)
    Engine(config_json, model::Model; ...)

An engine from DeepSpeed's JSON config (`ds_engine_create`), or one that owns a
built-in model's parameters (`ds_engine_create_with_model`, already initialised).
`device = :cuda` puts it on GPU `device_id`, ordering its work on `stream` (a
`cudaStream_t` as `Ptr{Cvoid}`; `C_NULL`: the legacy default stream; see `set_stream!`).
`log` is a function `(level::Int, message::String)` receiving this engine's messages;
`log_level` one of `LibDeepSpeedC.DS_LOG_*`. `close(engine)` destroys it at once;
otherwise the finalizer does (destroy is local and never waits, so that is safe).
One engine is used by one task at a time (the library detects a concurrent call and
fails it with DS_ERR_INVALID_STATE).
"""
mutable struct Engine
    handle::Ptr{L.ds_engine_t}
    log::Union{LogSink,Nothing}   # referenced by the C side until destroy
    model::Union{Model,Nothing}
    Engine(handle::Ptr{L.ds_engine_t}, log, model) = _owned(new(handle, log, model))
end

function _options(comm, device::Symbol, device_id::Integer, stream::Ptr{Cvoid}, log, log_level)
    o = Ref{L.ds_engine_options_t}()
    L.ds_engine_options_init(o, sizeof(L.ds_engine_options_t))
    d = o[]
    # A closed Comm has a NULL handle, which the library would read as "the default world".
    comm !== nothing && comm.handle == C_NULL &&
        throw(DeepSpeedError(L.DS_ERR_INVALID_HANDLE, "comm: the communicator is closed"))
    devtype = device === :cpu ? L.kDLCPU : device === :cuda ? L.kDLCUDA :
              throw(ArgumentError("device = :$device; expected :cpu or :cuda"))
    sink = log === nothing ? nothing : LogSink(log, nothing)
    o[] = L.ds_engine_options_t(d.struct_size,
                                comm === nothing ? Ptr{L.ds_comm_t}(C_NULL) : comm.handle,
                                L.DLDevice(devtype, Cint(device_id)), stream,
                                sink === nothing ? C_NULL : _LOG_TRAMPOLINE[],
                                sink === nothing ? C_NULL : pointer_from_objref(sink),
                                log_level === nothing ? d.log_level : Int32(log_level), d.reserved0)
    return o, sink
end

function Engine(config_json::AbstractString; comm::Union{Comm,Nothing} = nothing, device::Symbol = :cpu,
                device_id::Integer = 0, stream::Ptr{Cvoid} = C_NULL, log = nothing, log_level = nothing)
    o, sink = _options(comm, device, device_id, stream, log, log_level)
    out = Ref{Ptr{L.ds_engine_t}}(C_NULL)
    status = GC.@preserve sink comm L.ds_engine_create(cstr(config_json, "config_json"), o, out)
    check(status)
    return _engine_after_create(Engine(out[], sink, nothing))
end

function Engine(config_json::AbstractString, model::Model; comm::Union{Comm,Nothing} = nothing,
                device::Symbol = :cpu, device_id::Integer = 0, stream::Ptr{Cvoid} = C_NULL, log = nothing,
                log_level = nothing)
    o, sink = _options(comm, device, device_id, stream, log, log_level)
    out = Ref{Ptr{L.ds_engine_t}}(C_NULL)
    status = GC.@preserve sink comm model L.ds_engine_create_with_model(cstr(config_json, "config_json"), model.handle, o, out)
    check(status)
    return _engine_after_create(Engine(out[], sink, model))
end

# What the log callback threw during the create call surfaces now; the engine (already
# owned by a Julia object) is then left to its finalizer.
_engine_after_create(e::Engine) = (rethrow_log_error(e.log); e)

"""As `Engine(config_json; ...)`, reading the JSON from `path` (`ds_engine_create_from_file`)."""
function engine_from_file(path::AbstractString; comm::Union{Comm,Nothing} = nothing, device::Symbol = :cpu,
                          device_id::Integer = 0, log = nothing, log_level = nothing)
    o, sink = _options(comm, device, device_id, log, log_level)
    out = Ref{Ptr{L.ds_engine_t}}(C_NULL)
    status = GC.@preserve sink comm L.ds_engine_create_from_file(cstr(path, "path"), o, out)
    check(status)
    return _engine_after_create(Engine(out[], sink, nothing))
end

"""Destroy the engine (`ds_engine_destroy`): local, never waits; idempotent. Views taken
from it die with it. The pointer is nulled first, so later calls get DS_ERR_INVALID_HANDLE."""
Base.close(e::Engine) = _close_handle!(e, L.ds_engine_destroy)

Base.isopen(e::Engine) = e.handle != C_NULL

"""Check a ds_* call's status on the engine (a failure wins over, and clears, what a log
callback threw during the call), then raise what a log callback threw."""
@inline function call(e::Engine, status::Int32)
    if status != L.DS_OK
        err = DeepSpeedError(status, unsafe_string(L.ds_last_error()))  # thread-local: read at once
        e.log === nothing || (e.log.error = nothing)
        throw(err)
    end
    rethrow_log_error(e.log)
    return nothing
end

# ---- getters -------------------------------------------------------------

for (jl, c, T) in ((:rank, :ds_engine_rank, Int32), (:world_size, :ds_engine_world_size, Int32),
                   (:global_steps, :ds_engine_global_steps, Int64),
                   (:global_samples, :ds_engine_global_samples, Int64),
                   (:skipped_steps, :ds_engine_skipped_steps, Int64),
                   (:micro_steps, :ds_engine_micro_steps, Int64),
                   (:num_params, :ds_engine_num_params, Int64))
    @eval function $jl(e::Engine)
        out = Ref{$T}(0)
        call(e, L.$c(e.handle, out))
        return Int(out[])
    end
end

"""The bare loss scale (1 without fp16)."""
function loss_scale(e::Engine)
    out = Ref{Cfloat}(0)
    call(e, L.ds_engine_loss_scale(e.handle, out))
    return out[]
end

"""What DeepSpeed's engine.backward multiplies the loss by (loss scale / accumulation steps)."""
function loss_multiplier(e::Engine)
    out = Ref{Cfloat}(0)
    call(e, L.ds_engine_loss_multiplier(e.handle, out))
    return out[]
end

"""The learning rate the next optimizer step uses (engine.get_lr()[0])."""
function lr(e::Engine)
    out = Ref{Cdouble}(0)
    call(e, L.ds_engine_get_lr(e.handle, out))
    return out[]
end

"""Set the learning rate of the next step (an LR schedule overrides it after its next step)."""
set_lr!(e::Engine, value::Real) = call(e, L.ds_engine_set_lr(e.handle, Cdouble(value)))

"""
    set_stream!(e::Engine, stream::Ptr{Cvoid})

The CUDA stream an engine on a GPU orders its work on: a `cudaStream_t` as a
pointer, `C_NULL` for the legacy default stream. Every call runs the engine's GPU
work after the work already queued on the stream, and the stream's later work after
the engine's (the weights after `step!`), without blocking the host. The stream must stay valid while the engine uses it. Local. Throws
`DeepSpeedError` (DS_ERR_INVALID_STATE) on an engine that trains on the CPU.
"""
set_stream!(e::Engine, stream::Ptr{Cvoid}) = call(e, L.ds_engine_set_stream(e.handle, stream))

"""Whether the next `step!` is a gradient accumulation boundary."""
function is_gradient_accumulation_boundary(e::Engine)
    out = Ref{Int32}(0)
    call(e, L.ds_engine_is_gradient_accumulation_boundary(e.handle, out))
    return out[] != 0
end

set_gradient_accumulation_boundary!(e::Engine, value::Bool) =
    call(e, L.ds_engine_set_gradient_accumulation_boundary(e.handle, Int32(value)))

"""The fully resolved config as JSON text."""
function config_json(e::Engine)
    out = Ref{Ptr{Cchar}}(C_NULL)
    call(e, L.ds_engine_config_json(e.handle, out))
    return unsafe_string(out[])
end

"""The comms logger's table (config `comms_logger.enabled`) as text."""
function comms_log_summary(e::Engine)
    out = Ref{Ptr{Cchar}}(C_NULL)
    call(e, L.ds_engine_comms_log_summary(e.handle, out))
    return out[] == C_NULL ? "" : unsafe_string(out[])
end

"""This rank's memory accounting in bytes."""
struct MemoryReport
    params_bytes::Int64
    grads_bytes::Int64
    optimizer_state_bytes::Int64
    buffers_bytes::Int64
    total_bytes::Int64
    peak_total_bytes::Int64
end

function memory_report(e::Engine)
    r = Ref(L.ds_memory_report_t(sizeof(L.ds_memory_report_t), 0, 0, 0, 0, 0, 0))
    call(e, L.ds_engine_memory_report(e.handle, r))
    return _report(r[])
end

"""
    disk_report(e)

Bytes on disk per category (`offload_optimizer.device` `"nvme"`: the fp32
master weights and the optimizer state); zeros otherwise.
"""
function disk_report(e::Engine)
    r = Ref(L.ds_memory_report_t(sizeof(L.ds_memory_report_t), 0, 0, 0, 0, 0, 0))
    call(e, L.ds_engine_disk_report(e.handle, r))
    return _report(r[])
end

function _report(x)
    return MemoryReport(x.params_bytes, x.grads_bytes, x.optimizer_state_bytes, x.buffers_bytes,
                        x.total_bytes, x.peak_total_bytes)
end

# ---- parameters ----------------------------------------------------------

"""
    add_param!(e, name, init; trainable=true)

Register a parameter with its initial value (copied by the library). `init` is a
Float32/Float16/BFloat16 array whose size is the parameter's (PyTorch) shape, handed
over with its strides, without a copy on this side.
"""
function add_param!(e::Engine, name::AbstractString, init::AbstractArray; trainable::Bool = true)
    flags = trainable ? L.DS_PARAM_TRAINABLE : UInt32(0)
    n = cstr(name, "name")
    with_dltensor(init) do t
        call(e, L.ds_engine_add_param(e.handle, n, t, flags))
    end
    return e
end

"""Lay out parameters, gradients and optimizer state (`ds_engine_init`)."""
init!(e::Engine) = (call(e, L.ds_engine_init(e.handle)); e)

"""One parameter as `ds_engine_param_info` describes it (shape in PyTorch's order);
`expert`: a built-in MoE layer's expert (`DS_PARAM_EXPERT`, DeepSpeed's `is_moe_param`)."""
struct ParamInfo
    name::String
    shape::Vector{Int64}
    eltype::Type
    trainable::Bool
    numel::Int64
    expert::Bool
end

function param_info(e::Engine, index::Integer)
    z = L.DLDataType(0, 0, 0)
    r = Ref(L.ds_param_info_t(sizeof(L.ds_param_info_t), C_NULL, C_NULL, 0, 0, z, 0, 0))
    call(e, L.ds_engine_param_info(e.handle, Int64(index), r))
    x = r[]
    shape = x.ndim == 0 ? Int64[] : Int64[unsafe_load(x.shape, i) for i in 1:x.ndim]
    return ParamInfo(unsafe_string(x.name), shape, jltype(x.dtype), (x.flags & L.DS_PARAM_TRAINABLE) != 0, x.numel,
                     (x.flags & L.DS_PARAM_EXPERT) != 0)
end

"""Every parameter in registration order (= model.named_parameters())."""
named_parameters(e::Engine) = [param_info(e, i) for i in 0:num_params(e)-1]
Base.keys(e::Engine) = [p.name for p in named_parameters(e)]

"""
A read-only array aliasing engine-owned memory (a parameter's working weights or its
gradient buffer), of the parameter's logical shape. It keeps the engine alive and
refuses to be read once the engine is closed. At ZeRO 0-2 it stays valid for the
engine's life and shows the values as they change in step!/load_checkpoint!; at
ZeRO 3 a partitioned parameter's view dies at its last release!.
"""
struct EngineView{T,N,A<:AbstractArray{T,N}} <: AbstractArray{T,N}
    data::A
    engine::Engine
end
Base.size(v::EngineView) = size(v.data)
Base.IndexStyle(::Type{<:EngineView}) = IndexCartesian()
function Base.getindex(v::EngineView{T,N}, I::Vararg{Int,N}) where {T,N}
    isopen(v.engine) || throw(DeepSpeedError(L.DS_ERR_INVALID_HANDLE, "view of a closed engine"))
    return v.data[I...]
end

function _view(e::Engine, f, name::AbstractString)
    n = cstr(name, "name")
    z = L.DLDataType(0, 0, 0)
    r = Ref(L.DLTensor(C_NULL, CPU, 0, z, C_NULL, C_NULL, 0))
    call(e, f(e.handle, n, r))
    d = wrap_rowmajor(r[])
    return EngineView{eltype(d),ndims(d),typeof(d)}(d, e)
end

"""The working-precision weights of parameter `name` (no copy; see `EngineView`)."""
param(e::Engine, name::AbstractString) = _view(e, L.ds_engine_param_view, name)

"""The gradient accumulation buffer of parameter `name` (= param.grad; no copy)."""
grad(e::Engine, name::AbstractString) = _view(e, L.ds_engine_grad_view, name)

"""ZeRO-3: make the whole weights of `names` available until the matching `release!`."""
function gather!(e::Engine, names::AbstractVector{<:AbstractString})
    strs = [cstr(n, "names") for n in names]
    ptrs = Ptr{Cchar}[Ptr{Cchar}(pointer(s)) for s in strs]
    GC.@preserve strs ptrs call(e, L.ds_engine_gather(e.handle, ptrs, Int32(length(ptrs))))
    return e
end

function release!(e::Engine, names::AbstractVector{<:AbstractString})
    strs = [cstr(n, "names") for n in names]
    ptrs = Ptr{Cchar}[Ptr{Cchar}(pointer(s)) for s in strs]
    GC.@preserve strs ptrs call(e, L.ds_engine_release(e.handle, ptrs, Int32(length(ptrs))))
    return e
end
