"""Communicators: the group of ranks an engine trains with.

``Comm.world()`` is the world the launcher started (``tools/ds-run``,
``mpirun``, ``srun``; a world of one otherwise); ``Comm.from_mpi4py(c)`` wraps
an mpi4py communicator (duplicated; yours is never freed). Engines keep
their communicator alive, so the order of ``close()`` calls is free. No
mpi4py is needed for ``Comm.world()``.
"""
from __future__ import annotations

import threading
from typing import Any, Optional

from . import _world
from ._handle import Handle
from ._native import ll
from .errors import InvalidStateError

BACKENDS = {ll.DS_COMM_BACKEND_LOCAL: "local", ll.DS_COMM_BACKEND_MPI: "mpi",
            ll.DS_COMM_BACKEND_NCCL: "nccl"}
_BACKEND_CODES = {"auto": ll.DS_COMM_BACKEND_AUTO, "local": ll.DS_COMM_BACKEND_LOCAL,
                  "mpi": ll.DS_COMM_BACKEND_MPI, "nccl": ll.DS_COMM_BACKEND_NCCL}


def _options(timeout_ms: Optional[int], backend: Optional[str], debug: Optional[bool]) -> Any:
    o = ll.ds_comm_options_t()
    if timeout_ms is not None:
        o.timeout_ms = int(timeout_ms)
    if backend is not None:
        if backend not in _BACKEND_CODES:
            raise ValueError(f"backend: {backend!r} is not one of {sorted(_BACKEND_CODES)}")
        o.backend = _BACKEND_CODES[backend]
    if debug is not None:
        o.debug = 1 if debug else 0
    return o


_OPS = {"sum": ll.DS_REDUCE_SUM, "avg": ll.DS_REDUCE_AVG, "max": ll.DS_REDUCE_MAX}


def _op(op: Any) -> int:
    """A reduction by name ("sum", "avg", "max", any case, as deepspeed.comm's ReduceOp
    members are spelled) or by its DS_REDUCE_* value (checked by the library)."""
    if isinstance(op, str):
        try:
            return _OPS[op.lower()]
        except KeyError:
            raise ValueError(f"op {op!r}: expected 'sum', 'avg' or 'max'") from None
    return int(getattr(op, "value", op))


class Comm:
    """A deepspeed_c communicator (see the module docstring)."""

    def __init__(self, _ptr: Any) -> None:
        self._handle: Optional[Handle] = Handle(_ptr, ll.ds_comm_destroy)
        self._lock = threading.RLock()
        _world.track(self)  # closed at interpreter exit if still open (see _world)

    @classmethod
    def world(cls, timeout_ms: Optional[int] = None, backend: Optional[str] = None,
              debug: Optional[bool] = None) -> "Comm":
        """The launcher's world (collective under mpirun/ds-run; one rank otherwise)."""
        return cls(ll.ds_comm_create_world(_options(timeout_ms, backend, debug)))

    @classmethod
    def from_mpi4py(cls, mpi_comm: Any, timeout_ms: Optional[int] = None,
                    debug: Optional[bool] = None) -> "Comm":
        """Wrap an mpi4py intra-communicator (MPI must be initialised with MPI_THREAD_MULTIPLE)."""
        if not hasattr(mpi_comm, "py2f"):
            raise TypeError(f"comm: expected an mpi4py communicator, got {type(mpi_comm).__name__}")
        return cls(ll.ds_comm_create_mpi(int(mpi_comm.py2f()), _options(timeout_ms, None, debug)))

    def _ptr(self) -> Any:
        h = self._handle
        if h is None:
            raise InvalidStateError(ll.DS_ERR_INVALID_HANDLE, "deepspeed_c.Comm: used after close()")
        return h.ptr

    @property
    def rank(self) -> int:
        """This process's rank."""
        return ll.ds_comm_rank(self._ptr())

    @property
    def size(self) -> int:
        """The number of ranks."""
        return ll.ds_comm_size(self._ptr())

    @property
    def backend(self) -> str:
        """"local", "mpi" or "nccl"."""
        return BACKENDS.get(ll.ds_comm_backend(self._ptr()), "unknown")

    def split(self, color: int, key: int = 0) -> Optional["Comm"]:
        """MPI_Comm_split, collective: ranks with the same ``color >= 0`` form a new
        communicator ranked by ``key`` (ties: their rank here); a negative color joins
        none and returns None."""
        with self._lock:
            ptr = ll.ds_comm_split(self._ptr(), int(color), int(key))
        return None if ptr is None else Comm(ptr)

    # Collectives on whole tensors (numpy, or anything with __dlpack__), deepspeed.comm's
    # names and rules; outputs are written in place and returned. Host arrays for the
    # local and MPI backends; on an NCCL communicator, tensors on its GPU (a torch CUDA
    # tensor's __dlpack__ orders its stream before the legacy default stream, which the
    # communicator's stream follows).
    def all_reduce(self, tensor: Any, op: Any = "sum") -> Any:
        """In place: ``tensor`` becomes the reduction (``"sum"``, ``"avg"``, ``"max"``) over the ranks."""
        with self._lock:
            ll.ds_comm_all_reduce(self._ptr(), tensor, _op(op))
        return tensor

    def all_gather_into_tensor(self, output: Any, input: Any) -> Any:
        """``output`` (size x input's elements) gets every rank's ``input`` in rank order."""
        from .engine import tensor_arg
        with self._lock:
            ll.ds_comm_all_gather_into_tensor(self._ptr(), output, tensor_arg(input))
        return output

    def reduce_scatter_tensor(self, output: Any, input: Any, op: Any = "sum") -> Any:
        """``input`` holds size x output's elements; block ``rank`` of the reduction lands in ``output``."""
        from .engine import tensor_arg
        with self._lock:
            ll.ds_comm_reduce_scatter_tensor(self._ptr(), output, tensor_arg(input), _op(op))
        return output

    def all_to_all_single(self, output: Any, input: Any) -> Any:
        """Equal splits: block j of ``input`` goes to rank j, block i of ``output`` comes from rank i."""
        from .engine import tensor_arg
        with self._lock:
            ll.ds_comm_all_to_all_single(self._ptr(), output, tensor_arg(input))
        return output

    def broadcast(self, tensor: Any, src: int) -> Any:
        """``tensor`` becomes rank ``src``'s on every rank."""
        with self._lock:
            ll.ds_comm_broadcast(self._ptr(), tensor, int(src))
        return tensor

    def barrier(self) -> None:
        """Returns when every rank has entered it."""
        with self._lock:
            ll.ds_comm_barrier(self._ptr())

    def pipe_send(self, tensor: Any, peer: int, tag: int = 0) -> None:
        """deepspeed_c.pipe.pipe_send on this communicator."""
        from .pipe import pipe_send
        pipe_send(self, tensor, peer, tag)

    def pipe_recv(self, out: Any, peer: int, tag: int = 0) -> Any:
        """deepspeed_c.pipe.pipe_recv on this communicator; returns ``out``."""
        from .pipe import pipe_recv
        return pipe_recv(self, out, peer, tag)

    def finalize(self) -> None:
        """Collective teardown (and MPI_Finalize when the library initialised MPI)."""
        with self._lock:
            ll.ds_comm_finalize(self._ptr())

    def abort(self, reason: str = "aborted from Python") -> None:
        """Break the communicator; callable from any thread, also during a blocked collective."""
        ll.ds_comm_abort(self._ptr(), reason)

    def close(self) -> None:
        """Release this handle (local; engines using the communicator keep it alive)."""
        self._handle = None

    @property
    def closed(self) -> bool:
        """True after close()."""
        return self._handle is None

    def __enter__(self) -> "Comm":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._handle is None:
            return "Comm(closed)"
        return f"Comm(rank={self.rank}, size={self.size}, backend={self.backend!r})"
