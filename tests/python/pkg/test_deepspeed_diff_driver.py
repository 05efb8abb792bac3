"""The DeepSpeed differential's driver (tests/python/deepspeed_diff/driver.py):
its time budget and its clean-up of DeepSpeed's leaked /dev/shm buffers. These
run without torch or deepspeed (no side process is started)."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "deepspeed_diff"))
driver = pytest.importorskip("driver")


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm on this machine")
def test_shm_buffers_of_one_port_are_removed_and_others_kept():
    uid = os.getuid()
    mine = [f"/dev/shm/deepspeed_allreduce_buffer_{uid}_127.0.0.1_1_{r}" for r in (0, 1)]
    other = f"/dev/shm/deepspeed_allreduce_buffer_{uid}_127.0.0.1_11_0"
    for f in mine + [other]:
        open(f, "w").close()
    try:
        assert driver.remove_shm_buffers(1) == 2
        assert not any(os.path.exists(f) for f in mine)
        assert os.path.exists(other)
    finally:
        for f in mine + [other]:
            if os.path.exists(f):
                os.unlink(f)


def test_side_after_the_deadline_is_not_run(tmp_path):
    res = driver.run_side("deepspeed", "fp32_adamw_warmuplr_clip", str(tmp_path), 900.0, deadline=0.0)
    assert "not_run" in res and res["steps"] == []
    r = driver.row("fp32_adamw_warmuplr_clip", res, {"steps": [], "wall_seconds": 1.0})
    assert r["verdict"] == "NOT-RUN" and "budget" in r["detail"]


def test_spent_budget_lists_every_config_as_not_run_and_passes(tmp_path, capsys):
    rc = driver.main(["--budget-s", "0.5", "--out-dir", str(tmp_path),
                      "--configs", "fp32_adamw_warmuplr_clip,fp32_sgd_onecycle_clip"])
    out = capsys.readouterr().out
    assert rc == 0
    rows = json.load(open(tmp_path / "summary.json"))
    assert [r["verdict"] for r in rows] == ["NOT-RUN", "NOT-RUN"]
    assert "NOT RUN within the 0 s budget (2 of 2)" in out or "NOT RUN within the 1 s budget (2 of 2)" in out
    assert not list(tmp_path.glob("*.log"))  # no side process was started
