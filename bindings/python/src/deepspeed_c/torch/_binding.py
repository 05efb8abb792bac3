"""Handing torch parameters to a core ``deepspeed_c.Engine`` and gradients back.

* ``attach_parameters`` registers each parameter under its
  ``named_parameters()`` name, initialises the engine, then makes ``p.data``
  a zero-copy alias of the engine's working weights (``torch`` tensor over the
  engine's DLPack view). At ZeRO 0-2 (and ZeRO 3 in a world of one) that
  storage is fixed for the engine's life, so the alias stays valid; the
  engine changes the values only inside ``step()``, checkpoint loads and the
  ``set_full_*`` calls.
* ``GradHooks`` calls back once per parameter as soon as autograd has
  accumulated its gradient: ``Tensor.register_post_accumulate_grad_hook`` on
  torch >= 2.1, else a hook on the parameter's ``AccumulateGrad`` node (torch
  1.13 has no post-accumulate hook). The callback hands ``p.grad`` to the
  engine and sets ``p.grad = None``, so a gradient lives in torch only
  until it is copied into the engine's accumulation buffer (memory is not
  doubled, and ZeRO-2 can reduce while backward is still running).
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
import torch.utils.dlpack

import deepspeed_c as _dsc

from ._errors import _DS_ERR_INVALID_STATE, unsupported

# Attribute set on every bound parameter; read by deepspeed_c.torch.utils.
BINDING_ATTR = "_deepspeed_c_binding"

_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


class ParamBinding:
    """Where a torch parameter lives in a core engine: the owner (an object
    with a ``core`` attribute, held weakly) and the parameter's engine name."""

    __slots__ = ("_owner", "name")

    def __init__(self, owner: Any, name: str) -> None:
        self._owner = weakref.ref(owner)
        self.name = name

    @property
    def core(self) -> Optional[Any]:
        """The core ``deepspeed_c.Engine``, or None when its owner is gone or closed."""
        owner = self._owner()
        if owner is None:
            return None
        core = getattr(owner, "core", None)
        if core is None or getattr(core, "closed", False):
            return None
        return core


def binding_of(p: torch.Tensor) -> Optional[ParamBinding]:
    """The binding of a parameter attached by deepspeed_c.torch, else None."""
    return getattr(p, BINDING_ATTR, None)


def detach_parameters(params: Sequence[torch.Tensor]) -> None:
    """Give each parameter a torch-owned copy of its current value and drop
    its binding (the engine is about to be released)."""
    for p in params:
        p.data = p.data.clone()
        if hasattr(p, BINDING_ATTR):
            delattr(p, BINDING_ATTR)


def _check_parameter(name: str, p: torch.Tensor) -> None:
    if p.device.type != "cpu":
        raise unsupported(f"parameter {name!r} is on {p.device}; deepspeed_c.torch trains "
                          "CPU modules (move the model to the CPU before initialize)")
    if p.dtype not in _FLOAT_DTYPES:
        raise unsupported(f"parameter {name!r} has dtype {p.dtype}; only float32, float16 and "
                          "bfloat16 parameters can be trained")


def attach_parameters(owner: Any, core: Any, named: Sequence[Tuple[str, torch.Tensor, bool]],
                      half: Optional[torch.dtype]) -> None:
    """Register ``named`` = [(name, parameter, trainable)] with ``core``, run
    ``core.init()`` and alias every ``p.data`` to the engine's working weights.

    In fp16/bf16 mode each parameter is first cast to ``half`` (as DeepSpeed
    casts the module), so the fp32 master weights start from the 16-bit values
    exactly as DeepSpeed's do.
    """
    for name, p, _ in named:
        _check_parameter(name, p)
        previous = binding_of(p)
        if previous is not None and previous.core is not None:
            raise _dsc.InvalidStateError(
                _DS_ERR_INVALID_STATE,
                f"parameter {name!r} is already trained by another deepspeed_c engine "
                f"(as {previous.name!r}); call its destroy()/close() first")
    for name, p, trainable in named:
        if half is not None and p.dtype != half:
            p.data = p.data.to(half)
        core.add_param(name, p.detach(), trainable=trainable)
    core.init()
    for name, p, _ in named:
        alias = torch.utils.dlpack.from_dlpack(core.param(name))
        if tuple(alias.shape) != tuple(p.shape) or alias.dtype != p.dtype:
            raise RuntimeError(f"deepspeed_c: the engine's view of {name!r} is {tuple(alias.shape)} "
                               f"{alias.dtype}, the parameter is {tuple(p.shape)} {p.dtype}")
        p.data = alias
        setattr(p, BINDING_ATTR, ParamBinding(owner, name))


class GradHooks:
    """Per-parameter hooks that fire once autograd has accumulated ``p.grad``.

    ``on_grad(name, grad)`` receives the gradient; ``p.grad`` is already None
    again when it is called (the callback owns the tensor).
    """

    def __init__(self, on_grad: Callable[[str, torch.Tensor], None]) -> None:
        # Held weakly: the parameters' hooks must not keep the engine alive
        # (no reference cycle, so the engine goes when the script drops it).
        self._on_grad = weakref.WeakMethod(on_grad)  # type: ignore[arg-type]
        self._handles: List[Any] = []
        self._nodes: List[Any] = []  # AccumulateGrad nodes must stay alive (torch < 2.1)

    def add(self, name: str, p: torch.Tensor) -> None:
        """Hook the trainable parameter ``p`` (engine name ``name``)."""
        if hasattr(p, "register_post_accumulate_grad_hook"):
            self._handles.append(
                p.register_post_accumulate_grad_hook(lambda param, n=name: self._fire(n, param)))
        else:
            node = p.expand_as(p).grad_fn.next_functions[0][0]
            self._nodes.append(node)
            self._handles.append(node.register_hook(lambda *_, n=name, param=p: self._fire(n, param)))

    def _fire(self, name: str, param: torch.Tensor) -> None:
        on_grad = self._on_grad()
        grad = param.grad
        if grad is None or on_grad is None:
            return
        param.grad = None
        on_grad(name, grad)

    def remove(self) -> None:
        """Remove every hook (the parameters then collect ``p.grad`` as usual)."""
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._nodes.clear()
