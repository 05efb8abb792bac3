"""Shared fixtures of the Python package's tests (tests/python/pkg).

The package must be installed in the interpreter running pytest
(scripts/test.sh does `pip install ./bindings/python` into build/pyenv).
"""
from __future__ import annotations

import copy
import os
import sys

import numpy as np
import pytest

import deepspeed_c  # noqa: F401  (fails the run early if the package is missing)

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.dirname(__file__))  # helpers next to the tests

ADAMW_CONFIG = {
    "train_batch_size": 8,
    "train_micro_batch_size_per_gpu": 4,
    "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "betas": [0.9, 0.999], "eps": 1e-8,
                                              "weight_decay": 0.01}},
}


@pytest.fixture
def adamw_config():
    """A small fp32 AdamW config (gradient_accumulation_steps 2); a fresh copy per test."""
    return copy.deepcopy(ADAMW_CONFIG)


@pytest.fixture
def small_engine(adamw_config):
    """An initialised engine with two parameters, w (3x4) and b (4), closed after the test."""
    e = deepspeed_c.Engine(adamw_config)
    rng = np.random.default_rng(0)
    e.add_param("w", rng.standard_normal((3, 4)).astype(np.float32))
    e.add_param("b", np.zeros(4, np.float32))
    e.init()
    yield e
    e.close()


def pytest_report_header(config):
    info = deepspeed_c.build_info()
    return [f"deepspeed_c {deepspeed_c.__version__} (ABI {deepspeed_c.abi_version()}), "
            f"simd {info.get('simd')}, mpi {info.get('mpi')}, from {os.path.dirname(deepspeed_c.__file__)}"]
