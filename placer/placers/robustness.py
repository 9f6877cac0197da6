"""Robustness: rescore placements in perturbed worlds.

A placement is made once, in the nominal world (the graph and cluster as
given). A simulator is only a model of the machine, so `robustness` rescores
each placement, unchanged, by the same simulator in worlds where the model's
numbers are off (`perturbed_worlds`), and reports each method's ratio to the
best heuristic of that world: the heuristic placement that is fastest there,
ranked by `placer.placers.best.rank` (one that fits in memory first). A
method that wins only because the model is kind to it loses its lead in some
world; its worst ratio says by how much.

The worlds, in this order (each repeatable from `seed`):

- ``nominal``: the graph and cluster as given;
- ``cost-sigma0.2#k`` and ``cost-sigma0.5#k`` (k = 1..n): every op's compute
  time on every device times one lognormal factor per op (median 1, sigma 0.2
  or 0.5), drawn from ``numpy.random.default_rng((seed, world index))``;
- ``bandwidth-x0.5`` and ``bandwidth-x2``: every link's bandwidth (flat links,
  the default link and topology links alike) times the factor; an op's own
  profiled ``transfer_time`` (bytes over a link) divided by it;
- ``latency-x5``: every link's latency times 5 (a profiled ``transfer_time``
  is left as given: it does not say how much of it is latency);
- ``gpu-x2``: op times on devices of kind ``gpu`` halved and their
  ``peak_flops`` doubled (memory, links and the host unchanged).

Memory sizes never change, so a placement fits in every world iff it fits in
the nominal one.

`random_world` draws worlds around the nominal one for training (``placer
pretrain --world-sigma``), continuously rather than at these fixed points, so
that a policy is not trained on the very worlds it is judged in.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterator, NamedTuple

import numpy as np

from placer.cluster import Cluster
from placer.cost_model import op_time_matrix
from placer.graph import OpGraph
from placer.placers import registry
from placer.placers.best import rank
from placer.simulator import Simulator

COST_SIGMAS = (0.2, 0.5)
"""Sigmas of the lognormal op-cost factors; `n` worlds of each."""
MAX_COST_WORLDS = 100
"""The most op-cost worlds of each sigma (`n`): every world rescores every placement, so 2 n + 5 in all
bounds the time a request can ask for (a few worlds already say whether a lead holds)."""
BANDWIDTH_FACTORS = (0.5, 2.0)
LATENCY_FACTOR = 5.0
GPU_SPEEDUP = 2.0

ROBUSTNESS_FIELDS = ("graph", "cluster", "method", "geomean_ratio", "worst_ratio", "worst_world", "worlds")


class World(NamedTuple):
    """One world to rescore placements in."""

    name: str
    graph: OpGraph
    cluster: Cluster
    times: np.ndarray
    """Compute seconds ``[num_ops, num_devices]`` the simulator uses in this world."""


def scale_links(cluster: Cluster, bandwidth: float = 1.0, latency: float = 1.0) -> Cluster:
    """`cluster` with every link's bandwidth and latency multiplied: flat links, default link, topology links."""

    def link(l):
        return dataclasses.replace(l, bandwidth=l.bandwidth * bandwidth, latency=l.latency * latency)

    topology = cluster.topology
    if topology is not None:
        topology = dataclasses.replace(topology, links=[link(l) for l in topology.links])
    return dataclasses.replace(
        cluster, links={pair: link(l) for pair, l in cluster.links.items()},
        default_link=None if cluster.default_link is None else link(cluster.default_link),
        topology=topology)


def _scale_transfer_times(graph: OpGraph, factor: float) -> OpGraph:
    """`graph` with every op's profiled ``transfer_time`` multiplied by `factor` (the same graph if none has one)."""
    if all(op.transfer_time is None for op in graph.ops):
        return graph
    ops = [op if op.transfer_time is None else dataclasses.replace(op, transfer_time=op.transfer_time * factor)
           for op in graph.ops]
    return OpGraph(graph.name, ops, dict(graph.meta))


def perturbed_worlds(graph: OpGraph, cluster: Cluster, n: int, seed: int = 0) -> Iterator[World]:
    """The nominal world, then the perturbed ones (see the module docstring); 2 n + 5 in all."""
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_COST_WORLDS:
        raise ValueError(f"number of op-cost worlds must be an integer from 0 to {MAX_COST_WORLDS}, got {n!r}")
    times = op_time_matrix(graph, cluster)
    yield World("nominal", graph, cluster, times)
    index = 0
    for sigma in COST_SIGMAS:
        for k in range(1, n + 1):
            index += 1
            factor = np.random.default_rng((seed, index)).lognormal(0.0, sigma, size=len(graph))
            yield World(f"cost-sigma{sigma:g}#{k}", graph, cluster, times * factor[:, None])
    for f in BANDWIDTH_FACTORS:
        yield World(f"bandwidth-x{f:g}", _scale_transfer_times(graph, 1.0 / f), scale_links(cluster, bandwidth=f),
                    times)
    yield World(f"latency-x{LATENCY_FACTOR:g}", graph, scale_links(cluster, latency=LATENCY_FACTOR), times)
    gpu = np.array([d.kind == "gpu" for d in cluster.devices])
    faster = dataclasses.replace(cluster, devices=[
        dataclasses.replace(d, peak_flops=d.peak_flops * GPU_SPEEDUP) if d.kind == "gpu" else d
        for d in cluster.devices])
    yield World(f"gpu-x{GPU_SPEEDUP:g}", graph, faster, np.where(gpu[None, :], times / GPU_SPEEDUP, times))


def random_world(graph: OpGraph, cluster: Cluster, times: np.ndarray, rng: np.random.Generator,
                 sigma: float) -> World:
    """A world drawn around the nominal one (`times` its compute seconds ``[num_ops, num_devices]``).

    Every op's times on every device times one lognormal factor per op (sigma
    `sigma`); every link's bandwidth times one factor (sigma `sigma`) and its
    latency times another (sigma ``2 sigma``: latencies are the least known
    figures); the GPUs' op times divided by one factor (sigma `sigma`).
    Every factor has median 1, so the nominal world is the typical one.
    """
    if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma must be a non-negative number, got {sigma!r}")
    op_factor = rng.lognormal(0.0, sigma, size=len(graph))
    bandwidth, latency, gpu_speed = (float(x) for x in rng.lognormal(0.0, [sigma, 2 * sigma, sigma]))
    gpu = np.array([d.kind == "gpu" for d in cluster.devices])
    scaled = times * op_factor[:, None]
    scaled = np.where(gpu[None, :], scaled / gpu_speed, scaled)
    return World("random", _scale_transfer_times(graph, 1.0 / bandwidth),
                 scale_links(cluster, bandwidth=bandwidth, latency=latency), scaled)


def rescore(worlds: list[World], assignments: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step times ``[W, K]`` and OOM flags ``[W, K]`` of K assignments ``[K, num_ops]`` in each world."""
    steps, ooms = [], []
    for w in worlds:
        r = Simulator(w.graph, w.cluster, times=w.times).run_batch(assignments)
        steps.append(r.step_time)
        ooms.append(r.oom)
    return np.array(steps, dtype=np.float64), np.array(ooms, dtype=bool)


def robustness(graph: OpGraph, cluster: Cluster, placements: dict[str, np.ndarray], n: int, seed: int = 0,
               heuristics: list[str] | None = None) -> list[dict[str, Any]]:
    """Each method's ratio to the best heuristic across `perturbed_worlds`.

    Parameters
    ----------
    placements : assignment (device index per op) by method name, made in the nominal world.
    n, seed : as `perturbed_worlds`.
    heuristics : the methods that may be "the best heuristic"; default those of
        `placements` that are registered heuristics.

    Returns
    -------
    list of dict
        One row per method (in `placements` order) with `ROBUSTNESS_FIELDS`:
        ``geomean_ratio`` and ``worst_ratio`` of its step time over the best
        heuristic's across the worlds, the ``worst_world``'s name, the number
        of ``worlds``, and ``ratios`` by world. The ratios are None where no
        heuristic placement has a finite step time in some world.
    """
    if heuristics is None:
        known = set(registry.names(heuristic_only=True))
        heuristics = [m for m in placements if m in known]
    methods = list(placements)
    worlds = list(perturbed_worlds(graph, cluster, n, seed))
    rows = [{"graph": graph.name, "cluster": cluster.name, "method": m, "geomean_ratio": None,
             "worst_ratio": None, "worst_world": None, "worlds": len(worlds)} for m in methods]
    if not methods:
        return rows
    steps, ooms = rescore(worlds, np.array([placements[m] for m in methods], dtype=np.int64))
    h = [methods.index(m) for m in heuristics if m in placements]
    best = []
    for w in range(len(worlds)):
        first = h[rank([steps[w, i] for i in h], [ooms[w, i] for i in h])[0]] if h else None
        t = None if first is None else steps[w, first]
        best.append(t if t is not None and math.isfinite(t) and t > 0 else None)
    if any(b is None for b in best):
        return rows
    ratios = steps / np.array(best)[:, None]  # [W, K]
    for k, row in enumerate(rows):
        r = ratios[:, k]
        worst = int(np.argmax(r))
        row.update(geomean_ratio=float(np.exp(np.mean(np.log(r)))), worst_ratio=float(r[worst]),
                   worst_world=worlds[worst].name,
                   ratios={w.name: float(x) for w, x in zip(worlds, r)})
    return rows
