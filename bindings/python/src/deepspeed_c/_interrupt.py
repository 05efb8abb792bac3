"""Ctrl-C during a collective.

A collective blocked on a peer (a rank that died, hangs, or is in another
call) waits up to the communicator's timeout, 30 minutes by default. Python
runs its SIGINT handler only in the main thread and only between bytecodes,
so Ctrl-C could not stop a main thread blocked inside the library. With
several ranks, an engine's calls that may communicate therefore run on a
worker thread while the main thread waits interruptibly. On
KeyboardInterrupt the communicator is aborted (``ds_comm_abort``, callable from
any thread): the blocked collective fails at once with DS_ERR_COMM, the peers'
collectives fail too, and the caller gets a ``CommError`` chained to the
KeyboardInterrupt. The engine is then broken, as after any communicator
failure. A world of one, and calls from threads other than the main thread,
run directly (no thread hop). So does ``accumulate_grad``: it is called once
per parameter per micro-step, and a hop cost ~75 us with two ranks on two
busy cores (bench/python/bench_call_overhead.py under ds-run),
so a ZeRO-2 bucket reduction blocked inside it is not interruptible.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Dict, Optional

from ._native import ll
from .errors import CommError

_STOP = object()


class CallRunner:
    """Runs calls on one worker thread; see the module docstring."""

    def __init__(self, abort: Callable[[str], None]) -> None:
        self._abort = abort
        self._queue: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._thread: Optional[threading.Thread] = None

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            fn, args, box, done = item
            try:
                box["result"] = fn(*args)
            except BaseException as exc:  # handed to the waiting caller
                box["exc"] = exc
            finally:
                done.set()

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args) on the worker; KeyboardInterrupt meanwhile aborts the communicator."""
        if threading.current_thread() is not threading.main_thread():
            return fn(*args)
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="deepspeed_c-calls", daemon=True)
            self._thread.start()
        box: Dict[str, Any] = {}
        done = threading.Event()
        self._queue.put((fn, args, box, done))
        try:
            done.wait()
        except KeyboardInterrupt as interrupt:
            self._abort("KeyboardInterrupt (Ctrl-C) on this rank")
            while True:   # the call now fails fast; further Ctrl-C presses do not leave it running
                try:
                    done.wait()
                    break
                except KeyboardInterrupt:
                    continue
            exc = box.get("exc")
            if isinstance(exc, CommError):
                raise exc from interrupt
            raise CommError(ll.DS_ERR_COMM, "interrupted by KeyboardInterrupt (Ctrl-C): the communicator "
                            "was aborted" + (f" after the call ended ({exc})" if exc else "")) from interrupt
        if "exc" in box:
            raise box["exc"]
        return box.get("result")

    def stop(self) -> None:
        if self._thread is not None:
            self._queue.put(_STOP)
            self._thread = None
