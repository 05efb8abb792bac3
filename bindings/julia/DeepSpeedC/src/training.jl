# The training loop: gradients in, backward, step; the built-in model's forward;
# full fp32 copies (DeepSpeed's safe_get_full_* / safe_set_full_*).

"""
    accumulate_grad!(e, name, g; predivided=false)

Add this micro-batch's gradient of parameter `name` (`ds_engine_accumulate_grad_ex`):
`buffer += g / gradient_accumulation_steps`, or `buffer += g` with `predivided=true`
(the gradient of `loss * loss_multiplier(e)`, DeepSpeed's order). `g` has the
parameter's size and goes over with its column-major strides, without a copy.
"""
function accumulate_grad!(e::Engine, name::AbstractString, g::AbstractArray; predivided::Bool = false)
    n = cstr(name, "name")
    flags = predivided ? L.DS_GRAD_PREDIVIDED : UInt32(0)
    with_dltensor(g) do t
        call(e, L.ds_engine_accumulate_grad_ex(e.handle, n, t, flags))
    end
    return e
end

"""
    backward!(e)
    backward!(e, out_grad)

End the micro-step's backward pass (`ds_backward`). With a built-in model it first
runs the model's backward: of the loss after `forward(e, x, targets)`, or of the
output with gradient `out_grad` (Float32, the output's size) after `forward!(e, out, x)`.
"""
backward!(e::Engine) = (call(e, L.ds_backward(e.handle, Ptr{L.DLTensor}(C_NULL))); e)

function backward!(e::Engine, out_grad::AbstractArray{Float32})
    with_dltensor(out_grad) do t
        call(e, L.ds_backward(e.handle, t))
    end
    return e
end

"""What `step!` did (`ds_step_info_t`)."""
struct StepInfo
    stepped::Bool       # an optimizer step was attempted (accumulation boundary)
    skipped::Bool       # that step was skipped (fp16 overflow)
    loss_scale::Float32 # the loss scale after the call
    grad_norm::Float64  # unscaled global gradient norm before clipping (boundary only)
    lr::Float64         # the learning rate this step applied (boundary only)
    global_step::Int64  # global_steps after the call
end

"""= engine.step() (`ds_step`): at an accumulation boundary the optimizer step, else a count."""
function step!(e::Engine)
    r = Ref(L.ds_step_info_t(sizeof(L.ds_step_info_t), 0, 0, 0, 0, 0, 0, 0))
    call(e, L.ds_step(e.handle, r))
    x = r[]
    return StepInfo(x.stepped != 0, x.skipped != 0, x.loss_scale, x.grad_norm, x.lr, x.global_step)
end

"""
    forward(e, x, targets) -> Float32

loss = engine(batch) with a built-in model (`ds_forward` with targets): `x` is Float32
features of size (batch, in) or Int32/Int64 token ids (batch, T); `targets` class ids
or Float32 values shaped as the model's loss wants (docs/MODELS.md). Returns the mean loss.
"""
function forward(e::Engine, x::AbstractArray, targets::AbstractArray)
    loss = fill(0.0f0)  # a 0-dimensional Float32 array: shape []
    with_dltensor(x) do tx
        with_dltensor(targets) do tt
            with_dltensor(loss) do tl
                inputs = [tx[], tt[]]  # ds_forward reads an array of two DLTensors
                GC.@preserve inputs call(e, L.ds_forward(e.handle, pointer(inputs), Int32(2), tl))
            end
        end
    end
    return loss[]
end

"""
    forward!(e, out, x) -> out

The model's output for `x` without a loss (`ds_forward` without targets), written into
`out` (Float32, the output's size, e.g. (batch, width)) in place, with its strides.
"""
function forward!(e::Engine, out::AbstractArray{Float32}, x::AbstractArray)
    with_dltensor(x) do tx
        with_dltensor(out) do to
            call(e, L.ds_forward(e.handle, tx, Int32(1), to))
        end
    end
    return out
end

"""engine.eval() (dropout off, any batch size, nothing kept for backward); `eval!(e, false)` = train!."""
eval!(e::Engine, on::Bool = true) = (call(e, L.ds_engine_eval(e.handle, Int32(on))); e)
train!(e::Engine) = eval!(e, false)

# ---- full fp32 copies (contiguous row-major on the C side) ------------------

function _full_get(e::Engine, name::AbstractString, f)
    info = _info_by_name(e, name)
    buf, finish = rowmajor_out(Float32, info.shape)
    shape = copy(info.shape)
    GC.@preserve buf shape begin
        r = Ref(L.DLTensor(Ptr{Cvoid}(pointer(buf)), CPU, Cint(length(shape)), dltype(Float32),
                           pointer(shape), Ptr{Int64}(C_NULL), UInt64(0)))
        call(e, f(r))
    end
    return finish()
end

function _info_by_name(e::Engine, name::AbstractString)
    for i in 0:num_params(e)-1
        p = param_info(e, i)
        p.name == name && return p
    end
    throw(DeepSpeedError(L.DS_ERR_NOT_FOUND, "no parameter named $(repr(name))"))
end

"""The fp32 master weights of `name` (a copy, of the parameter's shape)."""
get_full_fp32_param(e::Engine, name::AbstractString) =
    (n = cstr(name, "name"); _full_get(e, name, r -> L.ds_engine_get_full_fp32_param(e.handle, n, r)))

"""The accumulated gradient of the current window (a copy)."""
get_full_grad(e::Engine, name::AbstractString) =
    (n = cstr(name, "name"); _full_get(e, name, r -> L.ds_engine_get_full_grad(e.handle, n, r)))

"""An optimizer state tensor ("exp_avg", "exp_avg_sq", "momentum_buffer"; a copy)."""
function get_full_optimizer_state(e::Engine, name::AbstractString, key::AbstractString)
    n, k = cstr(name, "name"), cstr(key, "key")
    return _full_get(e, name, r -> L.ds_engine_get_full_optimizer_state(e.handle, n, k, r))
end

"""Set the fp32 master weights of `name` (and the working copy, rounded)."""
function set_full_fp32_param!(e::Engine, name::AbstractString, value::AbstractArray{Float32})
    n = cstr(name, "name")
    with_rowmajor(value) do r
        call(e, L.ds_engine_set_full_fp32_param(e.handle, n, r))
    end
    return e
end

"""Set the accumulated gradient of `name`."""
function set_full_grad!(e::Engine, name::AbstractString, value::AbstractArray{Float32})
    n = cstr(name, "name")
    with_rowmajor(value) do r
        call(e, L.ds_engine_set_full_grad(e.handle, n, r))
    end
    return e
end

"""Set an optimizer state tensor of `name`."""
function set_full_optimizer_state!(e::Engine, name::AbstractString, key::AbstractString,
                                   value::AbstractArray{Float32})
    n, k = cstr(name, "name"), cstr(key, "key")
    with_rowmajor(value) do r
        call(e, L.ds_engine_set_full_optimizer_state(e.handle, n, k, r))
    end
    return e
end
