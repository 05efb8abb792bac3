"""``deepspeed_c.Model``: a built-in model from a JSON spec (docs/MODELS.md).

    model = deepspeed_c.Model({"type": "gpt", "vocab_size": 64, "block_size": 16,
                               "n_layer": 2, "n_head": 2, "n_embd": 32})
    engine = deepspeed_c.Engine(config, model=model)
    loss = engine(ids, targets)        # = engine.forward(ids, targets)
    engine.backward()
    engine.step()
"""
from __future__ import annotations

import json
from typing import Any, Dict, Optional, Tuple, Union

from ._handle import Handle
from ._native import ll
from .errors import InvalidStateError

SpecLike = Union[Dict[str, Any], str]


def _out_width(spec: Dict[str, Any]) -> Tuple[bool, int]:
    """(the input is token ids, the output's last dimension) of a valid spec."""
    if spec.get("type") == "gpt":
        return True, int(spec["vocab_size"])
    ids, width = False, 0
    for i, layer in enumerate(spec.get("layers", [])):
        t = layer.get("type")
        if t == "linear":
            width = int(layer["out_features"])
        elif t == "layernorm":
            width = int(layer["dim"])
        elif t == "embedding":
            ids, width = (i == 0) or ids, int(layer["embedding_dim"])
        elif t == "transformer_layer":
            width = int(layer["hidden_size"])
    return ids, width


class Model:
    """A model built by the library (``ds_model_create``); its parameters are
    initialised from the spec's ``seed``.

    Raises:
        ConfigError: the spec is invalid; the message names the key path and the rule.
    """

    def __init__(self, spec: SpecLike) -> None:
        text = json.dumps(spec) if isinstance(spec, dict) else str(spec)
        self._handle: Optional[Handle] = None
        ptr = ll.ds_model_create(text)
        self._handle = Handle(ptr, ll.ds_model_destroy)
        self._spec: Dict[str, Any] = json.loads(text)
        self._ids_input, self._out_width = _out_width(self._spec)

    def _ptr(self) -> Any:
        h = self._handle
        if h is None:
            raise InvalidStateError(ll.DS_ERR_INVALID_HANDLE, "deepspeed_c.Model: used after close()")
        return h.ptr

    @property
    def spec(self) -> Dict[str, Any]:
        """The spec as given (a copy)."""
        return json.loads(json.dumps(self._spec))

    @property
    def num_params(self) -> int:
        """Parameter elements (a tied weight counts once)."""
        return int(ll.ds_model_num_params(self._ptr()))

    def output_shape(self, input_shape: Tuple[int, ...]) -> Tuple[int, ...]:
        """The forward's output shape for an input of ``input_shape``:
        [B, T, width] for token ids, [B, width] for features."""
        if self._ids_input:
            return (int(input_shape[0]), int(input_shape[1]), self._out_width)
        return (int(input_shape[0]), self._out_width)

    def close(self) -> None:
        """Drop this reference (an engine made with the model keeps it alive)."""
        self._handle = None

    def __repr__(self) -> str:
        return f"Model(type={self._spec.get('type')!r}, closed={self._handle is None})"
