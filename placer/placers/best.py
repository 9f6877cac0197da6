"""The best heuristic placement: one rule for everyone who picks one.

A placement that fits in memory beats one that does not; then the lower cost
(simulated step time, or max load with the throughput objective) wins; a cost
that is missing or not finite counts as infinite; between equals the
candidate named first wins. `rank` is that rule; `ranked_heuristics` runs
the candidates (registered heuristics, and single devices named
``single_device:DEVICE``) and ranks them. The REST service's ``best``
(`service.placing.place_best`), ``placer compare``'s winners
(`placer.placers.comparison.winners`), the trainer's warm start
(`placer.rl.trainer`) and pre-training's teachers (`placer.rl.pretrain`)
all pick by it.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, Sequence

import numpy as np

from placer.cluster import Cluster
from placer.errors import PlacerError
from placer.graph import OpGraph
from placer.placers import registry

SINGLE_DEVICE = "single_device:"
"""Prefix of the candidate that puts every op on one device (``single_device:GPU:0``)."""


class Candidate(NamedTuple):
    """One scored candidate placement."""

    name: str
    """A heuristic's name, or ``single_device:DEVICE``."""
    assignment: np.ndarray
    """Device index of each op ``[num_ops]``."""
    cost: float
    """Simulated step time (max load with the throughput objective), or as the caller's `score` says."""
    oom: bool
    """Whether it runs out of memory."""


def _finite(cost: float | None) -> float:
    return float(cost) if cost is not None and math.isfinite(cost) else math.inf


def rank(costs: Sequence[float | None], ooms: Sequence[bool]) -> list[int]:
    """Indices of candidates, best first: those that fit, then by cost (missing or non-finite last);
    equal candidates keep their order."""
    return sorted(range(len(costs)), key=lambda i: (bool(ooms[i]), _finite(costs[i])))


def single_devices(cluster: Cluster) -> list[str]:
    """The single-device candidates of `cluster`, in device order."""
    return [f"{SINGLE_DEVICE}{d.name}" for d in cluster.devices]


def ranked_heuristics(graph: OpGraph, cluster: Cluster, names: Sequence[str] | None = None, *,
                      objective: str = "step_time",
                      score: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
                      sim=None) -> list[Candidate]:
    """Run each candidate and rank them (`rank`): the best first.

    Parameters
    ----------
    names : candidates in tie-break order: registered heuristics and ``single_device:DEVICE``
        (`single_devices`); default every single device, then every registered heuristic.
        A heuristic that cannot place the graph (`PlacerError`) is left out.
    objective : passed to `registry.place` (a heuristic that optimises it receives it).
    score : ``score(assignments [K, num_ops]) -> (cost [K], oom [K])`` scores every candidate at once
        instead (e.g. max loads, or placements once projected onto groups); by default a heuristic's cost
        is the step time `registry.place` simulated, a single device's that of `sim` (a
        `placer.simulator.Simulator` of the graph and cluster, made when not given).
    """
    if names is None:
        names = [*single_devices(cluster), *registry.names(heuristic_only=True)]
    device_index = {d.name: i for i, d in enumerate(cluster.devices)}
    placed: list[tuple[str, np.ndarray, float | None, bool | None]] = []
    for name in names:
        if name.startswith(SINGLE_DEVICE):
            placed.append((name, np.full(len(graph), device_index[name[len(SINGLE_DEVICE):]], dtype=np.int64),
                           None, None))
            continue
        try:
            p = registry.place(name, graph, cluster, objective=objective)
        except PlacerError:
            continue
        placed.append((name, p.assignment(graph, cluster), p.step_time, p.oom))
    if score is not None:
        cost, oom = score(np.stack([a for _, a, _, _ in placed]))
        scored = [Candidate(n, a, float(c), bool(o)) for (n, a, _, _), c, o in zip(placed, cost, oom)]
    else:
        if sim is None and any(t is None for _, _, t, _ in placed):
            from placer.simulator import Simulator

            sim = Simulator(graph, cluster)
        scored = []
        for name, assignment, step_time, oom in placed:
            if step_time is None:
                r = sim.run(assignment)
                step_time, oom = r.step_time, r.oom
            scored.append(Candidate(name, assignment, float(step_time), bool(oom)))
    order = rank([c.cost for c in scored], [c.oom for c in scored])
    return [scored[i] for i in order]
