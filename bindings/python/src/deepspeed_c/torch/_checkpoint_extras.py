"""What a DeepSpeed checkpoint holds that the core's checkpoint does not:
the module's persistent buffers (BatchNorm running statistics, ...) and a
``client_state`` that is not JSON (tensors, arbitrary picklable objects).

Both go into one torch file next to the core's files in the tag directory,
written by rank 0. A JSON-able ``client_state`` stays in the core's manifest
as it is; any other is replaced there by a marker naming this file.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional, Tuple

import torch

EXTRAS_FILE = "deepspeed_c_torch_extras.pt"
_MARKER_KEY = "__deepspeed_c_torch_client_state__"


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def persistent_buffers(module: torch.nn.Module) -> Dict[str, torch.Tensor]:
    """The module's ``state_dict`` entries that are buffers, not parameters."""
    state = module.state_dict(keep_vars=True)
    return {k: v.detach().clone() for k, v in state.items()
            if not isinstance(v, torch.nn.Parameter) and isinstance(v, torch.Tensor)}


def split_client_state(client_state: Any) -> Tuple[Any, Optional[Any]]:
    """``(for the core's manifest, for the extras file or None)``."""
    if client_state is None or _is_json(client_state):
        return client_state, None
    return {_MARKER_KEY: EXTRAS_FILE}, client_state


def write_extras(tag_dir: str, buffers: Dict[str, torch.Tensor], pickled_state: Optional[Any]) -> None:
    """Write the extras file into ``tag_dir`` (nothing when there is nothing to keep)."""
    if not buffers and pickled_state is None:
        return
    path = os.path.join(tag_dir, EXTRAS_FILE)
    tmp = path + ".tmp"
    torch.save({"buffers": buffers, "client_state": pickled_state}, tmp)
    os.replace(tmp, path)


def _torch_load(path: str) -> Any:
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except TypeError:  # torch without the weights_only argument
        return torch.load(path, map_location="cpu")


def read_extras(tag_dir: str, client_state: Any, module: torch.nn.Module,
                strict: bool) -> Any:
    """Restore the buffers saved with the checkpoint into ``module`` and return
    the real client_state (the pickled one when the manifest holds the marker)."""
    path = os.path.join(tag_dir, EXTRAS_FILE)
    wants_pickle = isinstance(client_state, dict) and set(client_state) == {_MARKER_KEY}
    if not os.path.exists(path):
        if wants_pickle:
            raise FileNotFoundError(f"checkpoint {tag_dir!r}: its client_state is in {EXTRAS_FILE}, "
                                    "which is missing")
        return client_state
    extras = _torch_load(path)
    buffers = extras.get("buffers") or {}
    if buffers:
        own = dict(module.named_buffers())
        missing = [k for k in buffers if k not in own]
        if missing and strict:
            raise KeyError(f"checkpoint {tag_dir!r} holds buffers the module lacks: {missing}")
        with torch.no_grad():
            for k, v in buffers.items():
                if k in own:
                    own[k].copy_(v.to(own[k].dtype))
    return extras.get("client_state") if wants_pickle else client_state
