"""Owner of one C handle: destroyed when the last Python reference goes.

An Engine (or Comm) holds its handle; so does every View and every DLPack
capsule made from a view. ``close()`` drops the Engine's reference at once,
so the C object lives on only while views or tensors still point into it.
"""
from __future__ import annotations

from typing import Any, Callable, Optional


class Handle:
    __slots__ = ("ptr", "_destroy", "__weakref__")

    def __init__(self, ptr: Any, destroy: Callable[[Any], None]) -> None:
        self.ptr: Optional[Any] = ptr
        self._destroy = destroy

    def __del__(self) -> None:
        ptr, self.ptr = self.ptr, None
        if ptr is not None:
            try:
                self._destroy(ptr)
            except Exception:  # pragma: no cover - interpreter shutdown
                pass
