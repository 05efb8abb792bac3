"""deepspeed_c._world: engines and communicators still open at interpreter exit
are closed (so the library can finalise MPI), without hanging on an engine
another thread is still inside. Each case runs in a child interpreter, since
closing every open engine would close the other tests' engines too. The
multi-rank consequence (a leaked engine no longer fails the job under
mpirun) is test_multirank.py::test_leaked_engine_does_not_fail_the_job.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD_PREAMBLE = textwrap.dedent("""
    import ctypes, threading, time
    import numpy as np
    import deepspeed_c as dsc
    from deepspeed_c import _world
    CFG = {"train_batch_size": 1, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}
    def engine():
        e = dsc.Engine(CFG)
        e.add_param("w", np.ones(3, np.float32))
        e.init()
        return e
""")


def run_child(body: str, timeout: float = 60) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-c", CHILD_PREAMBLE + textwrap.dedent(body)],
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


def test_close_all_closes_open_engines_and_comms():
    r = run_child("""
        a, b = engine(), engine()
        b.close()
        c = dsc.Comm.world()
        leaked = engine()
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(leaked))   # never freed
        v = a.param("w")                                        # a view outlives the close
        n = _world.close_all()
        print("closed", n, a.closed, b.closed, c.closed, leaked.closed)
        print("view", v.numpy().tolist())
    """)
    # a, leaked (each with the communicator it made for itself) and c; b was closed
    assert "closed 3 True True True True" in r.stdout, r.stdout
    assert "view [1.0, 1.0, 1.0]" in r.stdout, r.stdout            # the view kept its memory


def test_engine_busy_in_another_thread_is_skipped_not_waited_for():
    r = run_child("""
        busy, idle = engine(), engine()
        entered, release = threading.Event(), threading.Event()
        def hold():
            with busy._lock:          # as a thread blocked inside a call would
                entered.set()
                release.wait()
        t = threading.Thread(target=hold, daemon=True)
        t.start()
        entered.wait()
        t0 = time.monotonic()
        n = _world.close_all()
        print("closed", n, busy.closed, idle.closed, "waited %.1f" % (time.monotonic() - t0))
        release.set()
        t.join()
    """)
    # idle (with the communicator it made for itself) and busy's communicator
    # (its Python object: closing it is local, the busy C engine keeps its reference)
    assert "closed 2 False True waited 0.0" in r.stdout, r.stdout


def test_registered_at_exit_and_exit_is_clean():
    """At a normal exit with an engine still open, the hook closes it after the
    atexit functions registered later (which still see it open) and before
    those registered before deepspeed_c was imported; the exit is clean."""
    script = textwrap.dedent("""
        import atexit
        held = []
        atexit.register(lambda: print("registered before import: closed =", held[0].closed))
        import numpy as np
        import deepspeed_c as dsc
        e = dsc.Engine({"train_batch_size": 1, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})
        e.add_param("w", np.ones(3, np.float32))
        e.init()
        held.append(e)
        atexit.register(lambda: print("registered after import: closed =", e.closed))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr
    assert r.stdout.splitlines() == ["registered after import: closed = False",
                                     "registered before import: closed = True"], r.stdout
