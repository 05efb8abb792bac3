# Built-in models (ds_model_*): a model the library builds from a JSON spec
# (docs/MODELS.md: a GPT or a sequential list of layers), trained through
# Engine(config, model) with forward / backward! / step!.

"""
    Model(spec_json::AbstractString)

A model built by the library (`ds_model_create`) from its JSON spec, e.g. a
sequential model with `"loss": "mse"` and one `{"type": "linear", "in_features": 4,
"out_features": 1}` layer (docs/MODELS.md lists the keys).
`Engine(config, model)` trains it; the engine keeps it alive, so `close(model)` may
come right after.
"""
mutable struct Model
    handle::Ptr{L.ds_model_t}
    function Model(spec_json::AbstractString)
        out = Ref{Ptr{L.ds_model_t}}(C_NULL)
        check(L.ds_model_create(cstr(spec_json, "spec_json"), out))
        m = new(out[])
        finalizer(close, m)  # ds_model_destroy drops only this reference: safe in a finalizer
        return m
    end
end

"""Drop this reference (`ds_model_destroy`); idempotent."""
function Base.close(m::Model)
    h = m.handle
    m.handle = C_NULL
    h == C_NULL || L.ds_model_destroy(h)
    return nothing
end

"""Number of parameter elements of the model (a tied weight counts once)."""
function num_params(m::Model)
    out = Ref{Int64}(0)
    check(L.ds_model_num_params(m.handle, out))
    return Int(out[])
end
