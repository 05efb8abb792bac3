# One pipeline stage of a built-in GPT (ds_train_batch, ds_eval_batch,
# ds_engine_pipe_info): DeepSpeed's PipelineEngine.train_batch / eval_batch.
# A GPT spec with "pipeline": {"stages": S} makes Engine(config, model) build
# this rank's stage (collective; the world size must be a multiple of S); such
# an engine trains only through train_batch!.

"""What `train_batch!` returns: the batch's mean loss and its optimizer step."""
struct BatchResult
    loss::Float32   # mean over the micro-batches, averaged over the data-parallel replicas
    step::StepInfo
end

"""This rank's place in the pipeline and its last batch's timings (`ds_pipe_info_t`)."""
struct PipeInfo
    stage_id::Int32
    num_stages::Int32
    first_layer::Int32         # the stage's pipeline layers are [first_layer, last_layer)
    last_layer::Int32
    num_layers::Int32          # the model's pipeline layers (n_layer + 3)
    micro_batches::Int32       # per batch: gradient_accumulation_steps
    data_parallel_size::Int32  # replicas of each stage
    batch_seconds::Float64     # the last train_batch!/eval_batch, wall clock
    compute_seconds::Float64   # of which this stage's forwards, backwards and optimizer step
    recompute_seconds::Float64 # of which forwards recomputed before their backward
end

# An optional batch argument: a null pointer for `nothing`.
function _with_batch(f, ::Nothing)
    return f(Ptr{L.DLTensor}(C_NULL))
end
function _with_batch(f, A::AbstractArray)
    return with_rowmajor(f, A)  # a row-major copy: the header promises no strided batches
end

"""
    train_batch!(e, inputs, targets) -> BatchResult

One batch through the pipeline, then one optimizer step (`ds_train_batch`, collective).
`inputs`: Int32/Int64 token ids of size (gradient_accumulation_steps * micro, T), read on
the first stage; `targets` likewise (-100 = ignore), read on the last; elsewhere either
may be `nothing`. Both go over as row-major copies.
"""
function train_batch!(e::Engine, inputs::Union{Nothing,AbstractArray}, targets::Union{Nothing,AbstractArray})
    loss = Ref{Cfloat}(0)
    r = Ref(L.ds_step_info_t(sizeof(L.ds_step_info_t), 0, 0, 0, 0, 0, 0, 0))
    _with_batch(inputs) do tx
        _with_batch(targets) do ty
            call(e, L.ds_train_batch(e.handle, tx, ty, loss, r))
        end
    end
    x = r[]
    return BatchResult(loss[], StepInfo(x.stepped != 0, x.skipped != 0, x.loss_scale, x.grad_norm, x.lr,
                                        x.global_step))
end

"""
    eval_batch(e, inputs, targets) -> Float32

DeepSpeed's eval_batch (`ds_eval_batch`, collective): the batch's mean loss, dropout off,
no gradients; arguments as `train_batch!`.
"""
function eval_batch(e::Engine, inputs::Union{Nothing,AbstractArray}, targets::Union{Nothing,AbstractArray})
    loss = Ref{Cfloat}(0)
    _with_batch(inputs) do tx
        _with_batch(targets) do ty
            call(e, L.ds_eval_batch(e.handle, tx, ty, loss))
        end
    end
    return loss[]
end

"""This rank's stage and its last batch's timings (`ds_engine_pipe_info`)."""
function pipe_info(e::Engine)
    r = Ref(L.ds_pipe_info_t(sizeof(L.ds_pipe_info_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    call(e, L.ds_engine_pipe_info(e.handle, r))
    x = r[]
    return PipeInfo(x.stage_id, x.num_stages, x.first_layer, x.last_layer, x.num_layers, x.micro_batches,
                    x.data_parallel_size, x.batch_seconds, x.compute_seconds, x.recompute_seconds)
end
