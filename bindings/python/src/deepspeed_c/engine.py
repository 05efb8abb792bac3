"""``deepspeed_c.Engine``: the library's engine for Python hosts (numpy, JAX, frameworks).

The host owns forward and backward; the engine owns the weights (fp32 master
and the working copy), gradient accumulation, loss scaling, clipping, the
optimizer, the LR schedule, ZeRO and checkpoints -- what ``deepspeed.initialize``
gives a PyTorch model. One micro-step::

    w = engine.param("fc.weight")                 # zero-copy view
    loss = forward(w, batch) * engine.loss_multiplier
    engine.accumulate_grad("fc.weight", dloss_dw, predivided=True)
    engine.backward()
    info = engine.step()

Every method holds the engine's lock, and the long calls release the GIL, so
other Python threads run meanwhile but never enter the same engine at once.
"""
from __future__ import annotations

import contextlib
import copy
import json
import os
import threading
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from . import _world
from ._handle import Handle
from ._native import ll
from ._interrupt import CallRunner
from .comm import Comm
from .errors import InvalidStateError, NotFoundError
from .view import KDL_CPU, KDL_CUDA, View, dtype_name

ConfigLike = Union[Dict[str, Any], str, "os.PathLike[str]"]


@dataclass(frozen=True)
class StepInfo:
    """What ``Engine.step()`` did."""
    stepped: bool       #: an accumulation boundary: an optimizer step was attempted
    skipped: bool       #: that step was skipped (fp16 gradient overflow)
    loss_scale: float   #: the loss scale after the call
    grad_norm: float    #: unscaled global gradient norm before clipping (boundary only)
    lr: float           #: the learning rate this step applied (boundary only)
    global_step: int    #: ``global_steps`` after the call


@dataclass(frozen=True)
class PipeInfo:
    """This rank's place in the pipeline and its last batch's timings (``Engine.pipe_info()``)."""
    stage_id: int
    num_stages: int
    first_layer: int          #: the stage's pipeline layers are [first_layer, last_layer)
    last_layer: int
    num_layers: int           #: the model's pipeline layers (n_layer + 3)
    micro_batches: int        #: per batch: gradient_accumulation_steps
    data_parallel_size: int   #: replicas of each stage
    batch_seconds: float      #: the last train_batch/eval_batch, wall clock
    compute_seconds: float    #: of which this stage's forwards, backwards and optimizer step
    recompute_seconds: float  #: of which forwards recomputed before their backward


@dataclass(frozen=True)
class ParamInfo:
    """One registered parameter (``Engine.named_parameters()``)."""
    name: str
    shape: Tuple[int, ...]
    dtype: str          #: the working dtype: "float32", "float16" or "bfloat16"
    trainable: bool
    numel: int
    #: an expert of a built-in MoE layer (DS_PARAM_EXPERT: DeepSpeed's is_moe_param,
    #: the "ep_size_<ep_size>" optimizer group)
    expert: bool = False


def _config_args(config: ConfigLike) -> Tuple[str, bool]:
    """(text, is_path) for a config given as dict, JSON text, or path."""
    if isinstance(config, dict):
        return json.dumps(config), False
    if isinstance(config, (bytes, bytearray)):
        config = config.decode("utf-8")
    if isinstance(config, str):
        if config.lstrip().startswith("{"):
            return config, False
        return config, True
    if isinstance(config, os.PathLike):
        return os.fspath(config), True
    raise TypeError(f"config: expected a dict, JSON text or a path, got {type(config).__name__}")


def tensor_arg(x: Any) -> Any:
    """What the low-level module accepts: an object with __dlpack__ or a buffer.
    Torch tensors that require grad are detached (torch refuses to export them);
    Python numbers and lists become float32 numpy arrays."""
    if getattr(x, "requires_grad", False) and hasattr(x, "detach"):
        x = x.detach()
    if hasattr(x, "__dlpack__") or isinstance(x, memoryview):
        return x
    try:
        memoryview(x)
        return x
    except TypeError:
        import numpy as np
        return np.asarray(x, dtype=np.float32)


def device_arg(device: Any) -> Tuple[int, int]:
    """A DLPack (device_type, device_id) pair for ``device``: None or "cpu", "cuda" (GPU 0),
    "cuda:N", a ``torch.device`` of those types, or such a pair itself ((1, 0) or (2, N))."""
    if device is None:
        return KDL_CPU, 0
    if isinstance(device, tuple) and len(device) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in device):
        if device == (KDL_CPU, 0) or (device[0] == KDL_CUDA and device[1] >= 0):
            return device
        raise ValueError(f"device: {device!r} is not (1, 0) (the CPU) or (2, N) (cuda:N)")
    kind, index = getattr(device, "type", None), getattr(device, "index", None)
    if isinstance(kind, str) and (index is None or isinstance(index, int)):  # a torch.device
        text = kind if index is None else f"{kind}:{index}"
    elif isinstance(device, str):
        text = device
    else:
        raise TypeError(f"device: expected 'cpu', 'cuda', 'cuda:N', a torch.device or a DLPack "
                        f"(device_type, device_id) pair, got {type(device).__name__}")
    if text in ("cpu", "cpu:0"):
        return KDL_CPU, 0
    if text == "cuda":
        return KDL_CUDA, 0
    if text.startswith("cuda:") and text[5:].isascii() and text[5:].isdigit():   # no sign, no spaces
        return KDL_CUDA, int(text[5:])
    raise ValueError(f"device: {device!r} is not 'cpu', 'cuda' or 'cuda:N' (N >= 0)")


def stream_arg(stream: Any, what: str) -> Optional[int]:
    """A ``cudaStream_t`` address (or None) from None, an int or an object with an int
    ``cuda_stream`` attribute (a ``torch.cuda.Stream``)."""
    raw = getattr(stream, "cuda_stream", stream)   # torch.cuda.Stream -> its int
    if raw is not None and (not isinstance(raw, int) or isinstance(raw, bool)):
        raise TypeError(f"{what}: expected None, an int (a cudaStream_t's address) or an object "
                        f"with an int cuda_stream attribute, got {type(stream).__name__}")
    return raw


def _batch_arg(x: Any) -> Any:
    """A token-id batch for the low-level calls: None, a __dlpack__ object, or a
    contiguous numpy array (lists and other array-likes keep their integer dtype)."""
    if x is None or hasattr(x, "__dlpack__"):
        return x
    import numpy as np
    return np.ascontiguousarray(x)


class Engine:
    """A deepspeed_c training engine (see the module docstring).

    Args:
        config: DeepSpeed's JSON config as a dict, JSON text, or a path to a file.
        comm: ``None`` (the launcher's world: ``tools/ds-run``/mpirun, else one rank),
            a :class:`deepspeed_c.Comm`, or an mpi4py communicator.
        log_level: ``deepspeed_c.LOG_*`` (default: ``DS_LOG_LEVEL``, else warnings);
            messages go to the ``deepspeed_c`` logger.
        device: where the engine trains: ``"cpu"`` (default; or None), ``"cuda"`` (GPU 0),
            ``"cuda:N"``, a ``torch.device``, or a DLPack ``(device_type, device_id)``
            pair. On a GPU (ZeRO-Offload: ``zero_optimization.offload_optimizer.device``
            "cpu" at stages 1-3, ``offload_param`` "cpu"/"nvme" at 3; without
            ``offload_optimizer``, device-resident: every buffer on the GPU, ZeRO
            0-3, several ranks reducing and gathering over NCCL, ``offload_param``
            "cpu" at 3) ``param`` views (and a
            device-resident engine's ``grad`` views) live in its memory
            (``torch.from_dlpack`` them; no numpy) and ``accumulate_grad`` takes
            gradients in that GPU's memory (e.g. CUDA torch tensors, through DLPack).
        stream: the CUDA stream a GPU engine orders its work with, as for
            :meth:`set_stream`; must be None on the CPU.
    Raises:
        ConfigError: the config is invalid; the message names the dotted key path.
        UnsupportedError: a DeepSpeed feature this library does not implement; a GPU
            in a build without CUDA, or a GPU config this version does not train
            (ZeRO-Offload at stage 0, device-resident with several ranks in a build
            without NCCL, a ``model`` cut into pipeline stages or sharded by tensor
            parallelism).
        DeviceError: the GPU cannot be selected (no such device, no driver).
        InvalidArgumentError: a stream with the CPU device (names ``options.cuda_stream``).
        ValueError: ``device`` is not one of the forms above (TypeError: not even a
            string, torch.device or pair; ``stream`` as for :meth:`set_stream`).
    """

    def __init__(self, config: ConfigLike, comm: Any = None, *, log_level: Optional[int] = None,
                 model: Any = None, device: Any = "cpu", stream: Any = None) -> None:
        self._lock = threading.RLock()
        self._model = model
        self._handle: Optional[Handle] = None
        self._infos: Optional[List[ParamInfo]] = None
        self._by_name: Dict[str, ParamInfo] = {}
        self._config: Optional[Dict[str, Any]] = None
        text, is_path = _config_args(config)
        dev_type, dev_id = device_arg(device)
        raw_stream = stream_arg(stream, "stream")
        opts = ll.ds_engine_options_t()
        if log_level is not None:
            opts.log_level = int(log_level)
        opts.set_device(dev_type, dev_id)
        opts.set_cuda_stream(raw_stream)
        # The engine's communicator is always held here (the launcher's world
        # when none is given, as ds_engine_create does with NULL), so that
        # Ctrl-C can abort it (deepspeed_c._interrupt).
        self._own_comm = not isinstance(comm, Comm)
        if comm is None:
            comm = Comm.world()
        elif not isinstance(comm, Comm):
            comm = Comm.from_mpi4py(comm)
        self._comm: Comm = comm
        opts.comm = comm._ptr()
        create = ll.ds_engine_create_from_file if is_path else ll.ds_engine_create
        if model is not None:  # deepspeed.initialize(model=..., config=...)
            if is_path:
                with open(text, "r", encoding="utf-8") as f:
                    text = f.read()
            model_ptr = model._ptr()

            def create(cfg: str, o: Any) -> Any:
                return ll.ds_engine_create_with_model(cfg, model_ptr, o)
        runner = CallRunner(comm.abort) if comm.size > 1 else None
        try:   # collective with several ranks (the ranks compare their configs)
            ptr = runner.run(create, text, opts) if runner is not None else create(text, opts)
        except BaseException:
            if runner is not None:
                runner.stop()
            raise
        self._handle = Handle(ptr, ll.ds_engine_destroy)
        self._runner: Optional[CallRunner] = runner
        _world.track(self)  # closed at interpreter exit if still open (see _world)

    def _call(self, fn: Any, *args: Any) -> Any:
        """A call that may communicate: interruptible by Ctrl-C with several ranks."""
        runner = self._runner
        return runner.run(fn, *args) if runner is not None else fn(*args)

    # ---- life cycle ---------------------------------------------------------
    def _h(self) -> Any:
        h = self._handle
        if h is None:
            raise InvalidStateError(ll.DS_ERR_INVALID_HANDLE, "deepspeed_c.Engine: used after close()")
        return h.ptr

    def close(self) -> None:
        """Destroy the engine (local, never collective). Its memory is freed once no
        view or tensor made from a view is left. Later calls raise InvalidStateError."""
        with self._lock:
            self._handle = None
            if self._runner is not None:
                self._runner.stop()
                self._runner = None
            if self._own_comm:
                self._comm.close()   # local; the C engine held its own reference

    @property
    def closed(self) -> bool:
        """True after close()."""
        return self._handle is None

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._handle is None:
            return "Engine(closed)"
        return f"Engine(rank={self.rank}, world_size={self.world_size}, global_steps={self.global_steps})"

    # ---- parameters ---------------------------------------------------------
    def add_param(self, name: str, value: Any, trainable: bool = True) -> None:
        """Register a parameter with its initial value (copied; fp32/fp16/bf16, any shape)."""
        flags = ll.DS_PARAM_TRAINABLE if trainable else 0
        with self._lock:
            ll.ds_engine_add_param(self._h(), name, tensor_arg(value), flags)
            self._infos = None

    def init(self) -> None:
        """Lay out parameters, gradients and optimizer state (collective with several ranks)."""
        with self._lock:
            self._call(ll.ds_engine_init, self._h())
            self._infos = None

    def named_parameters(self) -> List[ParamInfo]:
        """Every registered parameter, in the order added."""
        return list(self._param_infos())

    def _param_infos(self) -> List[ParamInfo]:
        """The cached listing (rebuilt after add_param/init); not a copy."""
        with self._lock:
            if self._infos is None:
                h = self._h()
                infos = []
                for i in range(ll.ds_engine_num_params(h)):
                    name, shape, flags, code, bits, lanes, numel = ll.ds_engine_param_info(h, i)
                    infos.append(ParamInfo(name, tuple(shape), dtype_name(code, bits, lanes),
                                           bool(flags & ll.DS_PARAM_TRAINABLE), numel,
                                           bool(flags & ll.DS_PARAM_EXPERT)))
                self._infos = infos
                self._by_name = {p.name: p for p in infos}
            return self._infos

    def param_info(self, name: str) -> ParamInfo:
        """Name, shape, working dtype, trainable and expert flags and element count of one parameter."""
        self._param_infos()
        try:
            return self._by_name[name]
        except KeyError:
            raise NotFoundError(ll.DS_ERR_NOT_FOUND, f"{name}: no such parameter") from None

    def param(self, name: str) -> View:
        """Zero-copy view of the working weights (read-only by contract; see deepspeed_c.view)."""
        with self._lock:
            return View(self._handle, name, ll.view(self._h(), name, 0))

    def grad(self, name: str) -> View:
        """Zero-copy view of the gradient accumulation buffer (torch's ``p.grad``)."""
        with self._lock:
            return View(self._handle, name, ll.view(self._h(), name, 1))

    # ---- one micro-step -----------------------------------------------------
    def accumulate_grad(self, name: str, grad: Any, *, predivided: bool = False) -> None:
        """Add a gradient. ``predivided=True``: it is d(loss * loss_multiplier)/dp
        (DeepSpeed's order); otherwise the engine divides by gradient_accumulation_steps."""
        flags = ll.DS_GRAD_PREDIVIDED if predivided else 0
        with self._lock:
            ll.ds_engine_accumulate_grad_ex(self._h(), name, tensor_arg(grad), flags)

    def backward(self, out_grad: Any = None) -> None:
        """End the micro-step's backward (gradient reduction at the boundary). With a
        built-in model it first runs the model's backward: of the loss (``out_grad``
        None, after a forward with targets) or of the output with ``out_grad``."""
        with self._lock:
            self._call(ll.ds_backward, self._h(), None if out_grad is None else tensor_arg(out_grad))

    # ---- built-in model (Engine(config, model=deepspeed_c.Model(spec))) ------
    def forward(self, inputs: Any, targets: Any = None) -> Any:
        """``loss = engine(batch)``: with ``targets`` the mean loss (a float), without
        them the model's output (a float32 numpy array, e.g. logits [B, T, vocab])."""
        import numpy as np
        if self._model is None:
            self._h()
            raise InvalidStateError(ll.DS_ERR_INVALID_STATE,
                                    "Engine.forward: this engine has no built-in model (Engine(config, model=...))")
        x = np.ascontiguousarray(inputs) if not hasattr(inputs, "__dlpack__") else inputs
        args = [x] if targets is None else [x, targets if hasattr(targets, "__dlpack__")
                                            else np.ascontiguousarray(targets)]
        if targets is None:
            out = np.empty(self._model.output_shape(tuple(x.shape)), np.float32)
        else:
            out = np.empty((), np.float32)
        with self._lock:
            self._call(ll.ds_forward, self._h(), args, out)
        return float(out) if targets is not None else out

    __call__ = forward

    def eval(self) -> "Engine":
        """= ``engine.eval()``: dropout off, forward keeps nothing for backward."""
        with self._lock:
            ll.ds_engine_eval(self._h(), 1)
        return self

    def train(self) -> "Engine":
        """= ``engine.train()``."""
        with self._lock:
            ll.ds_engine_eval(self._h(), 0)
        return self

    def step(self) -> StepInfo:
        """= ``engine.step()``."""
        with self._lock:
            s, k, scale, norm, lr, gs = self._call(ll.ds_step, self._h())
        return StepInfo(bool(s), bool(k), scale, norm, lr, gs)

    # ---- a pipeline stage (model spec "pipeline": {"stages": S}) ---------------
    def train_batch(self, inputs: Any = None, targets: Any = None) -> float:
        """= DeepSpeed's ``PipelineEngine.train_batch``: gradient_accumulation_steps
        micro-batches through the pipeline, then one optimizer step (collective);
        returns the batch's mean loss (every rank). ``inputs``: token ids
        [gradient_accumulation_steps x micro, T] (int32/int64 numpy or __dlpack__),
        read on the first stage; ``targets`` likewise, read on the last; elsewhere
        either may be None. The step's outcome is in global_steps / skipped_steps."""
        x, y = _batch_arg(inputs), _batch_arg(targets)
        with self._lock:
            loss, _info = self._call(ll.ds_train_batch, self._h(), x, y)
        return float(loss)

    def eval_batch(self, inputs: Any = None, targets: Any = None) -> float:
        """= DeepSpeed's ``PipelineEngine.eval_batch``: the batch's mean loss, dropout
        off, no gradients (collective); arguments as :meth:`train_batch`."""
        x, y = _batch_arg(inputs), _batch_arg(targets)
        with self._lock:
            loss = self._call(ll.ds_eval_batch, self._h(), x, y)
        return float(loss)

    def pipe_info(self) -> PipeInfo:
        """This rank's stage and its last batch's timings."""
        return PipeInfo(*self._get(ll.ds_engine_pipe_info))

    def gather(self, names: Sequence[str]) -> None:
        """ZeRO-3: make the whole weights of ``names`` available (collective)."""
        with self._lock:
            self._call(ll.ds_engine_gather, self._h(), list(names))

    def release(self, names: Sequence[str]) -> None:
        """ZeRO-3: end a gather (local)."""
        with self._lock:
            ll.ds_engine_release(self._h(), list(names))

    @contextlib.contextmanager
    def gathered(self, names: Sequence[str]) -> Iterator[None]:
        """``with engine.gathered(names):`` = DeepSpeed's GatheredParameters."""
        self.gather(names)
        try:
            yield
        finally:
            self.release(names)

    # ---- checkpoints --------------------------------------------------------
    def save_checkpoint(self, save_dir: Union[str, "os.PathLike[str]"], tag: Optional[str] = None,
                        client_state: Any = None) -> str:
        """= ``engine.save_checkpoint``; returns ``<save_dir>/<tag>``. ``client_state``: any JSON-able value."""
        save_dir = os.fspath(save_dir)
        cs = None if client_state is None else json.dumps(client_state)
        with self._lock:
            h = self._h()
            if tag is None:
                tag = f"global_step{ll.ds_engine_global_steps(h)}"
            self._call(ll.ds_save_checkpoint, h, save_dir, tag, cs)
        return os.path.join(save_dir, tag)

    def load_checkpoint(self, load_dir: Union[str, "os.PathLike[str]"], tag: Optional[str] = None,
                        load_optimizer_states: bool = True, load_lr_scheduler_states: bool = True,
                        load_module_only: bool = False, load_module_strict: bool = True) -> Tuple[str, Any]:
        """= ``engine.load_checkpoint``; returns ``(path, client_state)``. Nothing changes on failure."""
        load_dir = os.fspath(load_dir)
        flags = 0
        if not load_optimizer_states:
            flags |= ll.DS_LOAD_NO_OPTIMIZER_STATES
        if not load_lr_scheduler_states:
            flags |= ll.DS_LOAD_NO_LR_SCHEDULER_STATES
        if load_module_only:
            flags |= ll.DS_LOAD_MODULE_ONLY
        if not load_module_strict:
            flags |= ll.DS_LOAD_NON_STRICT
        with self._lock:
            text = self._call(ll.ds_load_checkpoint, self._h(), load_dir, tag, flags)
        if tag is None:
            with open(os.path.join(load_dir, "latest"), encoding="utf-8") as f:
                tag = f.read().strip()
        return os.path.join(load_dir, tag), json.loads(text) if text else {}

    def save_16bit_model(self, save_dir: Union[str, "os.PathLike[str]"], filename: Optional[str] = None,
                         exclude_frozen_parameters: bool = False) -> str:
        """= ``engine.save_16bit_model``: the working weights as one safetensors file; returns its path."""
        save_dir = os.fspath(save_dir)
        flags = ll.DS_SAVE_EXCLUDE_FROZEN if exclude_frozen_parameters else 0
        with self._lock:
            self._call(ll.ds_save_16bit_model_ex, self._h(), save_dir, filename, flags)
        return os.path.join(save_dir, filename or "model.safetensors")

    # ---- full fp32 copies (deepspeed.utils.safe_get_full_* / safe_set_full_*) -----
    def _empty(self, name: str) -> Any:
        import numpy as np
        return np.empty(self.param_info(name).shape, dtype=np.float32)

    def get_full_fp32_param(self, name: str) -> Any:
        """The fp32 master weights (a numpy copy)."""
        out = self._empty(name)
        with self._lock:
            self._call(ll.ds_engine_get_full_fp32_param, self._h(), name, out)
        return out

    def set_full_fp32_param(self, name: str, value: Any) -> None:
        """Set the fp32 master weights (and the working copy, rounded)."""
        with self._lock:
            self._call(ll.ds_engine_set_full_fp32_param, self._h(), name, tensor_arg(value))

    def get_full_grad(self, name: str) -> Any:
        """The accumulated gradient of the current window (a numpy fp32 copy)."""
        out = self._empty(name)
        with self._lock:
            self._call(ll.ds_engine_get_full_grad, self._h(), name, out)
        return out

    def set_full_grad(self, name: str, value: Any) -> None:
        """Set the accumulated gradient (rounded to the accumulation dtype)."""
        with self._lock:
            self._call(ll.ds_engine_set_full_grad, self._h(), name, tensor_arg(value))

    def get_full_optimizer_state(self, name: str, key: str) -> Any:
        """An optimizer state tensor: "exp_avg", "exp_avg_sq", "momentum_buffer" (a numpy copy)."""
        out = self._empty(name)
        with self._lock:
            self._call(ll.ds_engine_get_full_optimizer_state, self._h(), name, key, out)
        return out

    def set_full_optimizer_state(self, name: str, key: str, value: Any) -> None:
        """Set an optimizer state tensor (rounded to the state dtype)."""
        with self._lock:
            self._call(ll.ds_engine_set_full_optimizer_state, self._h(), name, key, tensor_arg(value))

    # ---- counters and settings ----------------------------------------------
    def _get(self, fn: Any) -> Any:
        with self._lock:
            return fn(self._h())

    @property
    def rank(self) -> int:
        """This process's rank in the engine's data-parallel world."""
        return self._get(ll.ds_engine_rank)

    @property
    def world_size(self) -> int:
        """The number of ranks in the engine's data-parallel world."""
        return self._get(ll.ds_engine_world_size)

    @property
    def lr(self) -> float:
        """The learning rate the next optimizer step uses (settable; a schedule overrides it at its next step)."""
        return self._get(ll.ds_engine_get_lr)

    @lr.setter
    def lr(self, value: float) -> None:
        with self._lock:
            ll.ds_engine_set_lr(self._h(), float(value))

    def set_stream(self, stream: Any) -> None:
        """The CUDA stream an engine on a GPU orders its work on (ds_engine_set_stream).

        ``stream`` is ``None`` (the legacy default stream), an int (a ``cudaStream_t``'s
        address, e.g. ``torch.cuda.current_stream().cuda_stream``) or an object with
        such an int as its ``cuda_stream`` attribute (a ``torch.cuda.Stream``). Every
        call on the engine runs its GPU work after the work already queued on the
        stream (a gradient being written, a forward's inputs), and the stream's later
        work runs after the engine's (the weights after step(), a forward's output),
        without blocking the host. The stream must stay valid while the engine uses
        it. Local.

        Raises:
            TypeError: ``stream`` is none of the above.
            InvalidStateError: the engine trains on the CPU (it has no stream).
        """
        raw = stream_arg(stream, "set_stream")
        with self._lock:
            ll.ds_engine_set_stream(self._h(), raw)

    @property
    def loss_scale(self) -> float:
        """The bare loss scale (1 without fp16)."""
        return self._get(ll.ds_engine_loss_scale)

    @property
    def loss_multiplier(self) -> float:
        """loss_scale / gradient_accumulation_steps: what DeepSpeed's backward multiplies the loss by."""
        return self._get(ll.ds_engine_loss_multiplier)

    @property
    def global_steps(self) -> int:
        """Optimizer boundaries passed, skipped ones included (= engine.global_steps)."""
        return self._get(ll.ds_engine_global_steps)

    @property
    def global_samples(self) -> int:
        """Samples consumed (= engine.global_samples)."""
        return self._get(ll.ds_engine_global_samples)

    @property
    def skipped_steps(self) -> int:
        """Boundaries whose step was skipped for overflow (= engine.skipped_steps)."""
        return self._get(ll.ds_engine_skipped_steps)

    @property
    def micro_steps(self) -> int:
        """step() calls so far (= engine.micro_steps)."""
        return self._get(ll.ds_engine_micro_steps)

    def is_gradient_accumulation_boundary(self) -> bool:
        """True if the next step() is an accumulation boundary."""
        return bool(self._get(ll.ds_engine_is_gradient_accumulation_boundary))

    def set_gradient_accumulation_boundary(self, value: bool) -> None:
        """Force the boundary decision (DeepSpeed's set_gradient_accumulation_boundary)."""
        with self._lock:
            ll.ds_engine_set_gradient_accumulation_boundary(self._h(), 1 if value else 0)

    @property
    def config(self) -> Dict[str, Any]:
        """The resolved config (every key with its value or default) as a dict."""
        return copy.deepcopy(self._resolved_config())  # a copy the caller may change

    def _resolved_config(self) -> Dict[str, Any]:
        if self._config is None:
            self._config = json.loads(self._get(ll.ds_engine_config_json))
        return self._config

    def _config_value(self, key: str) -> Any:
        return self._resolved_config()[key]

    @property
    def gradient_accumulation_steps(self) -> int:
        """From the resolved config."""
        return int(self._config_value("gradient_accumulation_steps"))

    @property
    def train_batch_size(self) -> int:
        """From the resolved config (micro batch x accumulation steps x world size)."""
        return int(self._config_value("train_batch_size"))

    @property
    def train_micro_batch_size_per_gpu(self) -> int:
        """From the resolved config."""
        return int(self._config_value("train_micro_batch_size_per_gpu"))

    # ---- offloading states (DeepSpeed's engine.offload_states) ---------------
    def offload_states(self, include: Any = None, device: Any = "cpu", pin_memory: bool = True,
                       non_blocking: bool = False, *, nvme_path: Optional[str] = None) -> None:
        """DeepSpeed's engine.offload_states: move ``include`` (OffloadStateTypeEnum
        members or names; None = every state) to ``device`` (OffloadDeviceEnum or
        "cpu"/"nvme"; "cpu" moves nothing here, the states already live in host
        memory). ``nvme_path`` (NVMe only; None = the config's nvme_path). Until
        reload_states() calls that read them raise InvalidStateError.
        ``pin_memory`` and ``non_blocking`` are accepted for DeepSpeed's signature:
        the move is synchronous and host memory is not pinned."""
        from .offload import device_code, state_bits
        bits, dev = state_bits(include), device_code(device)
        path = None if nvme_path is None else os.fspath(nvme_path)
        with self._lock:
            self._call(ll.ds_engine_offload_states, self._h(), bits, dev, path)

    def reload_states(self, non_blocking: bool = False) -> None:
        """DeepSpeed's engine.reload_states: every offloaded state back, bit-identical
        (a no-op when nothing is out). Synchronous whatever ``non_blocking`` says."""
        with self._lock:
            self._call(ll.ds_engine_reload_states, self._h())

    def empty_partition_cache(self) -> None:
        """DeepSpeed's engine.empty_partition_cache: at ZeRO-3 frees the whole weights
        of gathered parameters (a no-op below ZeRO-3)."""
        with self._lock:
            self._call(ll.ds_engine_empty_partition_cache, self._h())

    def memory_report(self) -> Dict[str, int]:
        """This rank's memory by category, in bytes."""
        vals = self._get(ll.ds_engine_memory_report)
        keys = ("params_bytes", "grads_bytes", "optimizer_state_bytes", "buffers_bytes",
                "total_bytes", "peak_total_bytes")
        return dict(zip(keys, vals))

    def disk_report(self) -> Dict[str, int]:
        """This rank's bytes on disk by category (offload_optimizer.device "nvme":
        the fp32 master weights and the optimizer state; zeros otherwise)."""
        vals = self._get(ll.ds_engine_disk_report)
        keys = ("params_bytes", "grads_bytes", "optimizer_state_bytes", "buffers_bytes",
                "total_bytes", "peak_total_bytes")
        return dict(zip(keys, vals))
