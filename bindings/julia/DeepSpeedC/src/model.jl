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
        return _owned(new(out[]))  # ds_model_destroy drops only this reference: safe in a finalizer
    end
end

"""Drop this reference (`ds_model_destroy`); idempotent."""
Base.close(m::Model) = _close_handle!(m, L.ds_model_destroy)

"""Number of parameter elements of the model (a tied weight counts once)."""
num_params(m::Model) = _handle_int(L.ds_model_num_params, m; out_type = Int64)
