"""Placement: which device runs each op, and what the simulator said of it.

The JSON form is a contract shared by the CLI, the service and every placer:
``{"graph", "cluster", "method", "devices": {op: device}, "step_time",
"peak_memory": {device: bytes}, "oom"}``, plus optional ``lower_bound``,
``objective``, ``max_load`` (the throughput objective, when asked for) and
``meta``.

Where a placement came from is a field, `Provenance`, never read back from a
name: the contract's ``method`` string (``best:heft``) and the names of
refined warm starts (``heft+search``) are spelled from it, here only.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from placer.cluster import Cluster
from placer.errors import PlacementError
from placer.fileio import read_json_file, write_atomic
from placer.graph import OpGraph


@dataclass(frozen=True)
class Provenance:
    """What happened to a placement after its method placed it.

    Attributes
    ----------
    chosen_by : the method that picked it among several placers' answers
        (``"best"``); None when its method was asked for directly.
    refined_by : what improved it since, in order (``"search"``: the local
        search of `placer.placers.refine`).
    """

    chosen_by: str | None = None
    refined_by: tuple[str, ...] = ()

    def label(self, method: str) -> str:
        """The contract's ``method``: `method`, after ``CHOOSER:`` when chosen among others (``best:heft``).

        Refinements are not part of it (``meta.refined`` details them): a
        refined heft placement is still heft's answer.
        """
        return f"{self.chosen_by}:{method}" if self.chosen_by else method

    def lineage(self, method: str) -> str:
        """`label`, then ``+`` and each refinement (``heft+search``): how refined warm starts and teachers are named."""
        return self.label(method) + "".join(f"+{r}" for r in self.refined_by)

    def refined(self, by: str) -> "Provenance":
        """This provenance with refinement `by` added."""
        return replace(self, refined_by=(*self.refined_by, by))

    @classmethod
    def of_lineage(cls, name: str) -> tuple[str, "Provenance"]:
        """``(method, provenance)`` of a name `lineage` spelled (refinements only): for names stored before
        this field existed (a pre-training run's ``teachers.json``), never for fresh placements."""
        method, *refined_by = name.split("+")
        return method, cls(refined_by=tuple(refined_by))


@dataclass
class Placement:
    """A device for every op of a graph, with its simulated cost.

    `step_time`, `peak_memory` and `oom` are filled by the simulator
    (`placer.simulator.evaluate`); a placement read from a user's file may
    lack them until it is simulated. `method` is what placed it (a registry
    name, ``"user"``); `provenance` what happened to it since, and `label`
    the contract's ``method`` spelled from both.
    """

    graph: str
    cluster: str
    method: str
    devices: dict[str, str]
    step_time: float | None = None
    peak_memory: dict[str, float] = field(default_factory=dict)
    oom: bool = False
    lower_bound: float | None = None
    objective: str = "step_time"
    meta: dict[str, Any] = field(default_factory=dict)
    max_load: float | None = None
    provenance: Provenance = Provenance()

    @property
    def label(self) -> str:
        """The contract's ``method`` string (`Provenance.label`): ``best:heft`` for heft's answer chosen by best."""
        return self.provenance.label(self.method)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "graph": self.graph,
            "cluster": self.cluster,
            "method": self.label,
            "devices": dict(self.devices),
            "step_time": self.step_time,
            "peak_memory": dict(self.peak_memory),
            "oom": self.oom,
            "objective": self.objective,
        }
        if self.lower_bound is not None:
            d["lower_bound"] = self.lower_bound
        if self.max_load is not None:
            d["max_load"] = self.max_load
        if self.meta:
            d["meta"] = self.meta
        return d

    @classmethod
    def from_dict(cls, data: Any) -> "Placement":
        """Parse the contract form; only ``devices`` is required.

        ``method`` is taken whole (a chosen answer read back, ``best:heft``,
        keeps that name with an empty `provenance`), so the contract's
        ``method`` survives a round trip.
        """
        if not isinstance(data, dict):
            raise PlacementError("placement: expected a JSON object with 'devices'")
        devices = data.get("devices")
        if not isinstance(devices, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in devices.items()
        ):
            raise PlacementError("placement: 'devices' must be an object mapping op names to device names")
        step = data.get("step_time")
        if step is not None and (not isinstance(step, (int, float)) or not math.isfinite(step)):
            raise PlacementError("placement: 'step_time' must be a number or null")
        max_load = data.get("max_load")
        if max_load is not None and (isinstance(max_load, bool) or not isinstance(max_load, (int, float))):
            raise PlacementError("placement: 'max_load' must be a number or null")
        return cls(
            graph=str(data.get("graph", "")),
            cluster=str(data.get("cluster", "")),
            method=str(data.get("method", "user")),
            devices=dict(devices),
            step_time=step,
            peak_memory=dict(data.get("peak_memory") or {}),
            oom=bool(data.get("oom", False)),
            lower_bound=data.get("lower_bound"),
            objective=str(data.get("objective", "step_time")),
            meta=dict(data.get("meta") or {}),
            max_load=max_load,
        )

    @classmethod
    def from_assignment(
        cls, graph: OpGraph, cluster: Cluster, assignment: np.ndarray, method: str, **extra: Any
    ) -> "Placement":
        """A placement from an array of device indices, one per op (graph order)."""
        names = cluster.device_names
        devices = {op.name: names[int(d)] for op, d in zip(graph.ops, assignment)}
        return cls(graph=graph.name, cluster=cluster.name, method=method, devices=devices, **extra)

    def assignment(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        """Device index per op of `graph`, checked against graph and cluster.

        Raises
        ------
        PlacementError
            If an op of the graph is not placed, an op is not in the graph, or a
            device is not in the cluster.
        """
        unknown_ops = [name for name in self.devices if name not in graph.index]
        if unknown_ops:
            raise PlacementError(
                f"placement names op {unknown_ops[0]!r} which graph {graph.name!r} does not have"
                + (f" (and {len(unknown_ops) - 1} more)" if len(unknown_ops) > 1 else "")
            )
        out = np.empty(len(graph), dtype=np.int64)
        aliases: dict[str, int] | None = None
        for i, op in enumerate(graph.ops):
            dev = self.devices.get(op.name)
            if dev is None:
                raise PlacementError(f"placement has no device for op {op.name!r}")
            k = cluster.index.get(dev)
            if k is None:  # another spelling of a TF device name ("GPU:1", "/gpu:1", "/job:.../device:GPU:1")
                if aliases is None:
                    aliases = _device_aliases(cluster)
                k = aliases.get(canonical_device_name(dev) or "")
            if k is None:
                raise PlacementError(
                    f"op {op.name!r} is placed on {dev!r}, which cluster {cluster.name!r} does not have "
                    f"(devices: {', '.join(cluster.device_names)})"
                )
            out[i] = k
        return out


_DEVICE_NAME = re.compile(r"^(?:/job:(?P<job>[^/]+))?(?:/replica:(?P<replica>\d+))?(?:/task:(?P<task>\d+))?"
                          r"(?P<slash>/)?(?:device:)?(?P<type>[A-Za-z_]+)(?::(?P<index>\d+))?$")


def canonical_device_name(name: str) -> str | None:
    """``"/device:GPU:1"`` for any TensorFlow spelling of a local device (``"GPU:1"``, ``"/gpu:1"``, the fully
    qualified ``"/job:localhost/replica:0/task:0/device:GPU:1"``; ``"/gpu"`` is index 0, as TensorFlow reads
    it); a device of another job or task keeps them, filled in (``"/job:worker/task:1/gpu:0"`` ->
    ``"/job:worker/replica:0/task:1/device:GPU:0"``), so the GPU 0 of two machines stay two devices. None for
    a name that is not one. No TensorFlow needed."""
    m = _DEVICE_NAME.match(name.strip())
    if m is None or (m["index"] is None and m["slash"] is None):  # a bare word ("dev") is no TF device name
        return None
    device = f"/device:{m['type'].upper()}:{int(m['index'] or 0)}"
    job, replica, task = m["job"], int(m["replica"] or 0), int(m["task"] or 0)
    if job in (None, "localhost") and replica == 0 and task == 0:
        return device
    if job is None:  # a task with no job: only what was given
        return "".join(f"/{k}:{int(m[k])}" for k in ("replica", "task") if m[k] is not None) + device
    return f"/job:{job}/replica:{replica}/task:{task}{device}"


def _device_aliases(cluster: Cluster) -> dict[str, int]:
    """Canonical TF device name -> device index, for the cluster's devices whose names are TF device names."""
    out: dict[str, int] = {}
    for k, name in enumerate(cluster.device_names):
        canonical = canonical_device_name(name)
        if canonical is not None:
            out.setdefault(canonical, k)
    return out


def split_colocation_groups(graph: OpGraph, assignment: np.ndarray) -> list[str]:
    """Colocation keys whose ops `assignment` puts on more than one device.

    TensorFlow keeps such ops together (a variable and the ops updating it): a placement that splits
    them cannot run as given, so a step time simulated for it is not one TensorFlow would show.
    """
    return [key for key, ix in graph.colocation_groups().items()
            if len(ix) > 1 and len(set(np.asarray(assignment)[ix].tolist())) > 1]


def load_placement(path: str | os.PathLike) -> Placement:
    """Read a placement file (the contract form)."""
    data = read_json_file(path, "placement")
    try:
        return Placement.from_dict(data)
    except PlacementError as e:
        raise PlacementError(f"placement file {str(path)!r}: {e}") from None


def save_placement(placement: Placement, path: str | os.PathLike) -> None:
    write_atomic(Path(path), json.dumps(placement.to_dict(), indent=1).encode())
