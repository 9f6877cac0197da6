"""Profile each op's time on this machine's CPU, so the simulator uses real costs.

The whole step runs on one logical CPU with one inter-op thread and one
intra-op thread (ops one after another, as the simulator runs a device), with
TensorFlow's full trace on; each node's kernel time is read from the step
stats (``op_end_rel_micros - op_start_rel_micros``) and the median over the
traced runs is kept. Untraced steps fix the total: one op after another on
one thread, the step time is the sum of the op costs, so

- where the kernel times sum to less than the untraced step, the rest (the
  executor's own work between kernels) is spread evenly over the ops as a
  per-op overhead;
- where they sum to more (tracing slows small kernels down), they are scaled
  down in proportion, keeping their ratios.

The costs go into each op's ``cost`` under a device kind of their own
(default ``"cpu-local"``, the kind of the ``local`` preset's devices), so
they apply to this machine's logical CPUs and never to another cluster's CPU.
A step can be profiled on any local device (``/device:GPU:0``); `with_profile`
with a `placer.measure.fit.RooflineFit` leaves the ops the trace did not see
without a cost, so the cost model's fitted roofline estimates them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from placer.cluster import Device
from placer.cost_model import FIT_KEY
from placer.errors import PlacerError
from placer.graph import OpGraph
from placer.measure.fit import RooflineFit, fit_roofline
from placer.placement import Placement

LOCAL_KIND = "cpu-local"
RESOLUTION = 1.0
"""Step stats count whole microseconds: a kernel read as 0 took under 1 us, and counts as half of one."""


@dataclass
class Profile:
    """Per-op kernel seconds on this CPU and the executor's per-op overhead.

    Attributes
    ----------
    kernel_seconds : median kernel time of each op that ran (by op name).
    overhead : seconds per op the executor spends besides kernels.
    scale : factor on kernel times so that they sum to the untraced step (<= 1).
    step_seconds : median untraced step time, all ops on one device, one thread.
    runs : traced runs the medians are over.
    pool_ratio : the step on TF's default inter-op pool over the step on one thread (measured
        interleaved; None: not measured).
    """

    kernel_seconds: dict[str, float]
    overhead: float
    step_seconds: float
    runs: int
    scale: float = 1.0
    pool_ratio: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def op_seconds(self, graph: OpGraph, pool: bool = False) -> np.ndarray:
        """Cost of each op of `graph` (graph order): scaled kernel time + overhead (ops not traced: overhead);
        with `pool`, times `pool_ratio` (see `profile_ops`)."""
        factor = self.pool_ratio if pool and self.pool_ratio is not None else 1.0
        return factor * np.array([self.scale * self.kernel_seconds.get(op.name, 0.0) + self.overhead
                                  for op in graph.ops])


def profile_ops(graph: OpGraph, graph_def=None, *, device: str = "/device:CPU:0", runs: int = 10, warmup: int = 3,
                seed: int = 0, pool: bool = False,
                progress: Callable[[str, int, int], None] | None = None) -> Profile:
    """Time every op of `graph`'s TensorFlow step on one device, one inter-op thread.

    Parameters
    ----------
    graph : a graph with a TensorFlow origin (see `placer.measure.source`).
    graph_def : its GraphDef, if not embedded.
    device : the local device every op runs on (``/device:CPU:k`` makes k + 1 logical CPUs).
    runs : traced steps (and as many untraced) the medians are taken over.
    warmup : untimed steps first.
    pool : also time the step on TF's default inter-op thread pool, as ``placer measure`` runs it,
        interleaved with one-thread steps: `Profile.pool_ratio`. Logical CPU devices share that pool,
        and the simulator runs them one op at a time (``shared_threads=1``); the step TF runs overlaps
        some ops on the pool's other threads, so one-thread costs times this ratio are each op's
        share of the step as it is measured.
    progress : called as ``(phase, done, total)`` after each step ("warmup", "timed", "profiled": traced).

    Raises
    ------
    NoTensorFlowOrigin
        If the graph has no GraphDef behind it.
    """
    from placer.measure.runner import PlacedStep
    from placer.measure.source import graphdef_of

    if runs < 1 or warmup < 0:
        raise PlacerError(f"need runs >= 1 and warmup >= 0, got runs={runs}, warmup={warmup}")
    if graph_def is None:
        graph_def = graphdef_of(graph)
    from placer.measure.pinning import canonical_device

    device = canonical_device(device)
    kind, _, index = device.rpartition(":")
    num_cpus = int(index) + 1 if kind == "/device:CPU" else 1
    one = Placement(graph.name, f"local:{num_cpus}", "profile", {op.name: device for op in graph})
    samples: dict[str, list[float]] = {op.name: [] for op in graph}
    report = progress or (lambda phase, done, total: None)
    with PlacedStep(graph, graph_def, one, num_cpus, inter_op_threads=1, seed=seed) as step:
        untraced = step.time(warmup, runs, report)
        for k in range(runs):
            seen: dict[str, float] = {}
            for dev in step.trace().step_stats.dev_stats:
                for ns in dev.node_stats:
                    if ns.node_name in samples:
                        micros = max(ns.op_end_rel_micros - ns.op_start_rel_micros, RESOLUTION / 2)
                        seen[ns.node_name] = seen.get(ns.node_name, 0.0) + micros * 1e-6
            for name, s in seen.items():
                samples[name].append(s)
            report("profiled", k + 1, runs)
        untraced += step.time(0, runs, report)
        pool_ratio = _pool_ratio(step, PlacedStep(graph, graph_def, one, num_cpus, seed=seed), warmup, runs,
                                 report) if pool else None
    kernel = {name: float(np.median(s)) for name, s in samples.items() if s}
    step_seconds = float(np.median(untraced))
    total = float(sum(kernel.values()))
    scale = min(1.0, step_seconds / total) if total > 0 else 1.0
    overhead = max(step_seconds - total, 0.0) / len(graph)
    return Profile(kernel, overhead, step_seconds, runs, scale, pool_ratio,
                   meta={"device": device, "ops_traced": len(kernel), "kernel_seconds_total": total,
                         "pool_ratio": pool_ratio})


def _pool_ratio(one_thread, pooled, warmup: int, runs: int, report) -> float:
    """Median step on TF's default pool over median step on one thread, the two interleaved."""
    with pooled:
        pooled.time(warmup, 0)
        a, b = [], []
        for k in range(runs):
            a += pooled.time(0, 1)
            b += one_thread.time(0, 1)
            report("pooled", k + 1, runs)
    return float(np.median(a) / np.median(b))


def with_profile(graph: OpGraph, profile: Profile, kind: str = LOCAL_KIND, fit: RooflineFit | None = None,
                 pool: bool = False) -> OpGraph:
    """A copy of `graph` whose ops cost `profile`'s seconds on devices of `kind`.

    Without `fit`, an op the trace did not see costs the per-op overhead;
    with it, it gets no cost of `kind`, and the fit, stored in the meta
    (``meta["roofline_fit"][kind]``), estimates it. Profiles of other kinds
    already in the graph are kept. `pool`: costs times `Profile.pool_ratio`.
    """
    out = copy.deepcopy(graph)
    for op, seconds in zip(out.ops, profile.op_seconds(graph, pool)):
        if fit is None or op.name in profile.kernel_seconds:
            op.cost[kind] = float(seconds)
    entry = {"kind": kind, "overhead": profile.overhead, "scale": profile.scale,
             "step_seconds": profile.step_seconds, "runs": profile.runs, **profile.meta}
    if fit is None:
        out.meta["profile"] = entry
    else:
        out.meta.setdefault("profiles", {})[kind] = entry
        out.meta.setdefault(FIT_KEY, {})[kind] = fit.to_dict()
    return out


def fit_profile(graph: OpGraph, profile: Profile, device: Device, pool: bool = False) -> RooflineFit:
    """`device`'s roofline fitted to `profile`'s op costs (as `with_profile` writes them) of the ops it timed."""
    costs = profile.op_seconds(graph, pool)
    return fit_roofline(graph, {op.name: float(c) for op, c in zip(graph.ops, costs)
                                if op.name in profile.kernel_seconds}, device)
