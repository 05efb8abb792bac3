"""
    DeepSpeedC

Julia bindings of deepspeed_c, DeepSpeed's training runtime as a C library
(`include/deepspeed_c.h`). `LibDeepSpeedC` holds the raw `ccall` wrappers,
generated from the header; this module builds `Engine`, `Model`, `Comm` and
`DeepSpeedError` on top.

Array convention: a Julia array of size `(d1, ..., dk)` is the tensor of
logical shape `(d1, ..., dk)`, the shape PyTorch would give it: it is handed
to the library as a DLTensor with the array's own (column-major) strides
`(1, d1, d1*d2, ...)`, without a copy. So a `Linear(in, out)` weight is an
`out x in` Julia matrix, as in PyTorch, and checkpoints carry PyTorch's shapes.
"""
module DeepSpeedC

using Libdl

# The soname (DS_ABI_VERSION 0): ccall resolves it to the copy __init__ loads.
const libdeepspeed_c = Sys.isapple() ? "libdeepspeed_c.0.dylib" : "libdeepspeed_c.so.0"

include("LibDeepSpeedC.jl")
const L = LibDeepSpeedC

include("errors.jl")
include("handles.jl")
include("tensors.jl")
include("logging.jl")
include("comm.jl")
include("model.jl")
include("engine.jl")
include("training.jl")
include("pipe_engine.jl")
include("checkpoint.jl")
include("offload.jl")
include("pipe.jl")

export LibDeepSpeedC, DeepSpeedError, BFloat16, Engine, Model, Comm, StepInfo, ParamInfo, MemoryReport,
       EngineView, add_param!, init!, param, grad, accumulate_grad!, backward!, step!, forward, forward!,
       eval!, train!, save_checkpoint, load_checkpoint!, save_16bit_model, named_parameters,
       loss_scale, loss_multiplier, lr, set_lr!, set_stream!, global_steps, global_samples, skipped_steps,
       micro_steps, world_size, config_json, memory_report, disk_report, gather!, release!,
       get_full_fp32_param, get_full_grad, get_full_optimizer_state, set_full_fp32_param!,
       set_full_grad!, set_full_optimizer_state!, set_log_callback, convert_elements!,
       offload_states!, reload_states!, empty_partition_cache!, Topology, pipe_data_topology,
       pipe_model_data_topology, default_topology, topology_axes, get_dim, rank_of, coord_of,
       axis_comm_lists, filter_match, rank_repr, comm, group_comm, PipeSchedule, PipeInstr,
       num_buffers, num_steps, step_instrs, partition_layers, pipe_send, pipe_recv!, all_reduce!,
       all_gather_into_tensor!, reduce_scatter_tensor!, all_to_all_single!, barrier, BatchResult,
       PipeInfo, train_batch!, eval_batch, pipe_info

const _LOADED = Ref{String}("")

"""Where the library is: `ENV["DEEPSPEED_C_LIB"]` (a path), else the loader's search
(`LD_LIBRARY_PATH`, the system directories, `Libdl.DL_LOAD_PATH`)."""
function _library_path()
    path = get(ENV, "DEEPSPEED_C_LIB", "")
    if !isempty(path)
        isfile(path) || error("DeepSpeedC: DEEPSPEED_C_LIB=$(repr(path)) is not a file")
        return path
    end
    found = Libdl.find_library([libdeepspeed_c, "libdeepspeed_c"])
    isempty(found) && error("DeepSpeedC: libdeepspeed_c not found: set ENV[\"DEEPSPEED_C_LIB\"] to the path of " *
                            "libdeepspeed_c.so (e.g. <build>/libdeepspeed_c.so) or add its directory to " *
                            "LD_LIBRARY_PATH")
    return found
end

function __init__()
    path = _library_path()
    Libdl.dlopen(path, Libdl.RTLD_LAZY | Libdl.RTLD_GLOBAL)
    _LOADED[] = path
    abi = L.ds_abi_version()
    abi == UInt32(L.DS_ABI_VERSION) ||
        error("DeepSpeedC: $(path) has ABI version $(abi), these bindings were generated for $(L.DS_ABI_VERSION)")
    _init_log_trampoline()
    return nothing
end

"""The version of the loaded library, as a `VersionNumber`."""
version() = VersionNumber(unsafe_string(L.ds_version_string()))

"""The library's build description (JSON text: SIMD level, BLAS, CUDA, MPI, ...)."""
build_info() = unsafe_string(L.ds_build_info())

end # module DeepSpeedC
