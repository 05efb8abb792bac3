"""deepspeed_c.torch: DeepSpeed's PyTorch entry points over the deepspeed_c library.

A DeepSpeed training script runs unchanged but for its import line::

    import deepspeed_c.torch as deepspeed
    engine, optimizer, _, lr_scheduler = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=ds_config)
    for batch in data:
        loss = engine(batch)
        engine.backward(loss)
        engine.step()

``Optimizer(params, config)`` embeds the engine as a ``torch.optim.Optimizer``
instead; ``deepspeed_c.torch.utils`` has the ``safe_get_full_*`` accessors.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import torch

from . import utils
from ._config import ConfigLike, load_config
from ._errors import EngineUsageError, LossScalingError, unsupported_arguments
from .engine import DeepSpeedEngine
from .optimizer import EngineOptimizer, Optimizer
from .scheduler import EngineLRScheduler

__all__ = ["initialize", "DeepSpeedEngine", "Optimizer", "EngineOptimizer", "EngineLRScheduler",
           "EngineUsageError", "LossScalingError", "utils"]


def initialize(args: Any = None, model: Optional[torch.nn.Module] = None, optimizer: Any = None,
               model_parameters: Any = None, training_data: Any = None, lr_scheduler: Any = None,
               distributed_port: Any = None, mpu: Any = None, dist_init_required: Optional[bool] = None,
               collate_fn: Any = None, config: Optional[ConfigLike] = None, mesh_param: Any = None,
               config_params: Optional[ConfigLike] = None, comm: Any = None
               ) -> Tuple[DeepSpeedEngine, Optional[EngineOptimizer], None, Optional[EngineLRScheduler]]:
    """``deepspeed.initialize`` over a deepspeed_c engine.

    ``model``: a CPU ``torch.nn.Module``; its parameters are registered with
    the engine under their ``named_parameters()`` names (frozen ones as not
    trainable) and become zero-copy views of the engine's working weights
    (fp16/bf16 when that mode is on, as DeepSpeed casts the module).
    ``model_parameters``: None (all parameters), parameters, or param-group
    dicts without per-group settings; parameters left out are frozen.
    ``config`` (or its alias ``config_params``, or ``args.deepspeed_config``):
    a dict, JSON text or JSON file path; it must hold the ``optimizer`` section
    (and ``scheduler`` for a schedule). ``comm``: None (the world of the
    launcher, or one rank), a ``deepspeed_c.Comm`` or an mpi4py communicator.

    Returns ``(engine, optimizer, None, lr_scheduler)``: the optimizer and
    scheduler report the engine's state; ``lr_scheduler`` is None without a
    ``scheduler`` section. A client optimizer or scheduler object,
    ``training_data``, ``collate_fn``, ``mpu``, ``mesh_param``,
    ``distributed_port`` or ``dist_init_required=False`` raise
    ``UnsupportedError`` naming them.
    """
    refused = {name for name, value in (("optimizer", optimizer), ("lr_scheduler", lr_scheduler),
                                        ("training_data", training_data), ("collate_fn", collate_fn),
                                        ("mpu", mpu), ("mesh_param", mesh_param),
                                        ("distributed_port", distributed_port)) if value is not None}
    if dist_init_required is False:
        refused.add("dist_init_required=False")
    if refused:
        raise unsupported_arguments("deepspeed_c.torch.initialize", refused)
    if model is None:
        raise ValueError("deepspeed_c.torch.initialize: model is required")
    if config is not None and config_params is not None:
        raise ValueError("deepspeed_c.torch.initialize: give config or config_params, not both")
    source = config if config is not None else config_params
    if source is None and args is not None:
        source = getattr(args, "deepspeed_config", None)
    if source is None:
        raise ValueError("deepspeed_c.torch.initialize: a config is required (config=, "
                         "config_params= or args.deepspeed_config)")
    engine = DeepSpeedEngine(model, load_config(source), model_parameters=model_parameters, comm=comm)
    return engine, engine.optimizer, None, engine.lr_scheduler
