"""Exceptions of the torch adapter.

Each is a ``deepspeed_c`` exception (so ``except deepspeed_c.DeepSpeedError``
catches everything the package raises) and also the builtin type DeepSpeed
itself raises in the same situation (so a script's ``except AssertionError``
or ``except RuntimeError`` written for DeepSpeed keeps working).
"""
from __future__ import annotations

from typing import Iterable

import deepspeed_c as _dsc

# Status codes of include/deepspeed_c.h (deepspeed_c/base.h; stable ABI values).
_DS_ERR_INVALID_STATE = 3
_DS_ERR_UNSUPPORTED = 5


class EngineUsageError(_dsc.InvalidStateError, AssertionError):
    """A call DeepSpeed refuses with an ``assert`` (``step()`` inside
    ``no_sync()``, ``no_sync()`` at ZeRO stage 2/3, re-entering ``no_sync()``)."""

    def __init__(self, message: str) -> None:
        super().__init__(_DS_ERR_INVALID_STATE, message)


class LossScalingError(_dsc.InvalidStateError, RuntimeError):
    """A plain ``tensor.backward()`` of a loss that was not scaled while fp16
    loss scaling is active (DeepSpeed raises ``RuntimeError`` with the same text)."""

    def __init__(self, message: str) -> None:
        super().__init__(_DS_ERR_INVALID_STATE, message)


def unsupported(message: str) -> _dsc.UnsupportedError:
    """A ``deepspeed_c.UnsupportedError`` (also ``NotImplementedError``)."""
    return _dsc.UnsupportedError(_DS_ERR_UNSUPPORTED, message)


def unsupported_arguments(where: str, names: Iterable[str]) -> _dsc.UnsupportedError:
    """The error for DeepSpeed arguments this adapter does not implement."""
    listed = ", ".join(sorted(names))
    return unsupported(f"{where}: argument(s) not supported by deepspeed_c.torch: {listed} "
                       "(pass None or leave them out)")
