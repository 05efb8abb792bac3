"""Process exit with engines still alive (multi-rank runs under tools/ds-run / mpirun).

When the library initialised MPI itself (``Engine(cfg)`` or ``Comm.world()``
under a launcher, no mpi4py), it calls MPI_Finalize at process exit, but only
once no communicator is in use any more: a live communicator's watchdog
thread may be inside MPI. An engine is normally destroyed while Python shuts
down (module globals are cleared before the C exit handlers run), but one
that is never freed (a reference kept by a C extension, a cycle through
objects the garbage collector cannot see, e.g. torch autograd hooks) keeps
its communicator, so MPI is never finalised and mpirun fails the whole job
("exited without calling finalize") although every rank succeeded. With
mpi4py the same leak leaves a communicator alive across mpi4py's own
MPI_Finalize.

So at interpreter exit every Engine and Comm still open is closed. Closing is
local (never collective, never waits on peers): it drops the Python object's
reference to the C handle. Views and tensors made from views keep theirs, so
no memory a live tensor points into is freed; those handles go when the
tensors do, during the rest of the shutdown. The hook is registered when
deepspeed_c is imported, so it runs after the atexit functions registered
later (by the training script: they can still use their engines) and before
mpi4py's finalisation.

An engine whose lock another thread holds (a daemon thread still inside a
call) is left alone rather than waited for: exit must not hang.
"""
from __future__ import annotations

import atexit
import gc
import weakref
from typing import Any

_live: "weakref.WeakSet[Any]" = weakref.WeakSet()


def track(obj: Any) -> None:
    """Remember an Engine or Comm (weakly) so that exit can close it."""
    _live.add(obj)


def close_all() -> int:
    """Close every tracked object that is still open; returns how many were closed."""
    closed = 0
    # Engines first: an engine closes the communicator it made for itself.
    for obj in sorted(_live, key=lambda o: not hasattr(o, "_comm")):
        lock = getattr(obj, "_lock", None)
        if lock is not None and not lock.acquire(blocking=False):
            continue  # another thread is inside a call on it
        try:
            if not obj.closed:
                obj.close()
                closed += 1
        except Exception:  # pragma: no cover - exit must go on
            pass
        finally:
            if lock is not None:
                lock.release()
    _live.clear()
    # Engines only reachable through reference cycles go now, while the
    # interpreter is whole, instead of during module teardown.
    gc.collect()
    return closed


atexit.register(close_all)
