"""Ctrl-C during a blocked collective ends in a CommError at once (deepspeed_c._interrupt)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

import multirank_helpers as mh


@pytest.mark.skipif(mh.mpi_available() is not None, reason=str(mh.mpi_available()))
def test_sigint_during_a_blocked_step_raises_comm_error(tmp_path):
    cmd = [sys.executable, mh.DS_RUN, "-n", "2", sys.executable,
           os.path.join(mh.WORKERS, "interrupt_worker.py"), str(tmp_path)]
    proc = subprocess.Popen(cmd, env=mh.worker_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        pid_file = tmp_path / "rank0.pid"
        deadline = time.monotonic() + 60
        while not pid_file.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "rank 0 never reached its step"
            time.sleep(0.05)
        time.sleep(1.0)                 # rank 0 is now blocked inside ds_step
        t0 = time.monotonic()
        os.kill(int(pid_file.read_text()), signal.SIGINT)
        out, err = proc.communicate(timeout=30)   # the communicator timeout is 60 s
        elapsed = time.monotonic() - t0
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert "INTERRUPTED" in out, out + err
    assert "cause KeyboardInterrupt" in out and "KeyboardInterrupt" in out
    assert elapsed < 20, f"took {elapsed:.1f} s after SIGINT"
    assert proc.returncode != 0
