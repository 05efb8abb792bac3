# DeepSpeed's engine.offload_states / reload_states / empty_partition_cache
# (ds_engine_offload_states, ds_engine_reload_states, ds_engine_empty_partition_cache).

const _OFFLOAD_STATES = Dict(:optim_states => L.DS_OFFLOAD_OPTIM_STATES, :hp_params => L.DS_OFFLOAD_HP_PARAMS,
                             :lp_params => L.DS_OFFLOAD_LP_PARAMS, :lp_grads => L.DS_OFFLOAD_LP_GRADS,
                             :contiguous_grad_buffer => L.DS_OFFLOAD_CONTIGUOUS_GRAD_BUFFER)
const _OFFLOAD_DEVICES = Dict(:cpu => L.DS_OFFLOAD_DEVICE_CPU, :nvme => L.DS_OFFLOAD_DEVICE_NVME)

"""
    offload_states!(e; include=nothing, device=:cpu, nvme_path=nothing)

Moves `include` (Symbols of DeepSpeed's OffloadStateTypeEnum: `:optim_states`,
`:hp_params`, `:lp_params`, `:lp_grads`, `:contiguous_grad_buffer`; `nothing` = every
state) to `device` (`:cpu`: they already live in host memory, nothing moves; `:nvme`: an
unlinked file under `nvme_path`, `nothing` = the config's). Until `reload_states!` the
calls that read them throw DS_ERR_INVALID_STATE.
"""
function offload_states!(e::Engine; include = nothing, device::Symbol = :cpu, nvme_path = nothing)
    haskey(_OFFLOAD_DEVICES, device) || throw(ArgumentError("device = :$device; expected :cpu or :nvme"))
    bits = UInt32(0)
    if include !== nothing
        for s in include
            haskey(_OFFLOAD_STATES, s) ||
                throw(ArgumentError("include: $(repr(s)) is not one of $(sort!(collect(keys(_OFFLOAD_STATES))))"))
            bits |= _OFFLOAD_STATES[s]
        end
        bits == 0 && throw(ArgumentError("include is empty (nothing offloads every state)"))
    end
    call(e, L.ds_engine_offload_states(e.handle, bits, _OFFLOAD_DEVICES[device], cstr_or_null(nvme_path, "nvme_path")))
    return e
end

"""Every offloaded state back, bit-identical (`ds_engine_reload_states`); a no-op when none is out."""
reload_states!(e::Engine) = (call(e, L.ds_engine_reload_states(e.handle)); e)

"""ZeRO-3: frees the whole weights of gathered parameters (a no-op below ZeRO-3)."""
empty_partition_cache!(e::Engine) = (call(e, L.ds_engine_empty_partition_cache(e.handle)); e)
