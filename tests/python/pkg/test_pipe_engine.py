"""Engine.train_batch / eval_batch / pipe_info on a world of one: an engine that
is not a pipeline stage refuses them (InvalidStateError naming the pipeline) and
stays usable; a GPT spec asking for two stages is refused by engine creation,
naming pipeline.stages, and a bad pipeline object by the model, naming its key.
(The training itself needs several ranks: tests/mpi/test_pipe_engine.cpp.)"""
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



@pytest.mark.parametrize("pipeline,key", [({"stagez": 2}, "pipeline.stagez"), ({"stages": 0}, "pipeline.stages")])
def test_a_bad_pipeline_object_is_refused_naming_the_key(pipeline, key):
    with pytest.raises(dsc.ConfigError, match=key) as ei:
        dsc.Model(dict(SPEC, pipeline=pipeline))
    assert ei.value.status == ll.DS_ERR_INVALID_CONFIG


def _unsplit_reference():
    """The same GPT unsplit in this process (a world of one; a pipeline stage keeps
    the whole model's initial values): batch 0's eval loss, then per batch the mean
    of its micro-batches' training losses, one optimizer step per batch."""
    import pipe_engine_data as D
    with dsc.Engine(D.CONFIG, model=dsc.Model(D.SPEC)) as e:
        ids, tgt = D.batch(0)
        mbs = [slice(m * D.MICRO, (m + 1) * D.MICRO) for m in range(D.GAS)]
        e.eval()
        eval_loss = np.mean([e(ids[s], tgt[s]) for s in mbs])
        e.train()
        losses = []
        for step in range(D.STEPS):
            ids, tgt = D.batch(step)
            micro = []
            for s in mbs:
                micro.append(e(ids[s], tgt[s]))
                e.backward()
                e.step()
            losses.append(np.mean(micro))
        return eval_loss, np.array(losses)


def test_two_stages_on_two_ranks_match_the_unsplit_model(tmp_path):
    """workers/pipe_engine_worker.py on 2 ranks: the losses of eval_batch and of two
    train_batch calls, on both ranks, equal the unsplit model's in one process
    (dropout 0; the second batch runs on weights after one AdamW step, whose
    gradients were summed in another order: rtol 1e-4), and pipe_info describes
    the two stages."""
    import multirank_helpers as H
    import pipe_engine_data as D
    why = H.mpi_available()
    if why:
        pytest.skip(why)
    H.run_ranks("pipe_engine_worker.py", ["--out", str(tmp_path)], ranks=2)
    ranks = [H.load_rank(str(tmp_path), r) for r in range(2)]
    ref_eval, ref_losses = _unsplit_reference()
    for r, got in enumerate(ranks):
        assert float(got["eval_loss"]) == pytest.approx(ref_eval, rel=1e-5), r
        np.testing.assert_allclose(got["losses"][0], ref_losses[0], rtol=1e-5, err_msg=f"rank {r}")
        np.testing.assert_allclose(got["losses"][1], ref_losses[1], rtol=1e-4, err_msg=f"rank {r}")
        assert int(got["global_steps"]) == D.STEPS
    # PipeInfo: (stage_id, num_stages, first_layer, last_layer, num_layers, micro_batches,
    #            data_parallel_size, batch_seconds, compute_seconds, recompute_seconds)
    layers = D.SPEC["n_layer"] + 3   # embedding, the transformer layers, ln_f, the head
    first, last = ranks[0]["after"], ranks[1]["after"]
    assert list(first[:7]) == [0, 2, 0, first[3], layers, D.GAS, 1]
    assert list(last[:7]) == [1, 2, first[3], layers, layers, D.GAS, 1]
    assert 0 < first[3] < layers
    for got in ranks:
        assert np.array_equal(got["before"][:7], got["after"][:7])
        assert got["after"][7] > 0 and 0 < got["after"][8] <= got["after"][7]
