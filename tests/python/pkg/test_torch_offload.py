"""deepspeed_c.torch's DeepSpeedEngine.offload_states / reload_states /
empty_partition_cache with DeepSpeed's signature: moving the optimizer
states, master weights and gradients to NVMe around an evaluation and back
leaves training bit-identical to an engine that never offloaded."""
import pytest

torch = pytest.importorskip("torch")
import deepspeed_c  # noqa: E402
import deepspeed_c.torch as ds  # noqa: E402
import torch_helpers as th  # noqa: E402


def _step(engine, x, y):
    loss = th.mse(engine, x, y)
    engine.backward(loss)
    engine.step()
    return loss.item()


def test_offload_around_eval_is_bit_identical(tmp_path):
    data = th.batches(6)
    a, *_ = ds.initialize(model=th.mlp(), config=th.config())
    b, *_ = ds.initialize(model=th.mlp(), config=th.config())
    for x, y in data[:3]:
        assert _step(a, x, y) == _step(b, x, y)
    a.offload_states(include=[deepspeed_c.OffloadStateTypeEnum.optim_states,
                              deepspeed_c.OffloadStateTypeEnum.hp_params,
                              deepspeed_c.OffloadStateTypeEnum.lp_grads],
                     device=deepspeed_c.OffloadDeviceEnum.nvme, pin_memory=True, non_blocking=False,
                     nvme_path=str(tmp_path))
    assert a.core.disk_report()["optimizer_state_bytes"] > 0
    a.eval(); b.eval()
    with torch.no_grad():
        x, y = data[3]
        assert torch.equal(a(x), b(x))
    a.train(); b.train()
    with pytest.raises(deepspeed_c.InvalidStateError, match="reload_states"):
        a.step()
    a.reload_states(non_blocking=False)
    a.empty_partition_cache()
    for x, y in data[3:]:
        assert _step(a, x, y) == _step(b, x, y)
    for p, q in zip(a.module.parameters(), b.module.parameters()):
        assert torch.equal(p, q)
    a.offload_states()  # DeepSpeed's defaults: every state to the CPU, where they already are
    a.reload_states()
