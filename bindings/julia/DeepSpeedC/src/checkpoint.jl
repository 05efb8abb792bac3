# Checkpoints (docs/CHECKPOINTS.md): save / load / 16-bit model export, and
# DeepSpeed's memory estimators.

"""
    save_checkpoint(e, save_dir; tag=nothing, client_state="{}")

= engine.save_checkpoint (`ds_save_checkpoint`): everything needed to resume exactly, as
`<save_dir>/<tag>` (tag `nothing`: "global_step<N>"), then `latest` points at it.
`client_state` is any JSON text, returned by `load_checkpoint!`. Call it at an
accumulation boundary.
"""
function save_checkpoint(e::Engine, save_dir::AbstractString; tag::Union{AbstractString,Nothing} = nothing,
                         client_state::AbstractString = "{}")
    call(e, L.ds_save_checkpoint(e.handle, cstr(save_dir, "save_dir"), cstr_or_null(tag, "tag"),
                                 cstr(client_state, "client_state")))
    return e
end

"""
    load_checkpoint!(e, load_dir; tag=nothing, load_optimizer_states=true,
                     load_lr_scheduler_states=true, load_module_only=false, strict=true) -> String

= engine.load_checkpoint (`ds_load_checkpoint`; tag `nothing`: the one `latest` names).
Verifies the whole checkpoint before changing anything. Returns the saved client state
(JSON text).
"""
function load_checkpoint!(e::Engine, load_dir::AbstractString; tag::Union{AbstractString,Nothing} = nothing,
                          load_optimizer_states::Bool = true, load_lr_scheduler_states::Bool = true,
                          load_module_only::Bool = false, strict::Bool = true)
    flags = UInt32(0)
    load_optimizer_states || (flags |= L.DS_LOAD_NO_OPTIMIZER_STATES)
    load_lr_scheduler_states || (flags |= L.DS_LOAD_NO_LR_SCHEDULER_STATES)
    load_module_only && (flags |= L.DS_LOAD_MODULE_ONLY)
    strict || (flags |= L.DS_LOAD_NON_STRICT)
    out = Ref{Ptr{Cchar}}(C_NULL)
    call(e, L.ds_load_checkpoint(e.handle, cstr(load_dir, "load_dir"), cstr_or_null(tag, "tag"), flags, out))
    return out[] == C_NULL ? "{}" : unsafe_string(out[])
end

"""
    save_16bit_model(e, save_dir; filename=nothing, exclude_frozen=false)

= engine.save_16bit_model: the working-precision weights as one safetensors file
(`<save_dir>/model.safetensors` by default), with PyTorch's shapes.
"""
function save_16bit_model(e::Engine, save_dir::AbstractString; filename::Union{AbstractString,Nothing} = nothing,
                          exclude_frozen::Bool = false)
    flags = exclude_frozen ? L.DS_SAVE_EXCLUDE_FROZEN : UInt32(0)
    call(e, L.ds_save_16bit_model_ex(e.handle, cstr(save_dir, "save_dir"), cstr_or_null(filename, "filename"),
                                     flags))
    return e
end

"""
    estimate_zero2_mem(total_params; num_gpus_per_node=1, num_nodes=1, cpu_offload=false,
                       additional_buffer_factor=1.5) -> (cpu_bytes, gpu_bytes)

DeepSpeed's estimate_zero2_model_states_mem_needs.
"""
function estimate_zero2_mem(total_params::Integer; num_gpus_per_node::Integer = 1, num_nodes::Integer = 1,
                            cpu_offload::Bool = false, additional_buffer_factor::Real = 1.5)
    cpu, gpu = Ref{Int64}(0), Ref{Int64}(0)
    check(L.ds_estimate_zero2_mem(Int64(total_params), Int32(num_gpus_per_node), Int32(num_nodes),
                                  Int32(cpu_offload), Cdouble(additional_buffer_factor), cpu, gpu))
    return (cpu_bytes = cpu[], gpu_bytes = gpu[])
end

"""
    estimate_zero3_mem(total_params, largest_layer_params; num_gpus_per_node=1, num_nodes=1,
                       cpu_offload=false, cpu_offload_params=false, zero_init=true,
                       additional_buffer_factor=1.5) -> (cpu_bytes, gpu_bytes, largest_layer_bytes)

DeepSpeed's estimate_zero3_model_states_mem_needs.
"""
function estimate_zero3_mem(total_params::Integer, largest_layer_params::Integer; num_gpus_per_node::Integer = 1,
                            num_nodes::Integer = 1, cpu_offload::Bool = false, cpu_offload_params::Bool = false,
                            zero_init::Bool = true, additional_buffer_factor::Real = 1.5)
    cpu, gpu, largest = Ref{Int64}(0), Ref{Int64}(0), Ref{Int64}(0)
    check(L.ds_estimate_zero3_mem(Int64(total_params), Int64(largest_layer_params), Int32(num_gpus_per_node),
                                  Int32(num_nodes), Int32(cpu_offload), Int32(cpu_offload_params),
                                  Int32(zero_init), Cdouble(additional_buffer_factor), cpu, gpu, largest))
    return (cpu_bytes = cpu[], gpu_bytes = gpu[], largest_layer_bytes = largest[])
end
