#!/usr/bin/env python3
"""Writes tests/data/pipe/partitions.txt from DeepSpeed itself.

DeepSpeed's own stage boundaries (an independent reference for
src/pipe/partition.cpp): run with a Python that has deepspeed installed, e.g.
    ~/.cache/deepspeed_c/diffvenv/bin/python tests/tools/gen_pipe_partition_fixtures.py

One case per block:
    P <method> <num_stages> <num_layers>
    W <param count per layer>          (method parameters)
    N <type name per layer>            (method type:<regex>)
    R <num_stages + 1 boundaries>      (DeepSpeed's parts)
    E
"uniform" comes from deepspeed.runtime.utils.partition_uniform, "parameters"
from partition_balanced over the counts, "type:" from PipelineModule's own
_find_layer_type (on LayerSpecs of classes with those names) and then
partition_balanced over its 0/1 weights, which is what _partition_layers does.
"""
import logging
import os
import random

logging.disable(logging.WARNING)
import torch  # noqa: E402
from deepspeed.runtime import utils as ds_utils  # noqa: E402
from deepspeed.runtime.pipe.module import LayerSpec, PipelineModule  # noqa: E402
import deepspeed  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "pipe", "partitions.txt")


class _Specs:
    """Just what PipelineModule._find_layer_type reads."""

    def __init__(self, names):
        self._layer_specs = [LayerSpec(type(n, (torch.nn.Module,), {})) for n in names]


def write_case(out, method, stages, n, parts, weights=None, names=None):
    out.write(f"P {method} {stages} {n}\n")
    if weights is not None:
        out.write("W " + " ".join(str(w) for w in weights) + "\n")
    if names is not None:
        out.write("N " + " ".join(names) + "\n")
    out.write("R " + " ".join(str(int(p)) for p in parts) + "\n")
    out.write("E\n")


def main():
    rng = random.Random(7)
    with open(OUT, "w") as out:
        out.write(f"# DeepSpeed {deepspeed.__version__}: tests/tools/gen_pipe_partition_fixtures.py\n")
        for n in (0, 1, 2, 3, 5, 8, 12, 13, 26, 40):
            for stages in (1, 2, 3, 4, 7, 8):
                write_case(out, "uniform", stages, n, ds_utils.partition_uniform(n, stages))
        # A GPT as DeepSpeed users list it: embedding, L blocks, final norm, head.
        for L, C, V in ((4, 64, 128), (12, 768, 50257), (6, 384, 8192)):
            block = 12 * C * C + 13 * C
            weights = [V * C + 1024 * C] + [block] * L + [2 * C, V * C]
            for stages in (1, 2, 3, 4):
                write_case(out, "parameters", stages, len(weights),
                           ds_utils.partition_balanced(weights, stages), weights=weights)
        for trial in range(30):
            n = rng.randint(1, 14)
            weights = [rng.choice((0, 1, 5, 100, rng.randint(0, 10**6))) for _ in range(n)]
            stages = rng.randint(1, 6)
            write_case(out, "parameters", stages, n, ds_utils.partition_balanced(weights, stages), weights=weights)
        kinds = ["Embedding", "TransformerLayer", "LayerNorm", "Linear", "ParallelTransformerLayerPipe", "Dropout"]
        for pattern in ("transformer", "TransformerLayer", "^linear$", "norm|drop", "Layer"):
            for trial in range(6):
                n = rng.randint(1, 12)
                names = [rng.choice(kinds) for _ in range(n)]
                try:
                    idxs = PipelineModule._find_layer_type(_Specs(names), pattern.lower())
                except RuntimeError:
                    continue  # matches none: the test checks that error on its own
                binary = [0] * n
                for i in idxs:
                    binary[i] = 1
                stages = rng.randint(1, 5)
                write_case(out, "type:" + pattern, stages, n, ds_utils.partition_balanced(binary, stages),
                           names=names)


if __name__ == "__main__":
    main()
