"""The GIL is released during long calls, and one engine is never entered twice at once."""
from __future__ import annotations

import sys
import threading
import time

import numpy as np

import deepspeed_c as dsc

N = 16_000_000   # elements: an AdamW step of ~10-50 ms on two cores


def _big_engine():
    e = dsc.Engine({"train_batch_size": 1, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}})
    e.add_param("w", np.zeros(N, np.float32))
    e.init()
    return e


def test_a_python_thread_runs_during_step():
    with _big_engine() as e:
        g = np.full(N, 1e-3, np.float32)
        stamps = []
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                stamps.append(time.perf_counter())

        th = threading.Thread(target=spin)
        old_interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-4)   # GIL hand-overs in Python code take 0.1 ms, not 5
        th.start()
        time.sleep(0.05)
        inside = []
        for _ in range(5):
            e.accumulate_grad("w", g)
            e.backward()
            t0 = time.perf_counter()
            e.step()
            t1 = time.perf_counter()
            inside.append((t0, t1))
        stop.set()
        th.join()
        sys.setswitchinterval(old_interval)
        # With the GIL released the spinning thread keeps stamping through the
        # call (the OS may still preempt it on a busy 2-core machine: judge the
        # best of five; measured 0.2-0.6 with the GIL released); with the GIL held it
        # stops for the whole C call (measured 0.93-1.0).
        stalls = []
        for t0, t1 in inside:
            pts = [t0] + [s for s in stamps if t0 < s < t1] + [t1]
            stalls.append(max(b - a for a, b in zip(pts, pts[1:])) / (t1 - t0))
        assert min(stalls) < 0.75, (
            f"the Python thread stalled for {[round(x, 2) for x in stalls]} of each ds_step "
            f"({[round((b - a) * 1e3, 1) for a, b in inside]} ms)")


def test_two_threads_on_one_engine_are_serialised():
    with _big_engine() as e:
        g = np.full(N, 1e-3, np.float32)
        errors = []

        def micro_steps(n):
            try:
                for _ in range(n):
                    with e._lock:   # one micro-step is accumulate + backward + step
                        e.accumulate_grad("w", g)
                        e.backward()
                        e.step()
            except Exception as exc:  # pragma: no cover - the failure is reported below
                errors.append(exc)

        ths = [threading.Thread(target=micro_steps, args=(3,)) for _ in range(2)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        assert not errors
        assert e.global_steps == 6


def test_concurrent_calls_without_the_lock_never_crash():
    # Each method takes the engine lock itself; interleaved calls from two
    # threads may fail with InvalidStateError (calls out of order) but
    # must not corrupt anything.
    with _big_engine() as e:
        g = np.full(N, 1e-3, np.float32)
        outcomes = []

        def worker():
            for _ in range(3):
                try:
                    e.accumulate_grad("w", g)
                    e.backward()
                    e.step()
                    outcomes.append("ok")
                except dsc.InvalidStateError as exc:
                    outcomes.append(str(exc))

        ths = [threading.Thread(target=worker) for _ in range(2)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        assert len(outcomes) == 6
        assert e.global_steps >= 1
