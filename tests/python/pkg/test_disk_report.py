"""Engine.disk_report (ds_engine_disk_report): bytes on disk with
offload_optimizer.device "nvme", zeros without; the swap directory is gone
after close. The NVMe engine's step is checked against the in-memory one."""
from __future__ import annotations

import json
import os

import numpy as np

import deepspeed_c as dsc

N = 3000


def config(nvme_path=None):
    zero = {"stage": 1}
    if nvme_path is not None:
        zero["offload_optimizer"] = {"device": "nvme", "nvme_path": nvme_path, "buffer_count": 2}
        zero["sub_group_size"] = 1024
    return json.dumps({"train_batch_size": 1, "gradient_clipping": 0.0, "zero_optimization": zero,
                       "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.0}}})


def train(e):
    w0 = np.linspace(-1, 1, N).astype(np.float32)
    e.add_param("w", w0)
    e.init()
    for s in range(3):
        e.accumulate_grad("w", (np.sin(np.arange(N) + s) * 0.1).astype(np.float32))
        e.backward()
        e.step()
    return np.array(e.param("w").numpy(), copy=True)


def test_disk_report_counts_the_nvme_state_and_the_step_matches_memory(tmp_path):
    with dsc.Engine(config()) as mem:
        ref = train(mem)
        assert all(v == 0 for v in mem.disk_report().values())
    with dsc.Engine(config(str(tmp_path))) as e:
        got = train(e)
        d = e.disk_report()
        assert d["params_bytes"] >= 4 * N          # the fp32 master
        assert d["optimizer_state_bytes"] >= 8 * N  # exp_avg and exp_avg_sq
        assert d["grads_bytes"] == 0 and d["buffers_bytes"] == 0
        assert d["total_bytes"] == d["params_bytes"] + d["optimizer_state_bytes"]
        on_disk = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(tmp_path) for f in fs)
        assert on_disk >= d["total_bytes"]
    np.testing.assert_array_equal(got, ref)  # offload changes where the state lives, not the numbers
    assert not [f for _, _, fs in os.walk(tmp_path) for f in fs]  # swap files removed at close
