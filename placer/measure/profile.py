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
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from placer.errors import PlacerError
from placer.graph import OpGraph
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
    """

    kernel_seconds: dict[str, float]
    overhead: float
    step_seconds: float
    runs: int
    scale: float = 1.0
    meta: dict[str, Any] = field(default_factory=dict)

    def op_seconds(self, graph: OpGraph) -> np.ndarray:
        """Cost of each op of `graph` (graph order): scaled kernel time + overhead (ops not traced: overhead)."""
        return np.array([self.scale * self.kernel_seconds.get(op.name, 0.0) + self.overhead for op in graph.ops])


def profile_ops(graph: OpGraph, graph_def=None, *, runs: int = 10, warmup: int = 3, seed: int = 0) -> Profile:
    """Time every op of `graph`'s TensorFlow step on one CPU, one thread.

    Parameters
    ----------
    graph : a graph with a TensorFlow origin (see `placer.measure.source`).
    graph_def : its GraphDef, if not embedded.
    runs : traced steps (and as many untraced) the medians are taken over.
    warmup : untimed steps first.

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
    one = Placement(graph.name, "local:1", "profile", {op.name: "/device:CPU:0" for op in graph})
    samples: dict[str, list[float]] = {op.name: [] for op in graph}
    with PlacedStep(graph, graph_def, one, 1, inter_op_threads=1, seed=seed) as step:
        untraced = step.time(warmup, runs)
        for _ in range(runs):
            seen: dict[str, float] = {}
            for dev in step.trace().step_stats.dev_stats:
                for ns in dev.node_stats:
                    if ns.node_name in samples:
                        micros = max(ns.op_end_rel_micros - ns.op_start_rel_micros, RESOLUTION / 2)
                        seen[ns.node_name] = seen.get(ns.node_name, 0.0) + micros * 1e-6
            for name, s in seen.items():
                samples[name].append(s)
        untraced += step.time(0, runs)
    kernel = {name: float(np.median(s)) for name, s in samples.items() if s}
    step_seconds = float(np.median(untraced))
    total = float(sum(kernel.values()))
    scale = min(1.0, step_seconds / total) if total > 0 else 1.0
    overhead = max(step_seconds - total, 0.0) / len(graph)
    return Profile(kernel, overhead, step_seconds, runs, scale,
                   meta={"ops_traced": len(kernel), "kernel_seconds_total": total})


def with_profile(graph: OpGraph, profile: Profile, kind: str = LOCAL_KIND) -> OpGraph:
    """A copy of `graph` whose ops cost `profile`'s seconds on devices of `kind`."""
    out = copy.deepcopy(graph)
    for op, seconds in zip(out.ops, profile.op_seconds(graph)):
        op.cost[kind] = float(seconds)
    out.meta["profile"] = {"kind": kind, "overhead": profile.overhead, "scale": profile.scale,
                           "step_seconds": profile.step_seconds, "runs": profile.runs, **profile.meta}
    return out
