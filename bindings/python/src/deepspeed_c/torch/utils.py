"""``deepspeed.utils``' full-tensor accessors for parameters trained by
deepspeed_c.torch (``initialize`` or ``Optimizer``).

Each takes the torch parameter, finds its engine and name, and reads or
writes the engine's fp32 master weights, gradient or optimizer state.
Values come back as new fp32 torch tensors of the parameter's shape; values
going in may be torch tensors, numpy arrays or anything with ``__dlpack__``.
As in DeepSpeed, a parameter the engine does not manage gives None (getters)
or is left alone (setters). Writing the fp32 master also refreshes the
working weights the parameter aliases, so ``p`` shows the new value at once.
"""
from __future__ import annotations

from typing import Any, Optional

import torch

from ._binding import binding_of

__all__ = [
    "safe_get_full_fp32_param", "safe_set_full_fp32_param",
    "safe_get_full_grad", "safe_set_full_grad",
    "safe_get_full_optimizer_state", "safe_set_full_optimizer_state",
]


def _where(param: torch.Tensor) -> Optional[tuple]:
    binding = binding_of(param)
    if binding is None:
        return None
    core = binding.core
    if core is None:
        return None
    return core, binding.name


def _to_torch(array: Any) -> torch.Tensor:
    return torch.from_numpy(array.copy()) if not isinstance(array, torch.Tensor) else array.clone()


def _as_input(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().to(torch.float32).contiguous()
    return value


def safe_get_full_fp32_param(param: torch.Tensor) -> Optional[torch.Tensor]:
    """The full fp32 master weights of ``param`` (a copy), or None."""
    where = _where(param)
    if where is None:
        return None
    core, name = where
    return _to_torch(core.get_full_fp32_param(name)).reshape(param.shape)


def safe_set_full_fp32_param(param: torch.Tensor, value: Any) -> None:
    """Overwrite the fp32 master weights of ``param`` (and its working copy,
    which ``param`` aliases) with ``value`` of the parameter's shape."""
    where = _where(param)
    if where is not None:
        core, name = where
        core.set_full_fp32_param(name, _as_input(value))


def safe_get_full_grad(param: torch.Tensor) -> Optional[torch.Tensor]:
    """The gradient accumulated for ``param`` since the last step, as the
    engine holds it (a copy), or None for a frozen or unmanaged parameter."""
    where = _where(param)
    if where is None or not param.requires_grad:
        return None
    core, name = where
    return _to_torch(core.get_full_grad(name)).reshape(param.shape)


def safe_set_full_grad(param: torch.Tensor, value: Any) -> None:
    """Overwrite the gradient accumulated for ``param`` with ``value``."""
    where = _where(param)
    if where is not None and param.requires_grad:
        core, name = where
        core.set_full_grad(name, _as_input(value))


def safe_get_full_optimizer_state(param: torch.Tensor, optim_state_key: str) -> Optional[torch.Tensor]:
    """The optimizer state ``optim_state_key`` of ``param`` ("exp_avg",
    "exp_avg_sq" for Adam/AdamW/Lamb, "exp_avg" for Lion, "momentum_buffer"
    for SGD) as a fp32 copy, or None for an unmanaged parameter."""
    where = _where(param)
    if where is None or not param.requires_grad:
        return None
    core, name = where
    return _to_torch(core.get_full_optimizer_state(name, optim_state_key)).reshape(param.shape)


def safe_set_full_optimizer_state(param: torch.Tensor, value: Any, optim_state_key: str) -> None:
    """Overwrite the optimizer state ``optim_state_key`` of ``param``."""
    where = _where(param)
    if where is not None and param.requires_grad:
        core, name = where
        core.set_full_optimizer_state(name, optim_state_key, _as_input(value))
