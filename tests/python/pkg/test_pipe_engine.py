"""Engine.train_batch / eval_batch / pipe_info on a world of one: an engine that
is not a pipeline stage refuses them (InvalidStateError naming the pipeline) and
stays usable; a GPT spec asking for two stages is refused by engine creation,
naming pipeline.stages. (The training itself needs several ranks:
tests/mpi/test_pipe_engine.cpp.)"""
from __future__ import annotations

import numpy as np
import pytest

import deepspeed_c as dsc
from deepspeed_c._native import ll

SPEC = {"type": "gpt", "vocab_size": 16, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 16, "seed": 3}
CONFIG = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-2}}}


def batch(rows):
    i = np.arange(rows * 8)
    return ((i * 7 + 3) % 16).reshape(rows, 8).astype(np.int32), ((i * 5 + 1) % 16).reshape(rows, 8).astype(np.int32)


@pytest.mark.parametrize("call", ["train_batch", "eval_batch"])
@pytest.mark.parametrize("args", ["numpy", "lists", "none"])
def test_a_plain_engine_refuses_the_batch_calls(call, args):
    ids, tgt = batch(4)
    given = {"numpy": (ids, tgt), "lists": (ids.tolist(), tgt.tolist()), "none": (None, None)}[args]
    with dsc.Engine(CONFIG, model=dsc.Model(SPEC)) as e:
        with pytest.raises(dsc.InvalidStateError, match="not a pipeline stage") as ei:
            getattr(e, call)(*given)
        assert f"ds_{call}" in str(ei.value)
        assert ei.value.status == ll.DS_ERR_INVALID_STATE


def test_pipe_info_is_refused_and_the_engine_stays_usable():
    ids, tgt = batch(2)
    with dsc.Engine(CONFIG, model=dsc.Model(SPEC)) as e:
        with pytest.raises(dsc.InvalidStateError, match="pipeline"):
            e.pipe_info()
        loss = e(ids, tgt)
        assert np.isfinite(loss) and loss > 0
        e.backward()
        assert not e.step().stepped   # micro-step 1 of 2
        assert e.micro_steps == 1


def test_two_stages_on_a_world_of_one_are_refused():
    model = dsc.Model(dict(SPEC, pipeline={"stages": 2, "partition_method": "parameters"}))
    with pytest.raises(dsc.InvalidArgumentError, match="pipeline.stages") as ei:
        dsc.Engine(CONFIG, model=model)
    assert ei.value.status == ll.DS_ERR_INVALID_ARGUMENT

