"""Pipeline parallelism: process topologies, pipeline schedules and
point-to-point sends between stages.

``Topology`` is DeepSpeed's ``ProcessTopology`` (deepspeed/runtime/pipe/topology.py)
with its method names (``get_rank(pipe=1, data=0)``, ``get_coord``,
``get_axis_comm_lists``, ``filter_match``, ``get_rank_repr``, ...), plus
``comm(axis, world)`` / ``group_comm(axes, world)`` that build this rank's
communicator along axes. ``ProcessTopology``, ``PipeDataParallelTopology``
and ``PipeModelDataParallelTopology`` are DeepSpeed's spellings.

``PipeSchedule`` yields ``PipeInstr`` named tuples (``name`` is DeepSpeed's
instruction class name: "LoadMicroBatch", "ForwardPass", ...) in DeepSpeed's
order; ``TrainSchedule``, ``InferenceSchedule`` and ``DataParallelSchedule``
make one like DeepSpeed's classes do (``micro_batches, stages, stage_id``).
``partition_layers`` gives the stage boundaries DeepSpeed's PipelineModule
computes for ``partition_method`` ("uniform", "parameters", "type:<regex>").
``pipe_send`` / ``pipe_recv`` move host arrays (numpy, or anything with
``__dlpack__``) between ranks of a communicator.
"""
from __future__ import annotations

import collections
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from ._handle import Handle
from ._native import ll
from .comm import Comm
from .errors import InvalidStateError

KINDS = {"train": ll.DS_PIPE_SCHEDULE_TRAIN, "inference": ll.DS_PIPE_SCHEDULE_INFERENCE,
         "data_parallel": ll.DS_PIPE_SCHEDULE_DATA_PARALLEL}


class PipeInstr(NamedTuple):
    """One instruction: ``name`` (DeepSpeed's class name), ``type`` (DS_PIPE_INSTR_*),
    ``buffer_id`` (-1 for the reductions and the optimizer step), ``step``, and
    ``micro_batch`` (-1 for the reductions and the optimizer step)."""
    name: str
    type: int
    buffer_id: int
    step: int
    micro_batch: int


def _instr(t: Tuple[int, int, int, int]) -> PipeInstr:
    return PipeInstr(ll.ds_pipe_instr_name(t[0]), t[0], t[1], t[2], t[3])


class PipeSchedule:
    """A schedule for one batch on stage ``stage_id`` of ``stages``.

    Iterating yields every instruction from the first (each ``for`` loop starts
    over); ``steps()`` yields DeepSpeed's per-step lists, bubbles as ``[]``.
    """

    def __init__(self, kind: str, micro_batches: int, stages: int, stage_id: int) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind: {kind!r} is not one of {sorted(KINDS)}")
        self.kind = kind
        self.micro_batches, self.stages, self.stage_id = int(micro_batches), int(stages), int(stage_id)
        self._handle: Optional[Handle] = Handle(
            ll.ds_pipe_schedule_create(KINDS[kind], self.micro_batches, self.stages, self.stage_id),
            ll.ds_pipe_schedule_destroy)

    def _ptr(self) -> Any:
        if self._handle is None:
            raise InvalidStateError(ll.DS_ERR_INVALID_HANDLE, "deepspeed_c.PipeSchedule: used after close()")
        return self._handle.ptr

    def __iter__(self) -> Iterator[PipeInstr]:
        p = self._ptr()
        ll.ds_pipe_schedule_reset(p)
        while True:
            t, done = ll.ds_pipe_schedule_next(p)
            if done:
                return
            yield _instr(t)

    def steps(self) -> Iterator[List[PipeInstr]]:
        """DeepSpeed's ``steps()``: one list per step (``[]`` for a bubble)."""
        for s in range(self.num_steps):
            yield self.step_instrs(s)

    def step_instrs(self, step: int) -> List[PipeInstr]:
        """The instructions of ``step`` (random access; ``[]`` for a bubble)."""
        p = self._ptr()
        return [_instr(ll.ds_pipe_schedule_instr(p, step, i)) for i in range(ll.ds_pipe_schedule_step_size(p, step))]

    @property
    def num_pipe_buffers(self) -> int:
        """DeepSpeed's ``num_pipe_buffers()``: buffer_id is below it."""
        return ll.ds_pipe_schedule_num_buffers(self._ptr())

    @property
    def num_steps(self) -> int:
        """Steps, counting the bubbles."""
        return ll.ds_pipe_schedule_num_steps(self._ptr())

    def close(self) -> None:
        """Release the schedule; later calls raise InvalidStateError."""
        self._handle = None

    def __repr__(self) -> str:
        return (f"PipeSchedule({self.kind!r}, micro_batches={self.micro_batches}, stages={self.stages}, "
                f"stage_id={self.stage_id})")


def TrainSchedule(micro_batches: int, stages: int, stage_id: int) -> PipeSchedule:
    """DeepSpeed's TrainSchedule (synchronous 1F1B)."""
    return PipeSchedule("train", micro_batches, stages, stage_id)


def InferenceSchedule(micro_batches: int, stages: int, stage_id: int) -> PipeSchedule:
    """DeepSpeed's InferenceSchedule."""
    return PipeSchedule("inference", micro_batches, stages, stage_id)


def DataParallelSchedule(micro_batches: int, stages: int, stage_id: int) -> PipeSchedule:
    """DeepSpeed's DataParallelSchedule."""
    return PipeSchedule("data_parallel", micro_batches, stages, stage_id)


class Topology:
    """Named axes over the ranks, the last axis varying fastest (= ProcessTopology(axes, dims))."""

    def __init__(self, axes: Sequence[str], dims: Sequence[int], *, _ptr: Any = None) -> None:
        ptr = _ptr if _ptr is not None else ll.topology_create(list(axes), list(dims))
        self._handle: Optional[Handle] = Handle(ptr, ll.ds_topology_destroy)
        n = ll.ds_topology_num_axes(ptr)
        self.axes: List[str] = []
        self.dims: List[int] = []
        for i in range(n):
            name, dim = ll.ds_topology_axis(ptr, i)
            self.axes.append(name)
            self.dims.append(dim)
        self.ProcessCoord = collections.namedtuple("ProcessCoord", self.axes)  # type: ignore[misc]

    @classmethod
    def pipe_data(cls, num_pp: int, num_dp: int) -> "Topology":
        """PipeDataParallelTopology: axes pipe, data."""
        return cls((), (), _ptr=ll.ds_topology_create_pipe_data(num_pp, num_dp))

    @classmethod
    def pipe_model_data(cls, num_pp: int, num_mp: int, num_dp: int) -> "Topology":
        """PipeModelDataParallelTopology: axes pipe, data, model (dims pp, dp, mp)."""
        return cls((), (), _ptr=ll.ds_topology_create_pipe_model_data(num_pp, num_mp, num_dp))

    @classmethod
    def default(cls, world_size: int) -> "Topology":
        """PipelineParallelGrid's default: prime factors dealt to pipe and data."""
        return cls((), (), _ptr=ll.ds_topology_create_default(world_size))

    def _ptr(self) -> Any:
        if self._handle is None:
            raise InvalidStateError(ll.DS_ERR_INVALID_HANDLE, "deepspeed_c.Topology: used after close()")
        return self._handle.ptr

    def world_size(self) -> int:
        """The number of ranks (the product of the dims)."""
        return ll.ds_topology_world_size(self._ptr())

    def get_axis_names(self) -> List[str]:
        """The axes in order."""
        return list(self.axes)

    def get_dim(self, axis: str) -> int:
        """The size of ``axis``; 0 when there is no such axis."""
        return ll.ds_topology_dim(self._ptr(), axis)

    def get_rank(self, **coord_kwargs: int) -> int:
        """The rank at ``axis=coord`` for every axis."""
        missing = [a for a in self.axes if a not in coord_kwargs]
        extra = [a for a in coord_kwargs if a not in self.axes]
        if missing or extra:
            raise ValueError(f"get_rank: needs every axis {self.axes}"
                             + (f", missing {missing}" if missing else "") + (f", unknown {extra}" if extra else ""))
        return ll.topology_rank_of(self._ptr(), [int(coord_kwargs[a]) for a in self.axes])

    def get_coord(self, rank: int) -> Any:
        """The ProcessCoord named tuple of ``rank``."""
        return self.ProcessCoord(*ll.topology_coord_of(self._ptr(), int(rank)))

    def get_axis_comm_lists(self, axis: str) -> List[List[int]]:
        """One rank list per combination of the other axes ([] for an axis the topology lacks)."""
        return ll.topology_axis_comm_lists(self._ptr(), axis)

    def filter_match(self, **filter_kwargs: int) -> List[int]:
        """The ranks (increasing) whose coordinates match every ``axis=coord``."""
        return ll.topology_filter_match(self._ptr(), list(filter_kwargs), [int(v) for v in filter_kwargs.values()])

    def get_axis_list(self, axis: str, idx: int) -> List[int]:
        """The ranks whose ``axis`` coordinate is ``idx``."""
        return self.filter_match(**{axis: idx})

    def get_rank_repr(self, rank: int, omit_axes: Optional[Sequence[str]] = ("data", "pipe"),
                      inner_sep: str = "_", outer_sep: str = "-") -> str:
        """e.g. "model_01" ("<axis>_<coord:02>" joined by "-", the omitted axes left
        out; None omits none). The separators are DeepSpeed's defaults only."""
        if inner_sep != "_" or outer_sep != "-":
            raise ValueError("get_rank_repr: only inner_sep='_' and outer_sep='-' are supported")
        return ll.topology_rank_repr(self._ptr(), int(rank), [] if omit_axes is None else list(omit_axes))

    def comm(self, axis: str, world: Comm) -> Comm:
        """This rank's communicator along ``axis`` (collective over ``world``; new rank = coordinate)."""
        return Comm(ll.ds_topology_comm(self._ptr(), world._ptr(), axis))

    def group_comm(self, axes: Sequence[str], world: Comm) -> Comm:
        """The ranks sharing this rank's coordinates on every axis not in ``axes`` (collective)."""
        return Comm(ll.topology_group_comm(self._ptr(), world._ptr(), list(axes)))

    def close(self) -> None:
        """Release the topology; later calls raise InvalidStateError."""
        self._handle = None

    def __repr__(self) -> str:
        return "Topology(" + ", ".join(f"{a}={d}" for a, d in zip(self.axes, self.dims)) + ")"


ProcessTopology = Topology


def PipeDataParallelTopology(num_pp: int, num_dp: int) -> Topology:
    """DeepSpeed's PipeDataParallelTopology: axes pipe, data."""
    return Topology.pipe_data(num_pp, num_dp)


def PipeModelDataParallelTopology(num_pp: int, num_mp: int, num_dp: int) -> Topology:
    """DeepSpeed's PipeModelDataParallelTopology: axes pipe, data, model."""
    return Topology.pipe_model_data(num_pp, num_mp, num_dp)


def partition_layers(method: str, num_stages: int, *, num_layers: Optional[int] = None,
                     param_counts: Optional[Sequence[int]] = None,
                     type_names: Optional[Sequence[str]] = None) -> List[int]:
    """Stage boundaries as DeepSpeed's PipelineModule computes them: stage s holds layers
    ``parts[s]:parts[s + 1]``. ``method``: "uniform", "parameters" (balanced by
    ``param_counts``) or "type:<regex>" (balanced by the layers whose ``type_names`` entry
    matches). ``num_layers`` defaults to the length of the list given."""
    if num_layers is None:
        given = param_counts if param_counts is not None else type_names
        if given is None:
            raise ValueError("partition_layers: give num_layers, param_counts or type_names")
        num_layers = len(given)
    return ll.pipe_partition(method, int(num_layers), None if param_counts is None else list(param_counts),
                             None if type_names is None else list(type_names), int(num_stages))


def pipe_send(comm: Comm, tensor: Any, peer: int, tag: int = 0) -> None:
    """Send a host array (dtype, shape, bytes) to rank ``peer`` of ``comm``; tag in [0, 32767]."""
    from .engine import tensor_arg
    ll.ds_pipe_send(comm._ptr(), tensor_arg(tensor), int(peer), int(tag))


def pipe_recv(comm: Comm, out: Any, peer: int, tag: int = 0) -> Any:
    """Receive into the writable host array ``out`` (the sent dtype and shape); returns ``out``."""
    ll.ds_pipe_recv(comm._ptr(), out, int(peer), int(tag))
    return out


__all__ = ["PipeInstr", "PipeSchedule", "TrainSchedule", "InferenceSchedule", "DataParallelSchedule",
           "Topology", "ProcessTopology", "PipeDataParallelTopology", "PipeModelDataParallelTopology",
           "partition_layers", "pipe_send", "pipe_recv"]
