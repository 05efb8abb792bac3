"""Zero-copy views of engine-owned memory (weights and gradient buffers).

A :class:`View` keeps its engine alive: the engine's memory is freed only when
the engine is closed *and* no view, and no tensor made from one (torch, numpy,
JAX through DLPack), is left. Lifetimes of the storage itself follow the
header: at ZeRO 0-2 a view aliases the engine's weights for the engine's
life (values change inside ``step``, ``load_checkpoint`` and ``set_full_*``);
at ZeRO-3 the view of a partitioned parameter dies at its last ``release``.
Views are read-only by contract: writing through one corrupts the working
weights (numpy gets a read-only array; DLPack cannot say read-only, so a
torch tensor made from a view is writable: do not write to it).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from ._native import ll

KDL_CPU = 1

_DTYPES = {(2, 32): "float32", (2, 16): "float16", (4, 16): "bfloat16", (2, 64): "float64"}
_TYPESTR = {"float32": "<f4", "float16": "<f2", "float64": "<f8", "bfloat16": "<u2"}
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


def dtype_name(code: int, bits: int, lanes: int = 1) -> str:
    """The name of a DLPack dtype: "float32", "float16", "bfloat16" or "float64"."""
    name = _DTYPES.get((code, bits))
    if name is None or lanes != 1:
        return f"dl(code={code},bits={bits},lanes={lanes})"
    return name


def _array_interface(view: "View") -> Dict[str, Any]:
    """numpy's read-only array interface over a view (bfloat16 as uint16 bits)."""
    return {"version": 3, "shape": view.shape, "typestr": _TYPESTR[view.dtype],
            "data": (view.data_ptr, True), "strides": None}


class _RawBits:
    """An array interface that any dtype may use, kept as the array's base so
    the view (and so the engine) stays alive."""

    def __init__(self, view: "View") -> None:
        self.view = view
        self.__array_interface__ = _array_interface(view)


class View:
    """A read-only, zero-copy view of one engine tensor (see the module docstring)."""

    __slots__ = ("_owner", "_data", "name", "shape", "dtype", "_code", "_bits", "_lanes",
                 "_device", "__weakref__")

    def __init__(self, owner: Any, name: str, raw: Tuple) -> None:
        data, shape, strides, code, bits, lanes, dev_type, dev_id, byte_offset = raw
        self._owner = owner          # the engine's handle: keeps the memory alive
        self._data = int(data) + int(byte_offset)
        self.name = name
        self.shape: Tuple[int, ...] = tuple(shape)
        self._code, self._bits, self._lanes = code, bits, lanes
        self.dtype: str = dtype_name(code, bits, lanes)
        self._device = (dev_type, dev_id)
        if strides is not None:
            expect, acc = [], 1
            for dim in reversed(self.shape):
                expect.append(acc)
                acc *= max(dim, 1)
            if tuple(reversed(expect)) != tuple(strides):  # the engine's views are row-major
                raise ValueError(f"{name}: unexpected strides {strides}")

    @property
    def data_ptr(self) -> int:
        """The address of the first element."""
        return self._data

    @property
    def numel(self) -> int:
        """The number of elements."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        """The size in bytes."""
        return self.numel * _ITEMSIZE.get(self.dtype, self._bits // 8)

    def __dlpack__(self, stream: Optional[int] = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
        """A legacy ``"dltensor"`` capsule aliasing the engine's memory (keeps the engine alive)."""
        if copy:
            raise BufferError("deepspeed_c.View.__dlpack__: copy=True is not supported (views are zero-copy)")
        if dl_device is not None and tuple(dl_device) != self._device:
            raise BufferError(f"deepspeed_c.View.__dlpack__: the view lives on device {self._device}, "
                              f"not {tuple(dl_device)}")
        return ll.make_capsule(self, self._data, self.shape, self._code, self._bits, self._lanes,
                               self._device[0], self._device[1])

    def __dlpack_device__(self) -> Tuple[int, int]:
        return self._device

    @property
    def __array_interface__(self) -> Dict[str, Any]:
        """Read-only numpy interface (float32/float16; absent for bfloat16, which numpy lacks)."""
        if self.dtype == "bfloat16" or self._device[0] != KDL_CPU:
            raise AttributeError("__array_interface__: bfloat16 has no numpy dtype; use numpy() "
                                 "(raw bits as uint16) or torch.from_dlpack(view)")
        return _array_interface(self)

    def numpy(self) -> Any:
        """A read-only numpy array over the view (bfloat16: the raw bits as uint16)."""
        import numpy as np
        if self.dtype not in _TYPESTR:
            raise TypeError(f"{self.name}: no numpy dtype for {self.dtype}")
        return np.asarray(_RawBits(self))

    def __repr__(self) -> str:
        return f"View({self.name!r}, shape={self.shape}, dtype={self.dtype}, data=0x{self._data:x})"
