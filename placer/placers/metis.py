"""`metis`: k-way graph partitioning with METIS (Karypis and Kumar 1998), via `pymetis`.

The graph of colocation units (see `placer.placers.common`) is cut into one
part per GPU: vertex weights are the units' compute time, edge weights the
bytes flowing between them, so METIS balances compute while cutting as few
bytes as it can. Balanced means equal time: when the GPUs differ in speed,
each part's target share of the weight (METIS's ``tpwgts``) is proportional
to its device's speed (`target_shares`), so a GPU twice as fast gets twice
the work. METIS sees no direction, so it ignores the schedule; that is
the method's known weakness against HEFT and the Baechi placers. Parts over
the memory estimate are then relieved by `fit_to_memory`.

On a topology (routes that share link directions) an edge weighs what its
transfers cost, not their bytes: each crossing's mean route time over the
GPU pairs (summed latency + bytes / bottleneck bandwidth,
`Problem.mean_comm_time`), so many small tensors weigh their latency; and
the parts go to the GPUs by `placer.placers.routes.route_mapping`, so that
parts that talk most do not queue on the same switch uplink. On a flat
cluster edges weigh bytes and part p goes to the p-th GPU, as METIS numbers them.
"""

from __future__ import annotations

import numpy as np

from placer.cluster import Cluster
from placer.errors import PlacerError
from placer.graph import OpGraph
from placer.placement import Placement
from placer.placers.common import Problem, expand_units, fit_to_memory
from placer.placers.registry import register
from placer.placers.routes import route_mapping

# METIS weights are C ints; sums must stay below 2**31 on 32-bit index builds.
_WEIGHT_SCALE = 2**20


def unit_graph(problem: Problem, op_weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Undirected unit graph as CSR ``(xadj, adjncy, weight)``, parallel edges summed.

    An edge from op i weighs ``op_weight[i]`` (its output bytes by default).
    """
    p_off, p_idx = problem.graph.predecessors
    dst = np.repeat(np.arange(problem.num_ops), np.diff(p_off))
    su, du = problem.unit[p_idx], problem.unit[dst]
    keep = su != du
    a = np.concatenate([su[keep], du[keep]])
    b = np.concatenate([du[keep], su[keep]])
    per_op = problem.out_bytes if op_weight is None else op_weight
    w = np.concatenate([per_op[p_idx[keep]]] * 2)
    U = problem.num_units
    key = a * U + b
    uniq, inverse = np.unique(key, return_inverse=True)
    weight = np.bincount(inverse, weights=w, minlength=len(uniq))
    rows, cols = uniq // U, uniq % U
    xadj = np.zeros(U + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=U), out=xadj[1:])
    return xadj, cols.astype(np.int64), weight


def _int_weights(x: np.ndarray) -> np.ndarray:
    """Positive integer weights proportional to `x`, with sums that fit a C int."""
    total = float(x.sum())
    if total <= 0:
        return np.ones(len(x), dtype=np.int64)
    return np.maximum(1, np.round(x / total * _WEIGHT_SCALE)).astype(np.int64)


MIN_SHARE = 1e-6
"""The least target share of a part: METIS reads shares as float32 and refuses one that is zero there, so a
device millions of times slower than the others is offered almost nothing rather than nothing."""


def target_shares(problem: Problem, devices: np.ndarray) -> np.ndarray | None:
    """Each device's share of the compute, proportional to its speed (1 / the graph's total time on it), at
    least `MIN_SHARE` of the whole.

    None when the devices are equally fast (METIS's default, equal parts).
    """
    total = problem.times[:, devices].sum(axis=0)
    if total.size == 0 or np.allclose(total, total[0], rtol=1e-9) or not (total > 0).all():
        return None
    speed = 1.0 / total
    shares = np.maximum(speed / speed.sum(), MIN_SHARE)
    return shares / shares.sum()


def partition_units(problem: Problem, k: int, unit_cost: np.ndarray, shares: np.ndarray | None = None,
                    op_weight: np.ndarray | None = None) -> tuple[int, np.ndarray]:
    """METIS's k-way cut of the unit graph (`unit_graph`; edges weigh `op_weight`, bytes by default), balancing
    `unit_cost` at target `shares` (None: equal parts): ``(edge cut, part per unit)``."""
    import pymetis

    xadj, adjncy, weight = unit_graph(problem, op_weight)
    eweights = _int_weights(weight) if len(weight) else None
    try:
        cut, part_list = pymetis.part_graph(
            k, pymetis.CSRAdjacency(xadj, adjncy), vweights=_int_weights(unit_cost), eweights=eweights,
            tpwgts=None if shares is None else shares.tolist(),
        )
    except RuntimeError as e:  # METIS's own input checks; the shares and part counts callers give pass them
        raise PlacerError(f"metis: METIS could not partition graph {problem.graph.name!r} into {k} parts ({e})") from e
    return cut, np.asarray(part_list, dtype=np.int64)


@register("metis", description="k-way METIS partition over the GPUs: balance compute, cut fewest bytes")
def place_metis(graph: OpGraph, cluster: Cluster) -> Placement:
    """Partition the unit graph into one part per GPU with METIS; see the module docstring."""
    problem = Problem.build(graph, cluster)
    devices = problem.candidates[:problem.num_units]  # no more parts than units: METIS cannot make empty ones
    k = len(devices)
    unit_cost = np.bincount(problem.unit, weights=problem.times[:, devices].min(axis=1),
                            minlength=problem.num_units)
    if k == 1 or problem.num_units <= 1:
        parts = np.zeros(problem.num_units, dtype=np.int64)
        cut = 0
    else:
        cut, parts = partition_units(problem, k, unit_cost, target_shares(problem, devices),
                                     problem.mean_comm_time(devices) if problem.routed else None)
    unit_device = devices[parts]
    unit_device, ledger = fit_to_memory(problem, route_mapping(problem, unit_device, devices)[unit_device], devices)
    return problem.placement(expand_units(problem, unit_device), "metis", ledger, edge_cut=int(cut))
