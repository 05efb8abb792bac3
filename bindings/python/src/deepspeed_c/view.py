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

The views of an engine on a GPU (``Engine(..., device="cuda:N")``) live in that
GPU's memory: ``__dlpack_device__`` is ``(2, N)`` (kDLCUDA) and
``torch.from_dlpack(view)`` gives a CUDA tensor over it, while ``numpy()`` and
``numpy.asarray(view)`` refuse (TypeError naming the device) rather than read
device memory from the host. The engine updates the weights before ``step()``
returns, so the consumer's ``stream`` needs no synchronisation.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from ._native import ll

KDL_CPU = 1
KDL_CUDA = 2


def device_name(device: Tuple[int, int]) -> str:
    """A DLPack (device_type, device_id) pair as text: "cpu", "cuda:N", else the pair."""
    if device[0] == KDL_CPU:
        return "cpu"
    if device[0] == KDL_CUDA:
        return f"cuda:{device[1]}"
    return f"DLPack device {tuple(device)}"

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
        """A legacy ``"dltensor"`` capsule aliasing the engine's memory (keeps the engine alive),
        on the view's device. ``stream`` needs no wait: the engine's writes are done when
        its calls return."""
        if copy:
            raise BufferError("deepspeed_c.View.__dlpack__: copy=True is not supported (views are zero-copy)")
        if dl_device is not None and tuple(dl_device) != self._device:
            raise BufferError(f"deepspeed_c.View.__dlpack__: the view lives on device {self._device}, "
                              f"not {tuple(dl_device)}")
        return ll.make_capsule(self, self._data, self.shape, self._code, self._bits, self._lanes,
                               self._device[0], self._device[1])

    def __dlpack_device__(self) -> Tuple[int, int]:
        """DLPack's (device_type, device_id): (1, 0) on the CPU, (2, N) on cuda:N."""
        return self._device

    @property
    def device(self) -> str:
        """Where the elements live: "cpu" or "cuda:N"."""
        return device_name(self._device)

    def _refuse_device(self, what: str) -> None:
        """TypeError for host access (numpy) to a view in device memory."""
        if self._device[0] != KDL_CPU:
            raise TypeError(f"{self.name}: {what}: the view lives in {self.device} memory, which numpy "
                            "cannot read; use torch.from_dlpack(view) (or another DLPack consumer on "
                            "that device) and copy to the host from there")

    @property
    def __array_interface__(self) -> Dict[str, Any]:
        """Read-only numpy interface (float32/float16; absent for bfloat16, which numpy lacks;
        a TypeError for a view in device memory, so ``numpy.asarray`` fails loudly)."""
        self._refuse_device("__array_interface__")
        if self.dtype == "bfloat16":
            raise AttributeError("__array_interface__: bfloat16 has no numpy dtype; use numpy() "
                                 "(raw bits as uint16) or torch.from_dlpack(view)")
        return _array_interface(self)

    def numpy(self) -> Any:
        """A read-only numpy array over the view (bfloat16: the raw bits as uint16).

        Raises:
            TypeError: the view lives in GPU memory (the message names the device).
        """
        import numpy as np
        self._refuse_device("numpy()")
        if self.dtype not in _TYPESTR:
            raise TypeError(f"{self.name}: no numpy dtype for {self.dtype}")
        return np.asarray(_RawBits(self))

    def __repr__(self) -> str:
        where = "" if self._device[0] == KDL_CPU else f", device={self.device}"
        return f"View({self.name!r}, shape={self.shape}, dtype={self.dtype}{where}, data=0x{self._data:x})"
